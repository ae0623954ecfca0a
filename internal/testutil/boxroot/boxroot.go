// Package boxroot owns the one temporary folder under which a test process keeps
// everything its sandbox boxes need (the runner binary, each test's box state
// folder), and the check, run when the process's tests end, that no box started
// under it is still running and nothing is left in it. The folder's path is
// unique to the test process, so packages testing in parallel never see each
// other's boxes.
package boxroot

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// binDir is the folder under Dir the runner binary is built into; it is the
// only thing expected to remain once the tests are over.
const binDir = "bin"

// root is the test process's box folder. It is the one package-level state here
// because it belongs to the process: the fixtures that start boxes and the
// TestMain that checks for leaks must agree on it without a way to pass it.
var root struct {
	once sync.Once
	dir  string
	err  error
}

// Dir makes (once) and returns the folder: short, because box sockets live
// below it and unix socket paths are limited to 108 bytes, and traversable by
// box accounts (0711) but not listable.
func Dir() (string, error) {
	r := &root
	r.once.Do(func() {
		r.dir, r.err = os.MkdirTemp("", "abx")
		if r.err == nil {
			r.err = os.Chmod(r.dir, 0o711)
		}
		if r.err != nil {
			r.err = fmt.Errorf("make the test box folder: %w", r.err)
		}
	})
	return r.dir, r.err
}

// BinDir is the folder for binaries bound into boxes (0755: box accounts run them).
func BinDir() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, binDir)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("make the test binary folder: %w", err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		return "", fmt.Errorf("make the test binary folder: %w", err)
	}
	return bin, nil
}

// StateDir makes a fresh, short box state folder for one test.
func StateDir() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	state, err := os.MkdirTemp(dir, "s")
	if err != nil {
		return "", fmt.Errorf("make a box state folder: %w", err)
	}
	return state, nil
}

// Finish runs when the process's tests end: it reports every process still
// running that was started under the folder (bubblewrap, a box's init, the
// runner's launcher all name it on their command line) and every test folder
// left in it, then kills those processes and removes the folder so one leak
// does not outlive the test run. A nil error means nothing was left.
func Finish() error {
	r := &root
	if r.dir == "" {
		return nil // no test used boxes
	}
	var problems []string
	pids := processesUnder(r.dir)
	for _, p := range pids {
		problems = append(problems, fmt.Sprintf("process %d still running: %s", p.pid, p.cmdline))
	}
	entries, _ := os.ReadDir(r.dir)
	for _, e := range entries {
		if e.Name() != binDir {
			problems = append(problems, "folder left behind: "+filepath.Join(r.dir, e.Name()))
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	if err := os.RemoveAll(r.dir); err != nil {
		problems = append(problems, "remove the test box folder: "+err.Error())
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New("boxes leaked:\n  " + strings.Join(problems, "\n  "))
}

type process struct {
	pid     int
	cmdline string
}

// processesUnder lists the processes whose command line names a path under dir.
func processesUnder(dir string) []process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []process
	needle := []byte(dir + string(filepath.Separator))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(raw, needle) {
			continue
		}
		out = append(out, process{pid: pid, cmdline: strings.TrimSpace(string(bytes.ReplaceAll(raw, []byte{0}, []byte{' '})))})
	}
	return out
}
