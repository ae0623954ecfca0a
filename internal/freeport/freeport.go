// Package freeport picks loopback ports for servers a process is about to start,
// and keeps the system from handing them to anyone else in the meantime.
//
// A port found free by listening on port 0 and closing the listener can be taken
// again at once: by another process's bind to port 0 (a parallel test's Temporal
// dev server picks its internal ports that way) or by an outgoing connection's
// local port, in the seconds before its own server starts. A reserved port is
// connected to once and that connection closed from the listening side first,
// which leaves the port in TIME_WAIT for a minute: the system then gives it to
// no bind to port 0 and no outgoing connection, while a server that listens with
// SO_REUSEADDR (Go's listeners, PostgreSQL, Node) still may. Reserve returns only
// once its own listener is gone, which a process forked meanwhile can delay.
package freeport

import (
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Reserve returns a loopback port free for a server to listen on, at once.
func Reserve() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	addr := l.Addr().String()
	dialed, err := net.Dial("tcp", addr)
	if err != nil {
		l.Close()
		return 0, fmt.Errorf("reserve a free port: %w", err)
	}
	accepted, err := l.Accept()
	l.Close()
	if err != nil {
		dialed.Close()
		return 0, fmt.Errorf("reserve a free port: %w", err)
	}
	// TIME_WAIT stays with the side that closes first: the listening one.
	closeErr := accepted.Close()
	dialed.Close()
	if closeErr != nil {
		return 0, fmt.Errorf("reserve a free port: %w", closeErr)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := awaitListenable(port); err != nil {
		return 0, err
	}
	return port, nil
}

// awaitListenable returns once a server can listen on port. Closing a socket releases
// it only when no process holds it any more, and a process forked meanwhile (any
// exec.Cmd.Start of this process) holds every descriptor until it execs: the
// reservation's listener may stay listening a moment after its close, refusing the
// server the port. A socket bound with SO_REUSEADDR and never listening tells when it
// is gone: it conflicts with a listener only, not with the reservation's TIME_WAIT, and
// leaves nothing behind that could refuse the server in turn.
func awaitListenable(port int) error {
	const (
		poll  = time.Millisecond
		bound = 5 * time.Second
	)
	deadline := time.Now().Add(bound)
	for {
		err := bindOnce(port)
		if !errors.Is(err, unix.EADDRINUSE) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reserve a free port: port %d still has a listener after %s: %w", port, bound, err)
		}
		time.Sleep(poll)
	}
}

// bindOnce binds a socket to the loopback port with SO_REUSEADDR, as a server's
// listener does, and closes it without listening.
func bindOnce(port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("reserve a free port: socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fmt.Errorf("reserve a free port: SO_REUSEADDR: %w", err)
	}
	return unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// ReserveN returns n distinct loopback ports, each reserved as Reserve does.
func ReserveN(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		port, err := Reserve()
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	return ports, nil
}
