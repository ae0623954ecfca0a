package pgcluster

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// serverUser is the system account the cluster runs as when the caller is root:
// initdb and postgres refuse to run as root.
const serverUser = "postgres"

// account is the identity the server's processes run under.
type account struct {
	name     string
	uid, gid uint32
	// switchTo is set when the caller is root and commands must drop to this account.
	switchTo bool
}

// serverAccount picks the current user, or the postgres system user when running as root.
func serverAccount() (account, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return account{}, fmt.Errorf("look up current user: %w", err)
		}
		return account{name: u.Username, uid: uint32(os.Geteuid()), gid: uint32(os.Getegid())}, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return account{}, fmt.Errorf("running as root needs the %q system user to own the cluster (apt-get install postgresql creates it): %w", serverUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return account{}, fmt.Errorf("parse uid of %q: %w", serverUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return account{}, fmt.Errorf("parse gid of %q: %w", serverUser, err)
	}
	return account{name: serverUser, uid: uint32(uid), gid: uint32(gid), switchTo: true}, nil
}

// command builds a command that runs as the account, in its own process group so a
// terminal's Ctrl-C reaches the caller, which then stops the cluster in order.
func (a account) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if a.switchTo {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid}
	}
	// A minimal, predictable environment: the caller's PG* variables must not steer
	// initdb or pg_ctl to another cluster.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "LANG=C"}
	if a.switchTo {
		cmd.Dir = "/"
	}
	return cmd
}

// ensureOwnedDir creates dir (mode 0700) if needed and hands it to the account.
func (a account) ensureOwnedDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if a.switchTo {
		if err := os.Chown(dir, int(a.uid), int(a.gid)); err != nil {
			return fmt.Errorf("give %s to %s: %w", dir, a.name, err)
		}
	}
	// postgres refuses a data directory readable by others.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}

// ensureOwnedFile creates file if needed and hands it to the account.
func (a account) ensureOwnedFile(file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("create folder of %s: %w", file, err)
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("create %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", file, err)
	}
	if a.switchTo {
		if err := os.Chown(file, int(a.uid), int(a.gid)); err != nil {
			return fmt.Errorf("give %s to %s: %w", file, a.name, err)
		}
	}
	return nil
}

// checkTraversable fails with the first parent of path that the account cannot enter.
// Changing a parent's mode (say /root) is the operator's decision, so it is reported,
// not fixed.
func (a account) checkTraversable(path string) error {
	if !a.switchTo {
		return nil
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		info, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("stat %s: %w", dir, err)
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		mode := info.Mode().Perm()
		canEnter := mode&0o001 != 0 ||
			(ok && st.Uid == a.uid && mode&0o100 != 0) ||
			(ok && st.Gid == a.gid && mode&0o010 != 0)
		if !canEnter {
			return fmt.Errorf("the %s user cannot enter %s (mode %o): place the cluster elsewhere or allow it with chmod o+x %s", a.name, dir, mode, dir)
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}
