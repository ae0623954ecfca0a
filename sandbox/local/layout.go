package local

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// The state dir holds, per box, boxes/<id>/ with:
//
//	box.json     the record below (root, 0600)
//	status.json  bubblewrap's --json-status-fd output (child pid, exit code)
//	box.log      bubblewrap's and the runner's own stderr
//	etc/         generated passwd and group
//	control/     bound read-write at /run/astrabox (owned by the runner's uid,
//	             0700): the runner's socket, boot config, journals and death note
//	egress/      bound read-only at /run/egress: the host's egress sockets
//	workspace/   the ephemeral workspace (uid-owned, 0700)
//
// plus volumes/<name>/ for persistent workspaces and uids/<uid> reservations
// (two per box: the program's account and the runner's).

// record is a box's durable description, enough for a restarted worker to find
// the box again, check it is the same process and clean it up.
type record struct {
	ID string `json:"id"`
	// UID is the program's account (uid = gid); RunnerUID is the runner's, the
	// box's root. Both come from the backend's range and belong to this box.
	UID       int          `json:"uid"`
	RunnerUID int          `json:"runner_uid"`
	Spec      sandbox.Spec `json:"spec"`
	CreatedAt time.Time    `json:"created_at"`
	// BwrapPID is the box's outer process, the launcher that waits for
	// bubblewrap (bubblewrap itself on boxes of earlier backends); it exits when
	// the runner does.
	BwrapPID   int    `json:"bwrap_pid"`
	BwrapStart uint64 `json:"bwrap_start"`
	// InitPID is pid 1 of the box's namespace; killing it ends every process.
	InitPID   int    `json:"init_pid"`
	InitStart uint64 `json:"init_start"`
	BootID    string `json:"boot_id"`
	Cgroups   bool   `json:"cgroups"`
	Paused    bool   `json:"paused"`
	// Pool names the backend instance whose prewarm pool holds the box; empty
	// once claimed (or for boxes created on demand).
	Pool string `json:"pool,omitempty"`
	// EgressPID is the box's egress forwarder (astrabox-runner egress), which
	// outlives workers; EgressDigest identifies the configuration it serves.
	EgressPID    int    `json:"egress_pid,omitempty"`
	EgressStart  uint64 `json:"egress_start,omitempty"`
	EgressDigest string `json:"egress_digest,omitempty"`
	// MakerPID and MakerStart are the worker process making the box, and Made is
	// set once it has (its Create returned it): until then the box is its maker's
	// alone (makingElsewhere). Records of earlier backends have neither.
	MakerPID   int    `json:"maker_pid,omitempty"`
	MakerStart uint64 `json:"maker_start,omitempty"`
	Made       bool   `json:"made,omitempty"`
}

func newID(prefix string) string {
	var raw [6]byte
	_, _ = rand.Read(raw[:])
	return prefix + hex.EncodeToString(raw[:])
}

func (b *Backend) boxDir(id string) string { return filepath.Join(b.opts.StateDir, "boxes", id) }
func (b *Backend) uidFile(uid int) string {
	return filepath.Join(b.opts.StateDir, "uids", strconv.Itoa(uid))
}
func (b *Backend) volumeDir(n string) string { return filepath.Join(b.opts.StateDir, "volumes", n) }

func workspaceDir(dir string, spec sandbox.Spec, volumes func(string) string) string {
	if spec.Workspace.Kind == sandbox.WorkspacePersistent {
		return volumes(spec.Workspace.Volume)
	}
	return filepath.Join(dir, "workspace")
}

// recordName is the file in a box's folder that records it (record).
const recordName = "box.json"

// writeRecord replaces the box's record whole. The new record is written to a file
// of this call's own and renamed over the old one: worker processes sharing the
// machine's boxes may write one box's record at once, and a reader must never see
// a record half written.
func writeRecord(dir string, rec record) error {
	raw, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode box record: %w", err)
	}
	f, err := os.CreateTemp(dir, recordName+".*.tmp")
	if err != nil {
		return fmt.Errorf("write box record: %w", err)
	}
	_, err = f.Write(raw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write box record: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, recordName)); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("commit box record: %w", err)
	}
	return nil
}

func readRecord(dir string) (record, error) {
	var rec record
	raw, err := os.ReadFile(filepath.Join(dir, recordName))
	if err != nil {
		return rec, fmt.Errorf("read box record: %w", err)
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, fmt.Errorf("decode box record %s: %w", dir, err)
	}
	return rec, nil
}

// allocateUID reserves a free uid from the range by creating its reservation
// file exclusively, which also holds between worker processes.
func (b *Backend) allocateUID(id string) (int, error) {
	if err := os.MkdirAll(filepath.Join(b.opts.StateDir, "uids"), 0o700); err != nil {
		return 0, fmt.Errorf("create uid dir: %w", err)
	}
	b.mu.Lock()
	start := b.nextUID
	b.mu.Unlock()
	for i := 0; i < b.opts.UIDCount; i++ {
		uid := b.opts.UIDFirst + (start+i)%b.opts.UIDCount
		f, err := os.OpenFile(b.uidFile(uid), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reserve uid %d: %w", uid, err)
		}
		_, err = f.WriteString(id)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("reserve uid %d: %w", uid, err)
		}
		b.mu.Lock()
		b.nextUID = (start + i + 1) % b.opts.UIDCount
		b.mu.Unlock()
		return uid, nil
	}
	return 0, fmt.Errorf("local sandbox: all %d uids from %d are in use: widen the uid range or reap boxes",
		b.opts.UIDCount, b.opts.UIDFirst)
}

// procStart returns a process's start time in clock ticks (field 22 of
// /proc/<pid>/stat), used to tell a recorded process from a reused pid.
func procStart(pid int) (uint64, bool) {
	start, _, ok := procStat(pid)
	return start, ok
}

// procStat returns a process's start time and its state letter (Z for a
// process that ended and is not reaped yet).
func procStat(pid int) (uint64, string, bool) {
	if pid <= 0 {
		return 0, "", false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	// The command name may hold spaces; fields count from after its ')'.
	i := len(raw) - 1
	for i >= 0 && raw[i] != ')' {
		i--
	}
	fields := splitFields(string(raw[i+1:]))
	if len(fields) < 20 {
		return 0, "", false
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	return v, fields[0], err == nil
}

// running reports whether pid is still the process that started at start and
// has not ended (an ended child of this process stays a zombie until reaped).
func running(pid int, start uint64) bool {
	got, state, ok := procStat(pid)
	return ok && got == start && state != "Z"
}

func splitFields(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		if r == ' ' || r == '\n' {
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// alive reports whether pid is still the process that started at start.
func alive(pid int, start uint64) bool {
	got, ok := procStart(pid)
	return ok && got == start
}

// bwrapStatus is what bubblewrap writes to --json-status-fd.
type bwrapStatus struct {
	ChildPID int  `json:"child-pid"`
	ExitCode *int `json:"exit-code"`
}

// readStatus merges the JSON objects bubblewrap wrote to the status file.
func readStatus(dir string) (bwrapStatus, error) {
	var st bwrapStatus
	raw, err := os.ReadFile(filepath.Join(dir, "status.json"))
	if err != nil {
		return st, fmt.Errorf("read bwrap status: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var part bwrapStatus
		if err := dec.Decode(&part); err != nil {
			return st, fmt.Errorf("decode bwrap status: %w", err)
		}
		if part.ChildPID != 0 {
			st.ChildPID = part.ChildPID
		}
		if part.ExitCode != nil {
			st.ExitCode = part.ExitCode
		}
	}
	return st, nil
}
