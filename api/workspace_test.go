package api

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// boxFixture is an API fixture whose member owns a Session placed on a real
// local box.
type boxFixture struct {
	*fixture
	box     sandbox.Handle
	session string
}

func newBoxFixture(t *testing.T, tune func(*Options)) *boxFixture {
	t.Helper()
	backend := localtest.NewBackend(t, localtest.Options(t))
	f := newFixture(t, func(o *Options) {
		o.Boxes = backend
		if tune != nil {
			tune(o)
		}
	})
	box, err := backend.Create(f.ctx, sandbox.Spec{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = box.Close() })
	id := f.newSession(f.member)
	f.exec(`UPDATE sessions SET lifecycle = 'active', runtime_status = 'idle', sandbox_id = $2 WHERE id = $1`, id, box.ID())
	return &boxFixture{fixture: f, box: box, session: id}
}

// raw sends a request with a body of the given content type and returns the
// response, whose body the caller closes.
func (f *boxFixture) raw(method, path, token, contentType string, body io.Reader) *http.Response {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.ctx, method, f.srv.URL+path, body)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	return resp
}

// envelopeOf decodes an error or success envelope from a response.
func envelopeOf(t testing.TB, resp *http.Response) reply {
	t.Helper()
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var env struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(raw, &env), string(raw))
	return reply{Status: resp.StatusCode, Code: env.Code, Message: env.Message, Data: env.Data, Header: resp.Header}
}

func multipartBody(t testing.TB, files map[string]string) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for name, content := range files {
		w, err := mw.CreateFormFile("file", name)
		require.NoError(t, err)
		_, err = io.WriteString(w, content)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), &buf
}

