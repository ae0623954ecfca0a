package runner

import (
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// account is who the runner's processes, commands and file operations run as.
// In a box the runner is the box's root (a host account of its own, with only
// the capabilities to switch users and signal) and the program is a second
// account: the program and anything it runs can then neither reach the
// runner's socket and journals nor signal or trace the runner. The zero value
// runs everything as the runner itself (the runner's own tests, remote boxes
// whose image has one account).
type account struct {
	uid, gid int
}

// separate reports whether programs run as an account other than the runner's.
func (a account) separate() bool { return a.uid > 0 }

// sysProcAttr puts a child in its own process group, which lets a signal reach
// its children too, and under the program account with no supplementary groups.
func (a account) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if a.separate() {
		attr.Credential = &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)}
	}
	return attr
}

// do runs fn with the file-system identity of the program account on one OS
// thread, so paths fn opens, creates or executes are checked as the program's:
// a symlink the program planted cannot make the runner read or write what the
// program itself may not (the runner's journals above all). Processes forked
// inside fn start from that identity too. fn must not start goroutines that
// touch the file system on its behalf.
func (a account) do(fn func() error) error {
	if !a.separate() {
		return fn()
	}
	runtime.LockOSThread()
	if err := setFS(a.uid, a.gid); err != nil {
		// The thread may be half switched: let it die with the goroutine.
		return err
	}
	err := fn()
	if rerr := setFS(syscall.Getuid(), syscall.Getgid()); rerr != nil {
		return fmt.Errorf("restore runner identity: %w", rerr)
	}
	runtime.UnlockOSThread()
	return err
}

// setFS switches the calling thread's file-system uid and gid and checks that
// the kernel took them: setfsuid reports no error, only the previous value.
func setFS(uid, gid int) error {
	_, _ = unix.SetfsgidRetGid(gid)
	_, _ = unix.SetfsuidRetUid(uid)
	gotGID, _ := unix.SetfsgidRetGid(-1)
	gotUID, _ := unix.SetfsuidRetUid(-1)
	if gotUID != uid || gotGID != gid {
		return fmt.Errorf("switch file-system identity to %d:%d: got %d:%d", uid, gid, gotUID, gotGID)
	}
	return nil
}
