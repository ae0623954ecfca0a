package runnerapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/hashicorp/yamux"
)

// The egress tunnel carries a remote box's forwards to the platform. A remote
// box has no host socket to reach: the runner listens on each forward's
// loopback port and hands every connection it accepts to the worker holding
// the box, over one connection the worker opened to the runner's API
// (GET TunnelPath, upgraded) and keeps. The connection carries a yamux session
// in which the runner opens one stream per accepted connection; each stream
// starts with the forward's name and a newline, then carries the connection's
// bytes. So the box dials nothing outside itself, and the credential the
// worker adds never enters the box.
const (
	// TunnelPath is the upgrade endpoint; a new tunnel replaces the one before.
	TunnelPath = "/v1/tunnel"
	// TunnelForwardsPath returns the forwards the runner booted with (the raw
	// value of EnvForwards), for a worker that takes over the box.
	TunnelForwardsPath = "/v1/tunnel/forwards"
	// TunnelReplaced is the stream name a runner sends on a tunnel it drops
	// because another one replaced it: its holder stops reconnecting. Forward
	// names cannot start with "!".
	TunnelReplaced = "!replaced"
	// EnvForwards holds the box's forwards as a JSON list of sandbox.Forward.
	EnvForwards = EnvPrefix + "FORWARDS"
)

// TunnelConfig is the yamux configuration of both ends.
func TunnelConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.LogOutput = io.Discard
	return c
}

// WriteStreamName starts a tunnel stream.
func WriteStreamName(w io.Writer, name string) error {
	if strings.ContainsAny(name, "\n\r") {
		return fmt.Errorf("tunnel stream name %q", name)
	}
	_, err := io.WriteString(w, name+"\n")
	return err
}

// ReadStreamName reads a tunnel stream's name; the returned connection reads
// on after it.
func ReadStreamName(c net.Conn) (string, net.Conn, error) {
	br := bufio.NewReaderSize(c, 128)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", nil, fmt.Errorf("read tunnel stream name: %w", err)
	}
	return strings.TrimSuffix(line, "\n"), &bufferedConn{Conn: c, r: br}, nil
}

// OpenTunnel opens the egress tunnel to the runner: the answer is the yamux
// session in which the runner opens a stream per forwarded connection.
func (c *Client) OpenTunnel(ctx context.Context) (*yamux.Session, error) {
	conn, err := c.upgrade(ctx, TunnelPath, "yamux")
	if err != nil {
		return nil, fmt.Errorf("open egress tunnel: %w", err)
	}
	s, err := yamux.Server(conn, TunnelConfig())
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open egress tunnel: %w", err)
	}
	return s, nil
}

// TunnelForwards returns the forwards the runner booted with (EnvForwards).
func (c *Client) TunnelForwards(ctx context.Context) (string, error) {
	var out struct {
		Forwards string `json:"forwards"`
	}
	err := c.do(ctx, "GET", TunnelForwardsPath, nil, nil, &out)
	return out.Forwards, err
}