func (f *boxFixture) download(path, token string) (*http.Response, []byte) {
	f.t.Helper()
	resp := f.raw("GET", "/api/v1/sessions/"+f.session+"/workspace/download?"+path, token, "", nil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	return resp, body
}

func TestWorkspaceFilesThroughTheAPI(t *testing.T) {
	t.Parallel()
	var f *boxFixture
	f = newBoxFixture(t, func(o *Options) {
		o.MaxUploadBytes = 60 << 20
	})
	files := "/api/v1/sessions/" + f.session + "/workspace/files"

	// One raw body, then two files as multipart into a folder.
	var up uploadResult
	envelopeOf(t, f.raw("POST", files+"?path=docs/readme.md", f.member, "text/markdown", strings.NewReader("hello"))).ok(t).into(t, &up)
	require.Len(t, up.Files, 1)
	assert.Equal(t, workspaceEntry{Name: "readme.md", Path: "docs/readme.md", Kind: "file", Size: 5, ModifiedAt: up.Files[0].ModifiedAt}, up.Files[0])
	ct, body := multipartBody(t, map[string]string{"a.txt": "A", "b.txt": "BB"})
	envelopeOf(t, f.raw("POST", files+"?path=in", f.member, ct, body)).ok(t).into(t, &up)
	require.Len(t, up.Files, 2)
	info, err := f.box.Info(f.ctx)
	require.NoError(t, err)
	owners, err := f.box.Exec(f.ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", "stat -c %u /workspace/in/a.txt /workspace/docs/readme.md"}})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d\n%d\n", info.UID, info.UID), string(owners.Stdout), "uploads belong to the box's account")

	// Paged listing, sorted by name (the box's home folder .home comes first).
	var page workspacePage
	f.call("GET", files+"?page=2&limit=1", f.member, nil).ok(t).into(t, &page)
	assert.Equal(t, 3, page.Total)
	assert.True(t, page.HasMore)
	require.Len(t, page.Entries, 1)
	assert.Equal(t, "docs", page.Entries[0].Name)
	assert.Equal(t, "directory", page.Entries[0].Kind)
	f.call("GET", files+"?page=3&limit=1", f.member, nil).ok(t).into(t, &page)
	assert.False(t, page.HasMore)
	assert.Equal(t, "in", page.Entries[0].Path)
	f.call("GET", files+"?path=in", f.member, nil).ok(t).into(t, &page)
	assert.Equal(t, []string{"in/a.txt", "in/b.txt"}, []string{page.Entries[0].Path, page.Entries[1].Path})

	// A file with its length and type; a folder as tar (the default) or zip.
	resp, got := f.download("path=docs/readme.md", f.member)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(got))
	assert.Equal(t, "hello", string(got))
	assert.Equal(t, "5", resp.Header.Get("Content-Length"))
	assert.Contains(t, resp.Header.Get("Content-Disposition"), `filename=readme.md`)
	resp, got = f.download("path=in", f.member)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(got))
	assert.Equal(t, "application/x-tar", resp.Header.Get("Content-Type"))
	tr := tar.NewReader(bytes.NewReader(got))
	names := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names[hdr.Name] = true
	}
	assert.Equal(t, map[string]bool{"a.txt": true, "b.txt": true}, names)
	resp, got = f.download("format=zip", f.member)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(got))
	zr, err := zip.NewReader(bytes.NewReader(got), int64(len(got)))
	require.NoError(t, err)
	zipped := map[string]bool{}
	for _, zf := range zr.File {
		zipped[zf.Name] = true
	}
	assert.True(t, zipped["docs/readme.md"] && zipped["in/b.txt"], "%v", zipped)

	// Escapes are 400 naming the field; a missing file is 404.
	_, err = f.box.Exec(f.ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", "ln -s /etc /workspace/out"}})
	require.NoError(t, err)
	for _, p := range []string{"../etc/passwd", "/etc/passwd", "a\x00b", "out/passwd", "out"} {
		q := "path=" + url.QueryEscape(p)
		envelopeOf(t, f.raw("GET", "/api/v1/sessions/"+f.session+"/workspace/download?"+q, f.member, "", nil)).
			refused(t, http.StatusBadRequest, CodeInvalidRequest, "path")
		f.call("GET", files+"?"+q, f.member, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest, "path")
		envelopeOf(t, f.raw("POST", files+"?path="+url.QueryEscape(p+"/x"), f.member, "text/plain", strings.NewReader("x"))).
			refused(t, http.StatusBadRequest, CodeInvalidRequest, "path")
	}
	ct, body = multipartBody(t, map[string]string{"x": "x"})
	envelopeOf(t, f.raw("POST", files+"?path=out", f.member, ct, body)).refused(t, http.StatusBadRequest, CodeInvalidRequest, "files")
	envelopeOf(t, f.raw("GET", "/api/v1/sessions/"+f.session+"/workspace/download?path=nope.txt", f.member, "", nil)).
		refused(t, http.StatusNotFound, CodeNotFound, "nope.txt")
	f.call("GET", files+"?path=docs/readme.md", f.member, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest, "path", "not a folder")
	envelopeOf(t, f.raw("GET", "/api/v1/sessions/"+f.session+"/workspace/download?format=rar", f.member, "", nil)).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "format")

	// Who may do what: others see nothing, an administrator reads but does not
	// write, and a share link's viewers read only when the link allows downloads.
	f.call("GET", files, f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", files, f.admin, nil).ok(t)
	envelopeOf(t, f.raw("POST", files+"?path=x.txt", f.admin, "text/plain", strings.NewReader("x"))).refused(t, http.StatusForbidden, CodeForbidden)
	expiry := time.Now().Add(time.Hour).Format(time.RFC3339)
	var allowed, denied createdShare
	f.call("POST", "/api/v1/sessions/"+f.session+"/shares", f.member, map[string]any{"expires_at": expiry, "allow_download": true}).ok(t).into(t, &allowed)
	f.call("POST", "/api/v1/sessions/"+f.session+"/shares", f.member, map[string]any{"expires_at": expiry}).ok(t).into(t, &denied)
	viewer := func(method, path string, body io.Reader) *http.Response {
		req, err := http.NewRequestWithContext(f.ctx, method, f.srv.URL+path, body)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	var listed workspacePage
	envelopeOf(t, viewer("GET", allowed.Path+"/workspace/files?path=docs", nil)).ok(t).into(t, &listed)
	require.Len(t, listed.Entries, 1)
	sharedFile := viewer("GET", allowed.Path+"/workspace/download?path=docs/readme.md", nil)
	got, readErr := io.ReadAll(sharedFile.Body)
	sharedFile.Body.Close()
	require.NoError(t, readErr)
	assert.Equal(t, "hello", string(got))
	envelopeOf(t, viewer("GET", denied.Path+"/workspace/files", nil)).refused(t, http.StatusForbidden, CodeForbidden)
	envelopeOf(t, viewer("GET", denied.Path+"/workspace/download?path=docs/readme.md", nil)).refused(t, http.StatusForbidden, CodeForbidden)
	envelopeOf(t, viewer("POST", allowed.Path+"/workspace/files?path=x.txt", strings.NewReader("x"))).refused(t, http.StatusForbidden, CodeForbidden)

	// 50 MB streamed through the API in bounded memory; past the cap nothing lands.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	envelopeOf(t, f.raw("POST", files+"?path=big.bin", f.member, "application/octet-stream", &zeroReader{n: 50 << 20})).ok(t)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("50 MiB upload through the API allocated %d KiB", allocated>>10)
	assert.Less(t, allocated, uint64(16<<20), "the upload was buffered")
	envelopeOf(t, f.raw("POST", files+"?path=huge.bin", f.member, "application/octet-stream", &zeroReader{n: 61 << 20})).
		refused(t, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "nothing was written")
	ls, err := f.box.Exec(f.ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", "ls -A /workspace"}})
	require.NoError(t, err)
	assert.NotContains(t, string(ls.Stdout), "huge.bin")
	assert.NotContains(t, string(ls.Stdout), ".astrabox-upload")

	// A released runtime has no workspace to offer: 409, nothing is woken.
	f.exec(`UPDATE sessions SET sandbox_id = NULL WHERE id = $1`, f.session)
	f.call("GET", files, f.member, nil).refused(t, http.StatusConflict, CodeWorkspaceUnavailable, "released")
	f.call("POST", "/api/v1/sessions/"+f.session+"/terminal/interrupt", f.member, nil).refused(t, http.StatusConflict, CodeWorkspaceUnavailable)
}

func TestWorkspaceRoutesWithoutSandboxesAnswer503(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.exec(`UPDATE sessions SET lifecycle = 'active', sandbox_id = 'box-1' WHERE id = $1`, id)
	f.call("GET", "/api/v1/sessions/"+id+"/workspace/files", f.member, nil).refused(t, http.StatusServiceUnavailable, CodeServiceUnavailable)
	f.call("GET", "/api/v1/sessions/"+id+"/workspace/files?path=../x", f.member, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest, "path")
}

// zeroReader yields n zero bytes without holding them.
type zeroReader struct{ n int64 }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > z.n {
		p = p[:z.n]
	}
	clear(p)
	z.n -= int64(len(p))
	return len(p), nil
}

// viewer is one WebSocket client of the terminal.
type viewer struct {
	t    testing.TB
	conn *websocket.Conn
	seen strings.Builder
	from int
	last int64
}

func (f *boxFixture) openTerminal(after int64) *viewer {
	f.t.Helper()
	u := strings.Replace(f.srv.URL, "http", "ws", 1) + fmt.Sprintf("/api/v1/sessions/%s/terminal?after=%d", f.session, after)
	conn, resp, err := websocket.Dial(f.ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + f.member}}})
	require.NoError(f.t, err)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	f.t.Cleanup(func() { conn.CloseNow() })
	v := &viewer{t: f.t, conn: conn}
	var ready terminalMessage
	require.NoError(f.t, wsjson.Read(f.ctx, conn, &ready))
	require.Equal(f.t, "ready", ready.Type)
	return v
}

