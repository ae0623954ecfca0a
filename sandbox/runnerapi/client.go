package runnerapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// Client talks to one runner, over its unix socket or over the network. It is
// safe for concurrent use; Close drops idle connections only (the runner and its
// processes go on).
type Client struct {
	// base is the URL requests' paths are appended to.
	base string
	// dial, when set, opens a raw connection to the runner (DialPort's upgrade
	// goes over it); a client made by NewHTTPClient upgrades through http.
	dial  func(ctx context.Context) (net.Conn, error)
	token string
	http  *http.Client
}

// idleConnTimeout is how long a connection to a near runner stays open unused: long
// enough for the calls of one turn to share it.
const idleConnTimeout = 5 * time.Second

// NewClient returns a client for the runner listening on socket (a host path).
func NewClient(socket string) *Client {
	return NewDialClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}, "")
}

// NewDialClient returns a client that reaches the runner through dial (for
// example a TCP endpoint a remote backend publishes) and sends token.
func NewDialClient(dial func(ctx context.Context) (net.Conn, error), token string) *Client {
	// A live Session holds its output stream's connection and, within a turn, one
	// idle connection for its next calls (delivery, status, the native log). Every
	// connection costs two goroutines and 8 KiB of buffers while it lives, and a
	// runner is near: a burst's extra connections are closed, not kept, and the one
	// kept is closed once the turn's calls are over, since a Session spends most of
	// its life idle between turns.
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConnsPerHost: 1, IdleConnTimeout: idleConnTimeout,
		// A request is headers and a small body (a larger one is written past the
		// buffer), and a Session's output stream keeps its connection for the
		// runtime's life: the default 4 KiB would sit unused there.
		WriteBufferSize: 1 << 10,
	}
	return &Client{base: "http://runner", dial: dial, token: token, http: &http.Client{Transport: tr}}
}

// NewHTTPClient returns a client for a runner serving on the network (the
// image entry point `astrabox-runner serve -listen`) at baseURL, an http or
// https URL that may carry a path prefix (a gateway's route to the box). Every
// request carries token; hc brings the transport (TLS, timeouts for dialing,
// headers a gateway wants) and must not set an overall Timeout, since output
// streams and waits are long-lived. A nil hc is http.DefaultClient.
func NewHTTPClient(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimSuffix(baseURL, "/"), token: token, http: hc}
}

// Close drops the client's idle connections.
func (c *Client) Close() error {
	c.http.CloseIdleConnections()
	return nil
}

// remoteError is an error answered by the runner.
type remoteError struct {
	status   int
	body     ErrorBody
	sentinel error
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("runner: %s (%d): %s", e.body.Code, e.status, e.body.Message)
}

