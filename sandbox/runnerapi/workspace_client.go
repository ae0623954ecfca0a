package runnerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"

	"github.com/astrabox/astrabox/sandbox"
)

// ListWorkspace lists a workspace folder.
func (c *Client) ListWorkspace(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	var out []sandbox.FileInfo
	return out, c.do(ctx, http.MethodGet, "/v1/workspace/list", url.Values{"path": {path}}, nil, &out)
}

// OpenWorkspaceFile streams one workspace file.
func (c *Client) OpenWorkspaceFile(ctx context.Context, path string) (io.ReadCloser, sandbox.FileInfo, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodGet, "/v1/workspace/file", url.Values{"path": {path}}, nil, nil)
	if err != nil {
		cancel()
		return nil, sandbox.FileInfo{}, err
	}
	var info sandbox.FileInfo
	if err := json.Unmarshal([]byte(resp.Header.Get(FileInfoHeader)), &info); err != nil {
		resp.Body.Close()
		cancel()
		return nil, info, fmt.Errorf("decode file info of %q: %w", path, err)
	}
	return &checkedBody{resp: resp, cancel: cancel, want: info.Size}, info, nil
}

// ArchiveWorkspace streams a workspace folder as a tar or zip archive.
func (c *Client) ArchiveWorkspace(ctx context.Context, path, format string) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodGet, "/v1/workspace/archive", url.Values{"path": {path}, "format": {format}}, nil, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	return &checkedBody{resp: resp, cancel: cancel, want: -1}, nil
}

// ErrCutShort reports a download the runner could not finish.
var ErrCutShort = errors.New("runner: download cut short")

// checkedBody turns a body that ended early, or whose trailer reports a
// failure, into an error at its end instead of a clean io.EOF.
type checkedBody struct {
	resp   *http.Response
	cancel context.CancelFunc
	want   int64 // -1: unknown
	got    int64
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.resp.Body.Read(p)
	b.got += int64(n)
	if errors.Is(err, io.EOF) {
		if msg := b.resp.Trailer.Get(ErrorTrailer); msg != "" {
			return n, fmt.Errorf("%w: %s", ErrCutShort, msg)
		}
		if b.want >= 0 && b.got != b.want {
			return n, fmt.Errorf("%w: %d of %d bytes", ErrCutShort, b.got, b.want)
		}
	}
	return n, err
}

func (b *checkedBody) Close() error {
	b.cancel()
	return b.resp.Body.Close()
}

// UploadWorkspace sends every file of src in one multipart request; the runner
// renames them into place only once all arrived. When src fails, the request
// still ends cleanly, with a part that abandons the upload, and src's error is
// returned with the runner's answer: by then the runner has removed what it
// staged. (Cutting the request instead would return at once, while the runner
// may still be cleaning up.)
func (c *Client) UploadWorkspace(ctx context.Context, src sandbox.UploadSource) ([]sandbox.FileInfo, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	srcErr := make(chan error, 1)
	go func() {
		err := writeParts(mw, src)
		var failed *sourceError
		if errors.As(err, &failed) {
			srcErr <- failed.err // before the abandoning part, so it is here when the runner answers it
			err = abandon(mw, failed.err)
		}
		pw.CloseWithError(err)
	}()
	var out []sandbox.FileInfo
	err := c.do(ctx, http.MethodPost, "/v1/workspace/upload", nil, &typedBody{pr, mw.FormDataContentType()}, &out)
	pr.CloseWithError(err) // unblocks the writer when the runner refused early
	select {
	case failed := <-srcErr:
		return nil, failed
	default:
		return out, err
	}
}