func (v *viewer) send(msg terminalMessage) {
	v.t.Helper()
	require.NoError(v.t, wsjson.Write(context.Background(), v.conn, msg))
}

func (v *viewer) waitFor(text string) {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !strings.Contains(v.seen.String()[v.from:], text) {
		var msg terminalMessage
		require.NoError(v.t, wsjson.Read(ctx, v.conn, &msg), "waiting for %q; saw %q", text, v.seen.String())
		require.NotEqual(v.t, "error", msg.Type, msg.Message)
		if msg.Type == "output" {
			v.seen.Write(msg.Data)
			v.last = msg.Offset
		}
	}
	v.from += strings.Index(v.seen.String()[v.from:], text) + len(text)
}

func TestTerminalThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := newBoxFixture(t, nil)
	interrupt := "/api/v1/sessions/" + f.session + "/terminal/interrupt"
	var res terminalInterrupt
	// No terminal yet: nothing to interrupt.
	f.call("POST", interrupt, f.member, nil).ok(t).into(t, &res)
	assert.False(t, res.Interrupted)

	a := f.openTerminal(0)
	a.send(terminalMessage{Type: "input", Text: "PS1='READY''> '; echo \"hi $(id -u)\"\n"})
	info, err := f.box.Info(f.ctx)
	require.NoError(t, err)
	a.waitFor(fmt.Sprintf("hi %d\r\n", info.UID))
	a.waitFor("READY> ")
	a.send(terminalMessage{Type: "resize", Cols: 120, Rows: 40})
	a.send(terminalMessage{Type: "input", Text: "stty size\n"})
	a.waitFor("40 120\r\n")
	a.waitFor("READY> ")
	f.call("POST", interrupt, f.member, nil).ok(t).into(t, &res)
	assert.False(t, res.Interrupted, "the shell waits at its prompt")

	// A second viewer joins from the start and sees everything; a third resumes
	// from the first one's offset and sees only what follows.
	b := f.openTerminal(0)
	b.waitFor("40 120")
	c := f.openTerminal(a.last)
	// The command says when it runs (a SIGINT before that would be lost, as a
	// too early Ctrl-C is).
	a.send(terminalMessage{Type: "input", Text: "sh -c 'echo started; exec sleep 1000'\n"})
	c.waitFor("started\r\n")
	f.call("POST", interrupt, f.member, nil).ok(t).into(t, &res)
	assert.True(t, res.Interrupted)
	c.waitFor("READY> ")
	c.send(terminalMessage{Type: "input", Text: "echo \"rc=$?\"\n"})
	c.waitFor("rc=130")
	b.waitFor("rc=130")
	assert.NotContains(t, c.seen.String(), "40 120", "a resumed viewer gets no repeats")

	// Bad messages are answered on the socket, which stays open.
	a.send(terminalMessage{Type: "resize", Cols: 0, Rows: 5})
	var msg terminalMessage
	for msg.Type != "error" {
		require.NoError(t, wsjson.Read(f.ctx, a.conn, &msg))
	}
	assert.Contains(t, msg.Message, "terminal size")
	// Only the owner opens the terminal.
	u := strings.Replace(f.srv.URL, "http", "ws", 1) + "/api/v1/sessions/" + f.session + "/terminal"
	_, resp, err := websocket.Dial(f.ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + f.admin}}})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// A browser cannot set headers on a WebSocket: it offers the token as a subprotocol,
