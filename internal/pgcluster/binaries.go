package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
)

// debianBinGlob is where Debian's postgresql packages put the server binaries; they are
// not on PATH there, so FindBinDir also looks in every versioned folder.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// serverBinaries are the programs a managed cluster needs from one installation.
var serverBinaries = []string{"initdb", "pg_ctl", "postgres"}

// ErrNoBinaries is returned when no PostgreSQL server installation is found.
var ErrNoBinaries = errors.New("postgresql server binaries (initdb, pg_ctl, postgres) not found: install them with `make deps` (apt-get install postgresql)")

// FindBinDir returns the folder holding initdb, pg_ctl and postgres: the folder of
// pg_ctl on PATH when it has all three, otherwise the newest /usr/lib/postgresql/N/bin.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		// Debian links pg_ctl into /usr/bin through a wrapper that is not the server's
		// own; resolve links so the folder is the real installation.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); hasServerBinaries(dir) {
			return dir, nil
		}
	}
	dirs, err := filepath.Glob(debianBinGlob)
	if err != nil {
		return "", fmt.Errorf("find postgresql binaries: %w", err)
	}
	sort.Slice(dirs, func(i, j int) bool { return majorVersion(dirs[i]) > majorVersion(dirs[j]) })
	for _, dir := range dirs {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func hasServerBinaries(dir string) bool {
	for _, name := range serverBinaries {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// majorVersion reads N from /usr/lib/postgresql/N/bin; unknown layouts sort last.
func majorVersion(binDir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	if err != nil {
		return -1
	}
	return v
}
