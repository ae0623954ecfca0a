package runner

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// TestNetworkClientThroughAGatewayPath: a client made by NewHTTPClient reaches
// the runner under a gateway's path prefix with the box's token (header or
// bearer), streams output and relays a port through the http.Client's
// upgrade; without the token, or with another, it is refused.
func TestNetworkClientThroughAGatewayPath(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	const token = "0123456789abcdef-box-token"
	r, _ := startRunnerWith(t, runnerapi.Config{StateDir: dir, Workspace: dir, Token: token})
	const prefix = "/sandboxes/box-1/proxy/9494"
	gw := httptest.NewServer(http.StripPrefix(prefix, r.authorize(r.routes())))
	t.Cleanup(gw.Close)

	c := runnerapi.NewHTTPClient(gw.URL+prefix+"/", token, gw.Client())
	defer c.Close()
	info, err := c.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, r.Info().BootID, info.BootID)
	_, err = c.StartProcess(ctx, sandbox.ProcessSpec{ID: "p", Argv: []string{"/bin/sh", "-c", "echo over the network"}})
	require.NoError(t, err)
	out, err := c.Output(ctx, "p", 0, true)
	require.NoError(t, err)
	lines := readAll(t, out)
	out.Close()
	require.Len(t, lines, 1)
	require.Equal(t, "over the network", string(lines[0].Data))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if conn, err := ln.Accept(); err == nil {
			_, _ = io.WriteString(conn, "relayed\n")
			conn.Close()
		}
	}()
	conn, err := c.DialPort(ctx, ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, err)
	got, err := io.ReadAll(conn)
	conn.Close()
	require.NoError(t, err)
	require.Equal(t, "relayed\n", string(got))

	for _, bad := range []string{"", "not-the-token"} {
		_, err := runnerapi.NewHTTPClient(gw.URL+prefix, bad, gw.Client()).Info(ctx)
		require.Error(t, err)
		require.Contains(t, err.Error(), "401")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL+prefix+"/v1/info", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := gw.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "a bearer token is accepted too")
}
