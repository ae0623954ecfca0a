package local

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// A box's processes (its bubblewrap and its egress forwarder) are waited on for the
// box's life. os.Process.Wait does that in a blocking waitid, which holds an OS
// thread per waiting goroutine: two threads per live box, and the Go runtime ends
// the process at 10,000 threads. A pidfd becomes readable when its process exits,
// so waiting on it through the runtime's poller parks only a goroutine, and the
// Wait that follows returns at once.

// pidfdsWork reports whether this kernel gives processes pidfds (Linux 5.3 on).
func pidfdsWork() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}

// pidfdFor has cmd's Start open a pidfd for its process into the int returned,
// which stays -1 where the kernel has none. cmd.SysProcAttr must be set.
func (b *Backend) pidfdFor(cmd *exec.Cmd) *int {
	fd := -1
	if b.pidfds {
		cmd.SysProcAttr.PidFD = &fd
	}
	return &fd
}

// waitExited waits for proc, whose pidfd is pidfd (-1: none), to exit and reaps
// it. It owns pidfd and closes it.
func waitExited(proc *os.Process, pidfd int) (*os.ProcessState, error) {
	if pidfd < 0 {
		return proc.Wait()
	}
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		_ = syscall.Close(pidfd)
		return proc.Wait()
	}
	// A non-blocking descriptor is registered with the poller.
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	if rc, err := f.SyscallConn(); err == nil {
		asked := false
		err = rc.Read(func(uintptr) bool {
			// The first call only starts the wait; the next comes once it is readable.
			done := asked
			asked = true
			return done
		})
		if err == nil {
			return proc.Wait()
		}
	}
	// Not pollable: the process's own handle shares this descriptor's
	// non-blocking flag, which its blocking wait must not see.
	_ = syscall.SetNonblock(pidfd, false)
	return proc.Wait()
}
