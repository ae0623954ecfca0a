// Package procwait waits for a child process to exit without holding an OS thread.
//
// os.Process.Wait waits in a blocking waitid, which holds an OS thread per waiting
// goroutine for as long as the child lives (the Go runtime ends a process at 10,000
// threads), and threads in syscalls keep the runtime's monitor polling every 20
// microseconds. A pidfd becomes readable when its process exits, so waiting on it through
// the runtime's poller parks only a goroutine, and the Wait that follows returns at
// once.
package procwait

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// Supported reports whether this kernel gives processes pidfds (Linux 5.3 on).
func Supported() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}

// OnStart has cmd's Start open a pidfd for its process into the int returned, which
// stays -1 where the kernel gives none (supported is Supported's answer). Its
// SysProcAttr must be set.
func OnStart(cmd *exec.Cmd, supported bool) *int {
	fd := -1
	if supported {
		cmd.SysProcAttr.PidFD = &fd
	}
	return &fd
}

// Exited returns once the process whose pidfd this is has exited, parking only the
// calling goroutine; the process's Wait (or its Cmd's) then reaps it at once. With no
// pidfd (-1), or one the poller cannot take, it returns at once and that Wait blocks
// as it always did. It owns pidfd and closes it.
func Exited(pidfd int) {
	if pidfd < 0 {
		return
	}
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		_ = syscall.Close(pidfd)
		return
	}
	// A non-blocking descriptor is registered with the poller.
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err == nil {
		// Every call, the first included, asks the descriptor itself: the poller
		// forgets a readiness it saw before the wait began, and its edge-triggered
		// registration reports an exit only once, so a process that exited between
		// the registration and the wait would otherwise never be seen to.
		err = rc.Read(readable)
	}
	if err != nil {
		// Not pollable: the process's own handle may share this descriptor's
		// non-blocking flag, which its blocking wait must not see.
		_ = syscall.SetNonblock(pidfd, false)
	}
}

// readable reports whether the pidfd fd is readable now, which it is once its
// process has exited.
func readable(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
	}
}
