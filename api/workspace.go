package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// CodeWorkspaceUnavailable refuses a workspace or terminal request while the
// Session has no running box: its runtime was released (idle, archived, lost) or
// is paused. Workspace files do not outlive a released box unless the
// RuntimeProfile has a persistent workspace; a new message starts the runtime.
const CodeWorkspaceUnavailable = "WORKSPACE_UNAVAILABLE"

const (
	// defaultMaxUploadBytes caps one upload request when Options.MaxUploadBytes is zero.
	defaultMaxUploadBytes = 256 << 20
	// uploadReadTimeout replaces http.read_timeout for an upload's body, which
	// may be large; the size cap still bounds it.
	uploadReadTimeout = 15 * time.Minute
	// maxWorkspaceListLimit bounds a page of a folder listing.
	maxWorkspaceListLimit = 1000
)

// SessionBoxes finds the box that holds a Session's runtime (a sandbox.Backend
// satisfies it). The API reaches the box directly for the workspace files API
// and the web terminal, which stream too much to pass through workflows.
type SessionBoxes interface {
	Get(ctx context.Context, id string) (sandbox.Handle, error)
}

// loadWorkspaceSession is the one authorization check of the workspace files
// API. Reading (list, download) is for the owner, administrators and viewers of
// a share link created with allow_download; uploading is the owner's alone.
func (s *Server) loadWorkspaceSession(c *gin.Context, want access) (store.Session, error) {
	if want == readAccess {
		return s.loadSessionForDownload(c)
	}
	return s.loadSession(c, want)
}

// workspaceUnavailable is the 409 of a Session without a running box.
func workspaceUnavailable(why string) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeWorkspaceUnavailable,
		Message: "the Session's workspace is not available: " + why + "; send a message to start its runtime again"}
}

// sessionBox opens the Session's running box. A released runtime is a 409: the
// files API does not wake a runtime, since only the Session's workflow places
// one and a released ephemeral workspace is gone anyway.
func (s *Server) sessionBox(c *gin.Context, sess store.Session) (sandbox.Handle, error) {
	if sess.SandboxID == nil {
		return nil, workspaceUnavailable("its runtime is released")
	}
	if s.boxes == nil {
		return nil, Unavailable("this API process does not reach the sandboxes; use the process that runs the worker", nil)
	}
	h, err := s.boxes.Get(c.Request.Context(), *sess.SandboxID)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, workspaceUnavailable("its sandbox is gone")
	}
	if err != nil {
		return nil, fmt.Errorf("open box %s: %w", *sess.SandboxID, err)
	}
	info, err := h.Info(c.Request.Context())
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("box %s info: %w", *sess.SandboxID, err)
	}
	if info.State != sandbox.StateRunning {
		h.Close()
		return nil, workspaceUnavailable("its sandbox is " + strings.ToLower(string(info.State)))
	}
	return h, nil
}

// workspaceError maps the box's answers onto the envelope; field names the
// request field a refused path came from.
func workspaceError(field, p string, err error) error {
	switch {
	case errors.Is(err, sandbox.ErrInvalidPath):
		_, msg, _ := strings.Cut(err.Error(), sandbox.ErrInvalidPath.Error()+": ")
		if msg == "" {
			msg = "is not a path inside the workspace"
		}
		return InvalidRequest(field, "%s", msg)
	case errors.Is(err, sandbox.ErrNoFile):
		return NotFound(fmt.Sprintf("workspace file %q", p))
	case errors.Is(err, sandbox.ErrNotFolder):
		return InvalidRequest(field, "%q is not a folder", p)
	case errors.Is(err, sandbox.ErrIsFolder):
		return InvalidRequest(field, "%q is a folder", p)
	case errors.Is(err, sandbox.ErrBoxLost):
		return workspaceUnavailable("its sandbox was lost")
	}
	return err
}

// workspacePath reads and checks the path query parameter.
func workspacePath(c *gin.Context, field string) (string, error) {
	p, err := sandbox.CleanWorkspacePath(c.Query(field))
	if err != nil {
		return "", workspaceError(field, c.Query(field), err)
	}
	return p, nil
}

