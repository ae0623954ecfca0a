package devstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is held (flock) for the life of one `astrabox dev`, so a second one
// on the same data folder is refused before it touches anything.
type lockFile struct {
	f *os.File
}

// ErrAlreadyRunning reports another `astrabox dev` on the same data folder.
var ErrAlreadyRunning = errors.New("another astrabox dev is already running on this data folder")

func acquireLock(dataDir string) (*lockFile, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data folder %s: %w", dataDir, err)
	}
	path := filepath.Join(dataDir, "dev.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			return nil, fmt.Errorf("%w (pid %s, lock %s): stop it first", ErrAlreadyRunning, pid, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &lockFile{f: f}, nil
}

func (l *lockFile) release() error {
	// Closing the descriptor drops the flock; the file stays so its path is stable.
	return l.f.Close()
}