// which opens the terminal for the owner only and is never echoed back.
func TestTerminalBearerSubprotocol(t *testing.T) {
	t.Parallel()
	f := newBoxFixture(t, nil)
	u := strings.Replace(f.srv.URL, "http", "ws", 1) + "/api/v1/sessions/" + f.session + "/terminal"
	dial := func(protocols ...string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(f.ctx, u, &websocket.DialOptions{Subprotocols: protocols})
	}

	conn, resp, err := dial(terminalSubprotocol, bearerSubprotocolPrefix+f.member)
	require.NoError(t, err)
	defer conn.CloseNow()
	assert.Equal(t, terminalSubprotocol, conn.Subprotocol(), "the token is not echoed")
	assert.Equal(t, terminalSubprotocol, resp.Header.Get("Sec-WebSocket-Protocol"))
	var ready terminalMessage
	require.NoError(t, wsjson.Read(f.ctx, conn, &ready))
	assert.Equal(t, "ready", ready.Type)
	require.NoError(t, wsjson.Write(f.ctx, conn, terminalMessage{Type: "input", Text: "echo via-subprotocol\n"}))
	v := &viewer{t: t, conn: conn}
	v.waitFor("via-subprotocol\r\n")

	for _, tc := range []struct {
		name      string
		protocols []string
		status    int
	}{
		{"no token", []string{terminalSubprotocol}, http.StatusUnauthorized},
		{"unknown token", []string{terminalSubprotocol, bearerSubprotocolPrefix + "abx_unknown"}, http.StatusUnauthorized},
		{"admin is not the owner", []string{terminalSubprotocol, bearerSubprotocolPrefix + f.admin}, http.StatusForbidden},
	} {
		_, resp, err := dial(tc.protocols...)
		require.Error(t, err, tc.name)
		require.NotNil(t, resp, tc.name)
		assert.Equal(t, tc.status, resp.StatusCode, tc.name)
	}

	// The subprotocol is only read on a WebSocket upgrade: a plain request needs the header.
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, f.srv.URL+"/api/v1/sessions/"+f.session, nil)
	require.NoError(t, err)
	req.Header.Set("Sec-WebSocket-Protocol", bearerSubprotocolPrefix+f.member)
	plain, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, envelopeOf(t, plain).Status)
}
