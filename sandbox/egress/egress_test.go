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

// TestReplacedServerFinishesItsReplies: a successor takes the socket path for new
// connections while the replaced server drains, finishing the reply it streams and
// leaving the successor's socket in place.
func TestReplacedServerFinishesItsReplies(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "egr")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "model.sock")
	started, release := make(chan struct{}), make(chan struct{})
	old, err := Listen(sock, os.Getuid(), os.Getgid(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "first half, ")
		w.(http.Flusher).Flush()
		close(started)
		<-release
		_, _ = io.WriteString(w, "second half")
	}))
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}, DisableKeepAlives: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	get := func() (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://box/", nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	inFlight := make(chan string, 1)
	go func() {
		body, err := get()
		if err != nil {
			body = err.Error()
		}
		inFlight <- body
	}()
	<-started

	successor, err := Listen(sock, os.Getuid(), os.Getgid(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "successor")
	}))
	require.NoError(t, err)
	defer successor.Close()
	drained := make(chan error, 1)
	go func() { drained <- old.Drain(ctx) }()
	body, err := get()
	require.NoError(t, err)
	require.Equal(t, "successor", body, "new connections reach the successor")
	close(release)
	require.Equal(t, "first half, second half", <-inFlight, "the replaced server finished its reply")
	require.NoError(t, <-drained)
	require.FileExists(t, sock, "the successor's socket stays")
}

// TestServeListensOnEveryRoute: a forwarder serves one socket per route and
// reports ready only once all of them listen.
func TestServeListensOnEveryRoute(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("x-api-key"))
	}))
	defer upstream.Close()
	dir, err := os.MkdirTemp("", "egr")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	cfg := ForwarderConfig{Dir: dir, UID: os.Getuid(), GID: os.Getgid(), Routes: map[string]Route{
		"model": {Upstream: upstream.URL, Headers: map[string]string{"x-api-key": "m"}},
		"other": {Upstream: upstream.URL, Headers: map[string]string{"x-api-key": "o"}},
	}}
	rotated := cfg
	rotated.Routes = map[string]Route{"model": {Upstream: upstream.URL, Headers: map[string]string{"x-api-key": "m2"}}}
	require.NotEqual(t, cfg.Digest(), rotated.Digest(), "a rotated credential is another configuration")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	serveCtx, stop := context.WithCancel(ctx)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- Serve(serveCtx, cfg, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve ended before ready: %v", err)
	}
	for name, want := range map[string]string{"model": "m", "other": "o"} {
		client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(dir, name+".sock"))
		}}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://box/", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, want, string(body))
	}
	stop()
	require.NoError(t, <-done)
	require.NoFileExists(t, filepath.Join(dir, "model.sock"), "a stopped forwarder removes its sockets")

	_, err = Route{Upstream: "not a url"}.Proxy()
	require.Error(t, err)
}

// TestCredentialProxyForwardsOnlyItsPaths: with paths set, the real key reaches
// those endpoints only; any other path, also one spelled through "..", escapes
// or a differently cased prefix, is refused with 403 and never forwarded.
func TestCredentialProxyForwardsOnlyItsPaths(t *testing.T) {
	t.Parallel()
	var forwarded []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded = append(forwarded, r.URL.Path)
		_, _ = io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	u, err := url.Parse(upstream.URL)
	require.NoError(t, err)
	proxy := Route{Upstream: u.String(), Headers: map[string]string{"x-api-key": "real-key"},
		Paths: []string{"/v1/messages", "/v1/messages/count_tokens"}}
	h, err := proxy.Proxy()
	require.NoError(t, err)
	front := httptest.NewServer(h)
	defer front.Close()

	status := func(method, path string) int {
		t.Helper()
		req, err := http.NewRequest(method, front.URL+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, status(http.MethodPost, "/v1/messages?beta=true"))
	require.Equal(t, http.StatusOK, status(http.MethodPost, "/v1/messages/count_tokens"))
	for _, path := range []string{"/v1/models", "/v1/files", "/v1/messages/../files", "/v1/messages%2F..%2Ffiles",
		"/V1/messages", "/", "/v1/messages/"} {
		require.Equal(t, http.StatusForbidden, status(http.MethodGet, path), path)
	}
	require.Equal(t, []string{"/v1/messages", "/v1/messages/count_tokens"}, forwarded, "only the allowed requests reached the upstream")
}

// TestCredentialProxyMatchesPathPatterns: a path with a wildcard (the Gemini API
// names the model in the path) allows any model, within one segment only.
func TestCredentialProxyMatchesPathPatterns(t *testing.T) {
	t.Parallel()
	h := NewCredentialProxy(&url.URL{Scheme: "http", Host: "127.0.0.1:1"}, nil).
		OnlyPaths("/v1beta/models/*:streamGenerateContent", "/v1beta/models/*:countTokens")
	for path, want := range map[string]bool{
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent": true,
		"/v1beta/models/gemini-2.5-pro:countTokens":             true,
		"/v1beta/models/gemini-2.5-flash:embedContent":          false,
		"/v1beta/models/a/b:streamGenerateContent":              false,
		"/v1beta/models/:streamGenerateContent/x":               false,
		"/v1beta/files": false,
	} {
		require.Equal(t, want, h.allows(&url.URL{Path: path}), path)
	}
	require.False(t, h.allows(&url.URL{Path: "/v1beta/models/a/b:countTokens", RawPath: "/v1beta/models/a%2Fb:countTokens"}),
		"an escaped slash is refused")
}

// TestCredentialProxyStreamsWhileTheBodyIsStillSent: the reply may start
// before the whole request body has passed the proxy (a model service begins
// its stream as soon as it has what it needs, and the proxy's own last read of
// the body can trail the reply). The box's connection is full duplex: writing
// the reply's headers to the box neither consumes nor closes the body the proxy
// is still forwarding, so the upstream receives the whole body and the box the
// whole reply. Here the box sends the body's second half only once the reply's
// headers have reached it.
func TestCredentialProxyStreamsWhileTheBodyIsStillSent(t *testing.T) {
	t.Parallel()
	const first, second = "first half,", "second half"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, http.NewResponseController(w).EnableFullDuplex())
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		got, err := io.ReadAll(r.Body)
		if err != nil {
			_, _ = io.WriteString(w, "data: body broke off\n\n")
			return
		}
		_, _ = io.WriteString(w, "data: "+string(got)+"\n\n")
	}))
	defer upstream.Close()
	u, err := url.Parse(upstream.URL)
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "egr")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "model.sock")
	srv, err := Listen(sock, os.Getuid(), os.Getgid(), NewCredentialProxy(u, nil))
	require.NoError(t, err)
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bodyR, bodyW := io.Pipe()
	// A failed run leaves neither the box's client nor the proxy waiting for the body.
	context.AfterFunc(ctx, func() { bodyW.CloseWithError(ctx.Err()) })
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://box/v1/messages", bodyR)
	require.NoError(t, err)
	req.ContentLength = int64(len(first) + len(second))
	go func() { _, _ = io.WriteString(bodyW, first) }()
	resp, err := client.Do(req)
	require.NoError(t, err, "the reply's headers did not reach the box while it was still sending the body")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = io.WriteString(bodyW, second)
	require.NoError(t, err)
	require.NoError(t, bodyW.Close())
	reply, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the reply stream broke")
	require.Equal(t, "data: "+first+second+"\n\n", string(reply))
}
