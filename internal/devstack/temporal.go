package devstack

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/temporaldev"
	"github.com/astrabox/astrabox/workflows"
)

// findTemporal locates the Temporal CLI: the configured path, ./bin/temporal,
// next to the running binary, then PATH.
func findTemporal(configured string) (string, error) {
	if configured != "" {
		if _, err := os.Stat(configured); err != nil {
			return "", fmt.Errorf("dev.temporal_bin %s: %w", configured, err)
		}
		return configured, nil
	}
	candidates := []string{filepath.Join("bin", "temporal")}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "temporal"))
	}
	for _, c := range candidates {
		if info, err := os.Stat(c); err == nil && !info.IsDir() {
			return filepath.Abs(c)
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", errors.New("the Temporal CLI was not found in ./bin, next to astrabox or on PATH: run `make deps` (it builds github.com/temporalio/cli v1.5.1 into ./bin)")
}

// startTemporal starts the supervised dev server. A port already in use at this
// first start is an error naming the setting to change.
func startTemporal(opts temporaldev.Options, log *zap.Logger) (*temporaldev.Server, error) {
	for _, p := range []struct {
		port int
		key  string
	}{{opts.Port, "dev.temporal_port"}, {opts.UIPort, "dev.temporal_ui_port"}} {
		if err := portFree(p.port); err != nil {
			return nil, fmt.Errorf("temporal dev server: port %d is already in use (set %s to another): %w", p.port, p.key, err)
		}
	}
	for name, kind := range workflows.SearchAttributeNames() {
		opts.ExtraArgs = append(opts.ExtraArgs, "--search-attribute", name+"="+kind)
	}
	return temporaldev.Start(opts, log)
}

func portFree(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}
