package local

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openControl opens, for reading, a file the box's runner left in the box's
// control folder (a journal, the death note). The host reads these as root
// while the folder belongs to the box, so no part of rel may be a symlink or
// lead out of the folder: a link planted there must not make the host read
// its own files (or block on a FIFO) on the box's behalf.
func openControl(boxDir, rel string) (*os.File, error) {
	root, err := os.OpenFile(filepath.Join(boxDir, "control"), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open control folder: %w", err)
	}
	defer root.Close()
	fd, err := unix.Openat2(int(root.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s in the box's control folder: %w", rel, &os.PathError{Op: "openat2", Path: rel, Err: err})
	}
	f := os.NewFile(uintptr(fd), filepath.Join(boxDir, "control", rel))
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s in the box's control folder: %s is not a regular file", rel, st.Mode().Type())
	}
	return f, nil
}

// readControl reads a small file from the box's control folder (see openControl).
func readControl(boxDir, rel string, limit int64) ([]byte, error) {
	f, err := openControl(boxDir, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	return raw, nil
}
