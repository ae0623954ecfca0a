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
// SO_REUSEADDR (Go's listeners, PostgreSQL, Node) still may.
package freeport

import (
	"fmt"
	"net"
)

// Reserve returns a loopback port free for a server to listen on.
func Reserve() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	dialed, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("reserve a free port: %w", err)
	}
	defer dialed.Close()
	accepted, err := l.Accept()
	if err != nil {
		return 0, fmt.Errorf("reserve a free port: %w", err)
	}
	// TIME_WAIT stays with the side that closes first: the listening one.
	if err := accepted.Close(); err != nil {
		return 0, fmt.Errorf("reserve a free port: %w", err)
	}
	return l.Addr().(*net.TCPAddr).Port, nil
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
