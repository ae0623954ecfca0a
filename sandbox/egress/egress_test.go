package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCredentialProxyReplacesPlaceholder: the upstream sees the real key and
// none of the box's own credentials; streamed replies pass chunk by chunk.
func TestCredentialProxyReplacesPlaceholder(t *testing.T) {
	t.Parallel()
	chunks := make(chan string)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "real-key", r.Header.Get("x-api-key"))
		require.Empty(t, r.Header.Get("Authorization"))
		require.Equal(t, "/base/v1/messages", r.URL.Path)
		w.Header().Set("Content-Type", "text/event-stream")
		for c := range chunks {
			_, _ = io.WriteString(w, c)
			w.(http.Flusher).Flush()
		}
	}))
	defer upstream.Close()
	u, err := url.Parse(upstream.URL + "/base")
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "egr")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "model.sock")
	srv, err := Listen(sock, os.Getuid(), os.Getgid(), NewCredentialProxy(u, map[string]string{"x-api-key": "real-key"}))
	require.NoError(t, err)
	defer srv.Close()
	st, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://box/v1/messages", nil)
	require.NoError(t, err)
	req.Header.Set("x-api-key", "placeholder")
	req.Header.Set("Authorization", "Bearer placeholder")
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Do(req)
		require.NoError(t, err)
		done <- resp
	}()
	chunks <- "data: one\n\n"
	resp := <-done
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "data: one\n", line, "the first chunk arrives before the reply ends")
	close(chunks)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	require.Equal(t, "\n", string(rest))
}

// TestListenReplacesStaleSocket: a restarted host side takes over the path.
func TestListenReplacesStaleSocket(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "egr")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "model.sock")
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	first, err := Listen(sock, os.Getuid(), os.Getgid(), h)
	require.NoError(t, err)
	_ = first // the process "dies" without closing: the socket file stays
	second, err := Listen(sock, os.Getuid(), os.Getgid(), h)
	require.NoError(t, err)
	require.NoError(t, second.Close())
	require.NoFileExists(t, sock)
}