// workspaceEntry is one entry of a folder listing.
type workspaceEntry struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	Kind       string    `json:"kind"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
}

type workspacePage struct {
	Path    string           `json:"path"`
	Entries []workspaceEntry `json:"entries"`
	Page    int64            `json:"page"`
	Limit   int64            `json:"limit"`
	Total   int              `json:"total"`
	HasMore bool             `json:"has_more"`
}

func (s *Server) listWorkspace(c *gin.Context) {
	if err := knownQuery(c, "path", "page", "limit"); err != nil {
		s.fail(c, err)
		return
	}
	p, err := workspacePath(c, "path")
	if err != nil {
		s.fail(c, err)
		return
	}
	page, err := queryInt(c, "page", 1, 1, 1_000_000)
	if err != nil {
		s.fail(c, err)
		return
	}
	limit, err := queryInt(c, "limit", 100, 1, maxWorkspaceListLimit)
	if err != nil {
		s.fail(c, err)
		return
	}
	sess, err := s.loadWorkspaceSession(c, readAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	h, err := s.sessionBox(c, sess)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer h.Close()
	all, err := h.ListWorkspace(c.Request.Context(), p)
	if err != nil {
		s.fail(c, workspaceError("path", p, err))
		return
	}
	out := workspacePage{Path: p, Entries: []workspaceEntry{}, Page: page, Limit: limit, Total: len(all)}
	from := min(int64(len(all)), (page-1)*limit)
	to := min(int64(len(all)), from+limit)
	for _, f := range all[from:to] {
		out.Entries = append(out.Entries, workspaceEntry{Name: path.Base(f.Path), Path: f.Path, Kind: f.Type, Size: f.Size, ModifiedAt: f.ModifiedAt})
	}
	out.HasMore = to < int64(len(all))
	writeOK(c, out)
}

// downloadWorkspace streams one file, or a folder as a tar or zip archive.
func (s *Server) downloadWorkspace(c *gin.Context) {
	if err := knownQuery(c, "path", "format"); err != nil {
		s.fail(c, err)
		return
	}
	p, err := workspacePath(c, "path")
	if err != nil {
		s.fail(c, err)
		return
	}
	format := c.DefaultQuery("format", sandbox.ArchiveTar)
	if format != sandbox.ArchiveTar && format != sandbox.ArchiveZip {
		s.fail(c, InvalidRequest("format", "must be tar or zip"))
		return
	}
	sess, err := s.loadWorkspaceSession(c, readAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	h, err := s.sessionBox(c, sess)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer h.Close()
	ctx := c.Request.Context()
	name := path.Base(p)
	if p == "" {
		name = "workspace"
	}
	body, info, err := h.OpenWorkspaceFile(ctx, p)
	if p == "" || errors.Is(err, sandbox.ErrIsFolder) {
		body, err = h.ArchiveWorkspace(ctx, p, format)
		if err != nil {
			s.fail(c, workspaceError("path", p, err))
			return
		}
		defer body.Close()
		contentType := "application/x-tar"
		if format == sandbox.ArchiveZip {
			contentType = "application/zip"
		}
		c.Header("Content-Type", contentType)
		c.Header("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name + "." + format}))
		c.Status(http.StatusOK)
		s.streamBody(c, body, p)
		return
	}
	if err != nil {
		s.fail(c, workspaceError("path", p, err))
		return
	}
	defer body.Close()
	contentType := mime.TypeByExtension(path.Ext(name))
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	c.Header("Content-Type", contentType)
	c.Header("Content-Length", fmt.Sprint(info.Size))
	c.Header("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	c.Status(http.StatusOK)
	s.streamBody(c, body, p)
}

// streamBody copies a download to the client. A failure after the first byte
// cannot be answered with an error any more, so the connection is cut: the
// client sees a broken transfer, never a short file taken for whole.
func (s *Server) streamBody(c *gin.Context, body io.Reader, p string) {
	if _, err := io.Copy(c.Writer, body); err != nil {
		RequestLogger(c, s.log).Warn("workspace download cut", zap.String("path", p), zap.Error(err))
		if conn, _, herr := http.NewResponseController(c.Writer).Hijack(); herr == nil {
			conn.Close()
		}
	}
}

// uploadResult lists the files an upload wrote.
type uploadResult struct {
	Files []workspaceEntry `json:"files"`
}

// uploadWorkspace writes files: a multipart/form-data body puts each file part
// into the folder path (its filename names it); any other body is one file at
// path. All of an upload lands, or none of it.
func (s *Server) uploadWorkspace(c *gin.Context) {
	if err := knownQuery(c, "path"); err != nil {
		s.fail(c, err)
		return
	}
	p, err := workspacePath(c, "path")
	if err != nil {
		s.fail(c, err)
		return
	}
	sess, err := s.loadWorkspaceSession(c, ownerAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	h, err := s.sessionBox(c, sess)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer h.Close()
	if err := http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(uploadReadTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.fail(c, fmt.Errorf("lift read deadline: %w", err))
		return
	}
	limited := &sizeCap{r: c.Request.Body, left: s.maxUploadBytes}
	var src sandbox.UploadSource
	field := "path"
	mediaType, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if mediaType == "multipart/form-data" {
		c.Request.Body = io.NopCloser(limited)
		mr, err := c.Request.MultipartReader()
		if err != nil {
			s.fail(c, InvalidRequest("body", "malformed multipart body: %v", err))
			return
		}
		src, field = &formFiles{folder: p, r: mr}, "files"
	} else {
		if p == "" {
			s.fail(c, InvalidRequest("path", "names the file to write; it is required for a body that is not multipart"))
			return
		}
		src = &oneFile{f: sandbox.UploadFile{Path: p, Body: limited}}
	}
	written, err := h.UploadWorkspace(c.Request.Context(), src)
	if form, ok := src.(*formFiles); ok && form.bad != nil {
		err = form.bad
	}
	switch {
	case limited.exceeded:
		s.fail(c, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
			Message: fmt.Sprintf("body: an upload may hold at most %d bytes; nothing was written", s.maxUploadBytes)})
		return
	case err != nil:
		var bad *Error
		if errors.As(err, &bad) {
			s.fail(c, bad)
			return
		}
		s.fail(c, workspaceError(field, p, err))
		return
	}
	out := uploadResult{Files: make([]workspaceEntry, len(written))}
	for i, f := range written {
		out.Files[i] = workspaceEntry{Name: path.Base(f.Path), Path: f.Path, Kind: f.Type, Size: f.Size, ModifiedAt: f.ModifiedAt}
	}
	writeOK(c, out)
}

// sizeCap fails reads past a byte budget and remembers that it did.
type sizeCap struct {
	r        io.Reader
	left     int64
	exceeded bool
}

func (s *sizeCap) Read(p []byte) (int, error) {
	if s.left <= 0 {
		// One more byte tells a body of exactly the cap from a larger one.
		var probe [1]byte
		if n, _ := s.r.Read(probe[:]); n > 0 {
			s.exceeded = true
			return 0, errors.New("upload exceeds its size cap")
		}
		return s.r.Read(p)
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	return n, err
}

// oneFile is an upload of one raw body.
type oneFile struct {
	f    sandbox.UploadFile
	done bool
}

func (o *oneFile) Next() (sandbox.UploadFile, error) {
	if o.done {
		return sandbox.UploadFile{}, io.EOF
	}
	o.done = true
	return o.f, nil
}

// formFiles yields the file parts of a multipart/form-data upload; form
// fields without a filename are refused.
type formFiles struct {
	folder string
	r      *multipart.Reader
	// bad is the refusal of a malformed part, kept because it reaches the
	// caller only as the cause of a failed request to the box.
	bad *Error
}

func (f *formFiles) Next() (sandbox.UploadFile, error) {
	part, err := f.r.NextPart()
	if errors.Is(err, io.EOF) {
		return sandbox.UploadFile{}, io.EOF
	}
	if err != nil {
		f.bad = InvalidRequest("body", "malformed multipart body: %v", err)
		return sandbox.UploadFile{}, f.bad
	}
	name := part.FileName()
	if name == "" {
		f.bad = InvalidRequest("files", "part %q has no filename", part.FormName())
		return sandbox.UploadFile{}, f.bad
	}
	return sandbox.UploadFile{Path: path.Join(f.folder, name), Body: part}, nil
}