// writeParts writes src's files as parts and closes mw. A failure of src
// itself comes back as a *sourceError; any other is the request's.
func writeParts(mw *multipart.Writer, src sandbox.UploadSource) error {
	for {
		f, err := src.Next()
		if errors.Is(err, io.EOF) {
			return mw.Close()
		}
		if err != nil {
			return &sourceError{err}
		}
		h := textproto.MIMEHeader{}
		h.Set(UploadPathHeader, url.PathEscape(f.Path)) // a header cannot carry every byte a name may hold
		h.Set(UploadModeHeader, strconv.FormatUint(uint64(f.Mode), 8))
		h.Set("Content-Type", "application/octet-stream")
		part, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		body := &sourceReader{r: f.Body}
		if _, err := io.Copy(part, body); err != nil {
			if body.err != nil {
				return &sourceError{body.err}
			}
			return err
		}
	}
}

// abandon ends the request with a part that abandons the upload, so the runner
// reads a whole body and answers only after removing what it staged. It
// returns the error to close the request with: nil once the part went out.
func abandon(mw *multipart.Writer, cause error) error {
	h := textproto.MIMEHeader{}
	h.Set(UploadAbandonHeader, url.PathEscape(cause.Error()))
	if _, err := mw.CreatePart(h); err != nil {
		return cause
	}
	if err := mw.Close(); err != nil {
		return cause
	}
	return nil
}

// sourceError is a failure of the upload's source, as opposed to the request's.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }

// sourceReader remembers its reader's failure, which io.Copy does not tell
// apart from its writer's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// typedBody is a request body that carries its own content type.
type typedBody struct {
	io.Reader
	contentType string
}

// StartTerminal starts (or finds) a terminal.
func (c *Client) StartTerminal(ctx context.Context, spec sandbox.TerminalSpec) (sandbox.TerminalStatus, error) {
	var out sandbox.TerminalStatus
	return out, c.do(ctx, http.MethodPost, "/v1/terminals", nil, jsonBody(spec), &out)
}

// Terminal returns a terminal's status.
func (c *Client) Terminal(ctx context.Context, id string) (sandbox.TerminalStatus, error) {
	var out sandbox.TerminalStatus
	return out, c.do(ctx, http.MethodGet, "/v1/terminals/"+url.PathEscape(id), nil, nil, &out)
}

// WriteTerminal sends keystrokes.
func (c *Client) WriteTerminal(ctx context.Context, id string, data []byte) error {
	return c.do(ctx, http.MethodPost, "/v1/terminals/"+url.PathEscape(id)+"/input", nil, bytes.NewReader(data), nil)
}

// ResizeTerminal sets the window size.
func (c *Client) ResizeTerminal(ctx context.Context, id string, cols, rows int) error {
	return c.do(ctx, http.MethodPost, "/v1/terminals/"+url.PathEscape(id)+"/resize", nil, jsonBody(ResizeRequest{Cols: cols, Rows: rows}), nil)
}

// InterruptTerminal interrupts the terminal's foreground job, if any.
func (c *Client) InterruptTerminal(ctx context.Context, id string) (bool, error) {
	var out InterruptResult
	err := c.do(ctx, http.MethodPost, "/v1/terminals/"+url.PathEscape(id)+"/interrupt", nil, nil, &out)
	return out.Interrupted, err
}

// ReadTerminal follows a terminal's output after the byte offset.
func (c *Client) ReadTerminal(ctx context.Context, id string, after int64) (sandbox.OutputStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodGet, "/v1/terminals/"+url.PathEscape(id)+"/output",
		url.Values{"after": {strconv.FormatInt(after, 10)}}, nil, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	return &terminalStream{body: resp.Body, dec: NewDecoder(resp.Body), cancel: cancel}, nil
}

// terminalStream yields terminal output chunks; Offset is the byte offset
// just after each chunk.
type terminalStream struct {
	body   io.ReadCloser
	dec    *Decoder
	cancel context.CancelFunc
}

func (s *terminalStream) Next() (sandbox.OutputLine, error) {
	line, err := s.dec.Next()
	if errors.Is(err, io.EOF) && s.dec.End != "" {
		return line, io.EOF
	}
	if err != nil {
		return line, fmt.Errorf("%w: %v", ErrStreamBroken, err)
	}
	return line, nil
}

func (s *terminalStream) Close() error {
	s.cancel()
	return s.body.Close()
}
