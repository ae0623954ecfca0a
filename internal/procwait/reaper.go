package procwait

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Reaper waits for the exits of many processes on one goroutine. Each process's pidfd
// joins one epoll set, and the set's own descriptor, readable while any of its
// processes has exited, is parked on the runtime's poller like a socket: a process
// waited on costs an entry in a map, not a goroutine parked for its whole life (a
// local box and its egress forwarder held one each, idle, for as long as the box
// lived). The goroutine and the set exist only while a process is waited on.
type Reaper struct {
	mu sync.Mutex
	// set is the epoll set and exits what each of its pidfds calls; running is true
	// while the goroutine that waits on the set runs (it closes the set when it
	// finds nothing left to wait on).
	set     *os.File
	setFD   int // set's descriptor (its Fd method would make it blocking)
	exits   map[int32]func()
	running bool
}

// Watch calls exited, on a goroutine of its own, once the process whose pidfd this is
// has exited: a child's Wait (or its Cmd's) in exited then reaps it at once; another
// process's pidfd (pidfd_open) only says it ended. It owns pidfd. With no pidfd (-1),
// or one the set refuses, exited runs at once, and a child's Wait in it blocks as it
// always did.
func (r *Reaper) Watch(pidfd int, exited func()) {
	if pidfd < 0 {
		go exited()
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.add(pidfd); err != nil {
		_ = unix.Close(pidfd)
		go exited()
		return
	}
	if r.exits == nil {
		r.exits = map[int32]func(){}
	}
	r.exits[int32(pidfd)] = exited
	if !r.running {
		r.running = true
		go r.run(r.set)
	}
}

// add puts pidfd in the epoll set, making the set when there is none. Called with
// r.mu held.
func (r *Reaper) add(pidfd int) error {
	if r.set == nil {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return fmt.Errorf("create epoll set: %w", err)
		}
		// A non-blocking descriptor is registered with the poller.
		if err := unix.SetNonblock(fd, true); err != nil {
			_ = unix.Close(fd)
			return fmt.Errorf("epoll set: %w", err)
		}
		r.set, r.setFD = os.NewFile(uintptr(fd), "procwait-epoll"), fd
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(pidfd)}
	return unix.EpollCtl(r.setFD, unix.EPOLL_CTL_ADD, pidfd, &ev)
}

// run hands each exit to its callback until nothing is left to wait on, then closes
// the set. Every pass asks the set itself first: the poller reports a readiness only
// as it begins (edge-triggered), so an exit before the wait would otherwise be missed.
func (r *Reaper) run(set *os.File) {
	rc, err := set.SyscallConn()
	for {
		if err == nil {
			var waitErr error
			err = rc.Read(func(fd uintptr) bool {
				var done bool
				done, waitErr = r.reap(fd)
				return done
			})
			err = errors.Join(err, waitErr)
		}
		r.mu.Lock()
		if err != nil {
			// The set cannot be waited on: each process's own Wait blocks instead.
			for fd, exited := range r.exits {
				_ = unix.Close(int(fd))
				go exited()
			}
			clear(r.exits)
		}
		if len(r.exits) == 0 {
			r.running = false
			r.set = nil
			r.mu.Unlock()
			_ = set.Close()
			return
		}
		r.mu.Unlock()
	}
}

// reap takes the exits the set reports now and starts their callbacks; done is true
// (stop waiting) once nothing is left to wait on or the set failed, false to wait for
// the next exit.
func (r *Reaper) reap(setFD uintptr) (done bool, err error) {
	var events [16]unix.EpollEvent
	for {
		n, err := unix.EpollWait(int(setFD), events[:], 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return true, fmt.Errorf("wait on epoll set: %w", err)
		}
		r.mu.Lock()
		for _, ev := range events[:n] {
			exited := r.exits[ev.Fd]
			delete(r.exits, ev.Fd)
			_ = unix.EpollCtl(int(setFD), unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
			_ = unix.Close(int(ev.Fd))
			if exited != nil {
				go exited()
			}
		}
		empty := len(r.exits) == 0
		r.mu.Unlock()
		if empty {
			return true, nil
		}
		if n < len(events) {
			return false, nil
		}
	}
}