func (e *remoteError) Unwrap() error { return e.sentinel }

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body io.Reader, out any) error {
	resp, err := c.send(ctx, method, path, query, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if raw, ok := out.(*[]byte); ok {
		*raw, err = io.ReadAll(resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, query url.Values, body io.Reader, header http.Header) (*http.Response, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if tb, ok := body.(*typedBody); ok {
		req.Header.Set("Content-Type", tb.contentType)
	}
	if c.token != "" {
		req.Header.Set(TokenHeader, c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	e := &remoteError{status: resp.StatusCode}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &e.body) != nil || e.body.Code == "" {
		e.body = ErrorBody{Code: CodeInternal, Message: string(raw)}
	}
	e.sentinel = SentinelFor(e.body.Code)
	return e
}

func jsonBody(v any) io.Reader {
	raw, _ := json.Marshal(v)
	return bytes.NewReader(raw)
}

// Info returns the runner's boot id and start time; it doubles as a ping.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var out Info
	return out, c.do(ctx, http.MethodGet, "/v1/info", nil, nil, &out)
}

// StartProcess starts a process session (idempotent by spec.ID).
func (c *Client) StartProcess(ctx context.Context, spec sandbox.ProcessSpec) (sandbox.ProcessStatus, error) {
	var out sandbox.ProcessStatus
	return out, c.do(ctx, http.MethodPost, "/v1/processes", nil, jsonBody(spec), &out)
}

// Processes lists every process session of this runner boot.
func (c *Client) Processes(ctx context.Context) ([]sandbox.ProcessStatus, error) {
	var out []sandbox.ProcessStatus
	return out, c.do(ctx, http.MethodGet, "/v1/processes", nil, nil, &out)
}

// Process returns one process session's status.
func (c *Client) Process(ctx context.Context, id string) (sandbox.ProcessStatus, error) {
	var out sandbox.ProcessStatus
	return out, c.do(ctx, http.MethodGet, "/v1/processes/"+url.PathEscape(id), nil, nil, &out)
}

// Wait blocks until the process has exited.
func (c *Client) Wait(ctx context.Context, id string) (sandbox.ProcessStatus, error) {
	var out sandbox.ProcessStatus
	return out, c.do(ctx, http.MethodGet, "/v1/processes/"+url.PathEscape(id)+"/wait", nil, nil, &out)
}

// WriteStdin writes data once per writeID.
func (c *Client) WriteStdin(ctx context.Context, id, writeID string, data []byte) (sandbox.WriteResult, error) {
	var out sandbox.WriteResult
	q := url.Values{"write_id": {writeID}}
	return out, c.do(ctx, http.MethodPost, "/v1/processes/"+url.PathEscape(id)+"/stdin", q, bytes.NewReader(data), &out)
}

// CloseStdin closes the process's stdin.
func (c *Client) CloseStdin(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/processes/"+url.PathEscape(id)+"/stdin/close", nil, nil, nil)
}

// CommitOutput lets the runner free output lines through offset.
func (c *Client) CommitOutput(ctx context.Context, id string, through int64) error {
	q := url.Values{"through": {strconv.FormatInt(through, 10)}}
	return c.do(ctx, http.MethodPost, "/v1/processes/"+url.PathEscape(id)+"/output/commit", q, nil, nil)
}

// SignalRequest is the body of a signal call.
type SignalRequest struct {
	Signal string `json:"signal"`
	Group  bool   `json:"group"`
}

// Signal sends a signal to the process (or its group).
func (c *Client) Signal(ctx context.Context, id, signal string, group bool) error {
	return c.do(ctx, http.MethodPost, "/v1/processes/"+url.PathEscape(id)+"/signal", nil,
		jsonBody(SignalRequest{Signal: signal, Group: group}), nil)
}

// Output streams lines with offset > after.
func (c *Client) Output(ctx context.Context, id string, after int64, follow bool) (*OutputStream, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if follow {
		q.Set("follow", "1")
	}
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodGet, "/v1/processes/"+url.PathEscape(id)+"/output", q, nil, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	return &OutputStream{body: resp.Body, dec: NewDecoder(resp.Body), cancel: cancel, next: after + 1}, nil
}

// OutputStream is a live output stream; it checks that offsets follow each other.
type OutputStream struct {
	body   io.ReadCloser
	dec    *Decoder
	cancel context.CancelFunc
	next   int64
}

var _ sandbox.OutputStream = (*OutputStream)(nil)

// ErrStreamBroken reports a stream that ended without its end frame: the
// connection was lost, not the process. Reconnect from the last offset.
var ErrStreamBroken = errors.New("runner: output stream broken")

// Next returns the next line, io.EOF after the end frame, or ErrStreamBroken.
func (s *OutputStream) Next() (sandbox.OutputLine, error) {
	line, err := s.dec.Next()
	if errors.Is(err, io.EOF) && s.dec.End != "" {
		return line, io.EOF
	}
	if err != nil {
		return line, fmt.Errorf("%w: %v", ErrStreamBroken, err)
	}
	if line.Offset != s.next {
		return line, fmt.Errorf("%w: got offset %d, want %d", ErrStreamBroken, line.Offset, s.next)
	}
	s.next++
	return line, nil
}

// EndReason is the reason of the end frame (EndExited or EndCaughtUp) once Next
// returned io.EOF.
func (s *OutputStream) EndReason() string { return s.dec.End }

// Close ends the stream.
func (s *OutputStream) Close() error {
	s.cancel()
	return s.body.Close()
}

// Exec runs a command to completion.
func (c *Client) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	var out sandbox.ExecResult
	return out, c.do(ctx, http.MethodPost, "/v1/exec", nil, jsonBody(req), &out)
}

// ReadFile reads a file inside the box.
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var out []byte
	return out, c.do(ctx, http.MethodGet, "/v1/files", url.Values{"path": {path}}, nil, &out)
}

// ReadFileFrom reads a file inside the box from byte offset on, and its size when
// opened: a size below offset means the file was replaced by a shorter one. A runner
// that predates offsets sends the whole file; the client then cuts it here.
func (c *Client) ReadFileFrom(ctx context.Context, path string, offset int64) ([]byte, int64, error) {
	q := url.Values{"path": {path}, "offset": {strconv.FormatInt(offset, 10)}}
	resp, err := c.send(ctx, http.MethodGet, "/v1/files", q, nil, nil)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	size, perr := strconv.ParseInt(resp.Header.Get(FileSizeHeader), 10, 64)
	if perr != nil {
		size = int64(len(data))
		data = data[min(offset, size):]
	}
	return data, size, nil
}

// WriteFile writes a file inside the box.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	q := url.Values{"path": {path}, "mode": {strconv.FormatUint(uint64(mode), 8)}}
	return c.do(ctx, http.MethodPut, "/v1/files", q, bytes.NewReader(data), nil)
}

