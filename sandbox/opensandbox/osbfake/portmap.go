package osbfake

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// portMap is a container runtime's port mapping for a local box with a network
// of its own: a host loopback listener whose connections are joined to a port
// on the box's loopback. The box's network namespace is held open, so a
// connection made after the box's processes ended is refused rather than
// reaching anything else.
type portMap struct {
	ns   *os.File
	ln   net.Listener
	port int

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	done   sync.WaitGroup
}

// dialBoxTimeout bounds a connection into the box.
const dialBoxTimeout = 10 * time.Second

// mapPort maps a fresh host loopback port to port on the loopback of the box
// whose network namespace ns is.
func mapPort(ns *os.File, port int) (*portMap, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the box's port %d: %w", port, err)
	}
	m := &portMap{ns: ns, ln: ln, port: port, conns: map[net.Conn]struct{}{}}
	m.done.Add(1)
	go m.accept()
	return m, nil
}

// Addr is the host address that leads to the box's port.
func (m *portMap) Addr() string { return m.ln.Addr().String() }

func (m *portMap) accept() {
	defer m.done.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		if !m.track(c) {
			c.Close()
			return
		}
		m.done.Add(1)
		go func() {
			defer m.done.Done()
			defer m.untrack(c)
			m.join(c)
		}()
	}
}

// join copies between a host connection and a new one to the box's port until
// both directions end. A port nothing listens on closes the host connection,
// as a mapping to a container port that is not listening yet does.
func (m *portMap) join(host net.Conn) {
	defer host.Close()
	box, err := dialIn(m.ns, net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)))
	if err != nil {
		return
	}
	if !m.track(box) {
		box.Close()
		return
	}
	defer m.untrack(box)
	defer box.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pipe(box, host) }()
	go func() { defer wg.Done(); pipe(host, box) }()
	wg.Wait()
}

// pipe copies from src to dst, then ends dst's writing side so its peer sees
// the end, or closes both when either fails.
func pipe(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if tcp, ok := dst.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
}

func (m *portMap) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *portMap) untrack(c net.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conns, c)
}

// Close stops the mapping: the listener, every joined connection and the hold
// on the box's network.
func (m *portMap) Close() error {
	m.mu.Lock()
	m.closed = true
	for c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	err := m.ln.Close()
	m.done.Wait()
	return errors.Join(err, m.ns.Close())
}

// dialIn connects to addr inside the network namespace ns. A socket belongs to
// the namespace of the thread that creates it, so the dial runs on a thread of
// its own that enters ns and goes back; a thread that cannot go back is not
// unlocked, and the runtime ends it with its goroutine.
func dialIn(ns *os.File, addr string) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	out := make(chan dialed, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			out <- dialed{err: fmt.Errorf("open the host's network namespace: %w", err)}
			return
		}
		defer home.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			out <- dialed{err: fmt.Errorf("enter the box's network namespace: %w", err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, dialBoxTimeout)
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		out <- dialed{c, err}
	}()
	d := <-out
	return d.c, d.err
}

// boxNetwork opens the network namespace of the box process whose account on
// the host is uid and whose pid inside the box is pid: the box's own uid
// (each box has its own) and the pid tell it from every other process.
func boxNetwork(uid, pid int) (*os.File, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	for _, dir := range dirs {
		if u, p, ok := accountAndInnermostPID(dir); !ok || u != uid || p != pid {
			continue
		}
		ns, err := os.Open(filepath.Join(dir, "ns", "net"))
		if err != nil {
			return nil, fmt.Errorf("open the network namespace of %s: %w", dir, err)
		}
		return ns, nil
	}
	return nil, fmt.Errorf("no process of account %d with pid %d in its box", uid, pid)
}

// accountAndInnermostPID reads a process's real uid and its pid in its own pid
// namespace.
func accountAndInnermostPID(dir string) (uid, pid int, ok bool) {
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, 0, false
	}
	uid, pid = -1, -1
	s := bufio.NewScanner(bytes.NewReader(status))
	for s.Scan() {
		name, rest, _ := strings.Cut(s.Text(), ":")
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		var err error
		switch name {
		case "Uid":
			uid, err = strconv.Atoi(fields[0])
		case "NSpid":
			pid, err = strconv.Atoi(fields[len(fields)-1])
		}
		if err != nil {
			return 0, 0, false
		}
	}
	return uid, pid, uid >= 0 && pid > 0
}
