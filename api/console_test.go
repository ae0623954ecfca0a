package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConsoleIsServedOutsideTheAPI(t *testing.T) {
	t.Parallel()
	built := fstest.MapFS{
		"index.html":         {Data: []byte("<!doctype html><div id=root></div>")},
		"assets/app-1a2b.js": {Data: []byte("console.log(1)")},
		"favicon.svg":        {Data: []byte("<svg/>")},
	}
	srv := httptest.NewServer(New(Options{Console: built}).Handler())
	defer srv.Close()
	get := func(method, path string) (*http.Response, string) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}

	for _, p := range []string{"/", "/sessions/3f1e", "/s/abs_token", "/index.html"} {
		resp, body := get(http.MethodGet, p)
		assert.Equal(t, http.StatusOK, resp.StatusCode, p)
		assert.Contains(t, body, "id=root", p)
		assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"), p)
		assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"), p)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'", p)
	}
	resp, body := get(http.MethodGet, "/assets/app-1a2b.js")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "console.log(1)", body)
	assert.Contains(t, resp.Header.Get("Content-Type"), "javascript")
	assert.Contains(t, resp.Header.Get("Cache-Control"), "immutable")
	resp, body = get(http.MethodGet, "/favicon.svg")
	assert.Equal(t, "<svg/>", body)
	assert.NotContains(t, resp.Header.Get("Cache-Control"), "immutable")

	// The API keeps its own 404 envelope, and only GET and HEAD load the console.
	resp, body = get(http.MethodGet, "/api/v1/nope")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Contains(t, body, `"code":"NOT_FOUND"`)
	resp, _ = get(http.MethodPost, "/sessions/3f1e")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = get(http.MethodGet, "/openapi.json")
	assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
}

func TestConsoleNotBuiltSaysHowToBuildIt(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(New(Options{Console: fstest.MapFS{".keep": {}}}).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(body), "make build")
}

func TestNoConsoleLeavesTheRootToThe404(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(New(Options{}).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
