package runner

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// acceptNamed takes the next stream of a tunnel and reads its name.
func acceptNamed(t *testing.T, s interface{ Accept() (net.Conn, error) }) (string, net.Conn) {
	t.Helper()
	st, err := s.Accept()
	require.NoError(t, err)
	name, conn, err := runnerapi.ReadStreamName(st)
	require.NoError(t, err)
	return name, conn
}

// TestTunnelCarriesForwardedConnectionsToTheNewestHolder: a connection to a
// tunnelled forward waits for the worker's tunnel and arrives as a stream named
// by its forward; a second tunnel replaces the first, whose holder is told so;
// with no tunnel for too long a connection is closed; a runner without
// tunnelled forwards refuses the tunnel.
func TestTunnelCarriesForwardedConnectionsToTheNewestHolder(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	port, err := freeport.Reserve()
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	const raw = `[{"name":"model","port":1}]`
	r, c := startRunnerWith(t, runnerapi.Config{StateDir: dir, Workspace: dir,
		Tunnels: []runnerapi.Tunnel{{Name: "model", Listen: addr}}, TunnelForwards: raw})
	got, err := c.TunnelForwards(ctx)
	require.NoError(t, err)
	require.Equal(t, raw, got)

	early, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer early.Close()
	_, err = io.WriteString(early, "before the tunnel")
	require.NoError(t, err)
	first, err := c.OpenTunnel(ctx)
	require.NoError(t, err)
	name, st := acceptNamed(t, first)
	require.Equal(t, "model", name)
	buf := make([]byte, len("before the tunnel"))
	_, err = io.ReadFull(st, buf)
	require.NoError(t, err)
	require.Equal(t, "before the tunnel", string(buf), "a connection waits for the tunnel")
	_, err = io.WriteString(st, "answer")
	require.NoError(t, err)
	st.Close()
	back, err := io.ReadAll(early)
	require.NoError(t, err)
	require.Equal(t, "answer", string(back))

	second, err := c.OpenTunnel(ctx)
	require.NoError(t, err)
	defer second.Close()
	name, st = acceptNamed(t, first)
	require.Equal(t, runnerapi.TunnelReplaced, name, "the replaced holder is told")
	st.Close()
	select {
	case <-first.CloseChan():
	case <-ctx.Done():
		t.Fatal("the replaced tunnel stays open")
	}
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	name, st = acceptNamed(t, second)
	require.Equal(t, "model", name)
	st.Close()
	conn.Close()

	r.tunnel.mu.Lock()
	r.tunnel.wait = 100 * time.Millisecond
	r.tunnel.mu.Unlock()
	second.Close()
	orphan, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer orphan.Close()
	require.NoError(t, orphan.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, err := orphan.Read(make([]byte, 1))
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF, "with no tunnel the connection is closed, not held")

	_, plain := startRunnerWith(t, runnerapi.Config{StateDir: t.TempDir(), Workspace: dir})
	_, err = plain.OpenTunnel(ctx)
	require.ErrorIs(t, err, sandbox.ErrInvalidSpec)
}