// ListDir lists a directory inside the box.
func (c *Client) ListDir(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	var out []sandbox.FileInfo
	return out, c.do(ctx, http.MethodGet, "/v1/dirs", url.Values{"path": {path}}, nil, &out)
}

// ShutdownRequest is the body of a shutdown call.
type ShutdownRequest struct {
	// Grace is how long processes get after SIGTERM before SIGKILL.
	Grace time.Duration `json:"grace"`
}

// Shutdown asks the runner to stop every process and exit, ending the box.
func (c *Client) Shutdown(ctx context.Context, grace time.Duration) error {
	return c.do(ctx, http.MethodPost, "/v1/shutdown", nil, jsonBody(ShutdownRequest{Grace: grace}), nil)
}

// DialPort opens a TCP connection to 127.0.0.1:port inside the box, relayed by
// the runner over an upgraded HTTP connection.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := c.upgrade(ctx, fmt.Sprintf("/v1/ports/%d", port), "tcp")
	if err != nil {
		return nil, fmt.Errorf("dial box port %d: %w", port, err)
	}
	return conn, nil
}

// upgrade asks the runner to switch the connection of a GET of path to proto
// and returns the upgraded connection.
func (c *Client) upgrade(ctx context.Context, path, proto string) (net.Conn, error) {
	if c.dial == nil {
		return c.upgradeHTTP(ctx, path, proto)
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial runner: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	auth := ""
	if c.token != "" {
		auth = TokenHeader + ": " + c.token + "\r\n"
	}
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: runner\r\n%sConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", path, auth, proto)
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send upgrade: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read upgrade: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		err := decodeError(resp)
		resp.Body.Close()
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn reads through the reader that parsed the upgrade response.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// CloseWrite half-closes the connection when the underlying one can.
func (b *bufferedConn) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// upgradeHTTP asks for the upgrade through the http client: a 101 answer's
// body is the connection itself.
func (c *Client) upgradeHTTP(ctx context.Context, path, proto string) (net.Conn, error) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build upgrade: %w", err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", proto)
	if c.token != "" {
		req.Header.Set(TokenHeader, c.token)
	}
	type answer struct {
		resp *http.Response
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := c.http.Do(req)
		done <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		go func() {
			if a := <-done; a.resp != nil {
				a.resp.Body.Close()
			}
		}()
		return nil, ctx.Err()
	}
	if a.err != nil {
		return nil, a.err
	}
	if a.resp.StatusCode != http.StatusSwitchingProtocols {
		defer a.resp.Body.Close()
		return nil, decodeError(a.resp)
	}
	rwc, ok := a.resp.Body.(io.ReadWriteCloser)
	if !ok {
		a.resp.Body.Close()
		return nil, errors.New("the transport gave no writable upgraded connection")
	}
	return &upgradedConn{ReadWriteCloser: rwc}, nil
}

// upgradedConn presents an upgraded HTTP body as a net.Conn. Deadlines are not
// supported through it; callers bound their use with contexts.
type upgradedConn struct {
	io.ReadWriteCloser
}

type runnerAddr struct{}

func (runnerAddr) Network() string { return "tcp" }
func (runnerAddr) String() string  { return "runner" }

func (u *upgradedConn) LocalAddr() net.Addr              { return runnerAddr{} }
func (u *upgradedConn) RemoteAddr() net.Addr             { return runnerAddr{} }
func (u *upgradedConn) SetDeadline(time.Time) error      { return nil }
func (u *upgradedConn) SetReadDeadline(time.Time) error  { return nil }
func (u *upgradedConn) SetWriteDeadline(time.Time) error { return nil }
