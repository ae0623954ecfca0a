package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Resource keys of a RuntimeProfile's resources object, in Kubernetes' and
// OpenSandbox's quantity notation: {"cpu": "500m", "memory": "2Gi", "pids": 512,
// "tmp": "256Mi", "disk": "10Gi"}.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
	ResourcePids   = "pids"
	ResourceTmp    = "tmp"
	ResourceDisk   = "disk"
)

// ParseResources reads a resources object into Limits. Absent keys stay zero
// (the backend's default). Unknown keys and malformed quantities are errors
// wrapping ErrInvalidSpec, so a typo never silently leaves a box unbounded.
func ParseResources(raw json.RawMessage) (Limits, error) {
	var l Limits
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return l, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return l, fmt.Errorf("%w: resources must be a JSON object: %v", ErrInvalidSpec, err)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v any
		if err := json.Unmarshal(obj[k], &v); err != nil {
			return l, fmt.Errorf("%w: resources.%s: %v", ErrInvalidSpec, k, err)
		}
		var err error
		switch k {
		case ResourceCPU:
			l.CPUMillis, err = ParseCPU(v)
		case ResourceMemory:
			l.MemoryBytes, err = ParseBytes(v)
		case ResourcePids:
			l.Pids, err = parseCount(v)
		case ResourceTmp:
			l.TmpBytes, err = ParseBytes(v)
		case ResourceDisk:
			l.WorkspaceBytes, err = ParseBytes(v)
		default:
			err = fmt.Errorf("unknown resource (known: %s, %s, %s, %s, %s)", ResourceCPU, ResourceMemory, ResourcePids,
				ResourceTmp, ResourceDisk)
		}
		if err != nil {
			return Limits{}, fmt.Errorf("%w: resources.%s: %v", ErrInvalidSpec, k, err)
		}
	}
	return l, nil
}

// binarySuffixes and decimalSuffixes are the quantity suffixes understood for
// bytes, as in Kubernetes ("512Mi", "2G").
var (
	binarySuffixes  = map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
	decimalSuffixes = map[string]int64{"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
)

// ParseBytes reads a byte quantity: a JSON number of bytes or a string such as
// "512Mi", "2Gi", "1G" or "1048576". Zero and "" mean unset.
func ParseBytes(v any) (int64, error) {
	switch x := v.(type) {
	case float64:
		return wholeNonNegative(x)
	case string:
		s := strings.TrimSpace(x)
		if s == "" {
			return 0, nil
		}
		for _, table := range []map[string]int64{binarySuffixes, decimalSuffixes} {
			for suf, mult := range table {
				if num, ok := strings.CutSuffix(s, suf); ok {
					f, err := strconv.ParseFloat(num, 64)
					if err != nil {
						return 0, fmt.Errorf("%q is not a byte quantity", x)
					}
					return wholeNonNegative(f * float64(mult))
				}
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a byte quantity (use bytes or a suffix Ki, Mi, Gi, Ti, k, M, G, T)", x)
		}
		return wholeNonNegative(f)
	}
	return 0, fmt.Errorf("%v is not a byte quantity", v)
}

// ParseCPU reads a CPU quantity in thousandths of a core: a JSON number of
// cores (1.5) or a string of cores ("2", "0.5") or millicores ("500m"). Zero
// and "" mean unset.
func ParseCPU(v any) (int64, error) {
	switch x := v.(type) {
	case float64:
		return wholeNonNegative(x * 1000)
	case string:
		s := strings.TrimSpace(x)
		if s == "" {
			return 0, nil
		}
		if num, ok := strings.CutSuffix(s, "m"); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("%q is not a CPU quantity", x)
			}
			return wholeNonNegative(f)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a CPU quantity (use cores, \"1.5\", or millicores, \"500m\")", x)
		}
		return wholeNonNegative(f * 1000)
	}
	return 0, fmt.Errorf("%v is not a CPU quantity", v)
}

func parseCount(v any) (int64, error) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) {
		return 0, fmt.Errorf("%v is not a whole number", v)
	}
	return wholeNonNegative(f)
}

func wholeNonNegative(f float64) (int64, error) {
	if f < 0 || math.IsNaN(f) || f > math.MaxInt64/2 {
		return 0, fmt.Errorf("%v is out of range", f)
	}
	return int64(math.Round(f)), nil
}

// Or returns l with every zero field taken from d.
func (l Limits) Or(d Limits) Limits {
	pick := func(v, def int64) int64 {
		if v == 0 {
			return def
		}
		return v
	}
	return Limits{CPUMillis: pick(l.CPUMillis, d.CPUMillis), MemoryBytes: pick(l.MemoryBytes, d.MemoryBytes),
		Pids: pick(l.Pids, d.Pids), TmpBytes: pick(l.TmpBytes, d.TmpBytes),
		WorkspaceBytes: pick(l.WorkspaceBytes, d.WorkspaceBytes)}
}
