package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// workspaceRoutes serves the Session workspace's files API; every handler runs
// with the program account's file-system identity (asProgram).
func (r *Runner) workspaceRoutes(mux *http.ServeMux) {
	ws := workspaceFS{root: r.cfg.Workspace}
	mux.HandleFunc("GET /v1/workspace/list", r.asProgram(func(w http.ResponseWriter, req *http.Request) {
		out, err := ws.list(req.URL.Query().Get("path"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, out)
	}))
	mux.HandleFunc("GET /v1/workspace/file", r.asProgram(func(w http.ResponseWriter, req *http.Request) {
		f, info, err := ws.openFile(req.URL.Query().Get("path"))
		if err != nil {
			writeError(w, err)
			return
		}
		defer f.Close()
		raw, _ := json.Marshal(info)
		w.Header().Set(runnerapi.FileInfoHeader, string(raw))
		w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
		w.Header().Set("Content-Type", "application/octet-stream")
		if _, err := io.Copy(w, io.LimitReader(f, info.Size)); err != nil {
			r.logger.Printf("download %s: %v", info.Path, err)
		}
	}))
	mux.HandleFunc("GET /v1/workspace/archive", r.asProgram(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		// Problems found before the first byte are answered as errors; later
		// ones arrive in the trailer, so a cut archive is never taken for whole.
		if _, err := ws.list(q.Get("path")); err != nil {
			writeError(w, err)
			return
		}
		if f := q.Get("format"); f != sandbox.ArchiveTar && f != sandbox.ArchiveZip {
			writeError(w, fmt.Errorf("%w: archive format %q (tar or zip)", sandbox.ErrInvalidSpec, f))
			return
		}
		w.Header().Set("Trailer", runnerapi.ErrorTrailer)
		w.Header().Set("Content-Type", "application/octet-stream")
		bw := bufio.NewWriterSize(w, 64<<10)
		err := ws.archive(q.Get("path"), q.Get("format"), bw)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			w.Header().Set(runnerapi.ErrorTrailer, err.Error())
		}
	}))
	mux.HandleFunc("POST /v1/workspace/upload", r.asProgram(func(w http.ResponseWriter, req *http.Request) {
		_, params, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
		if err != nil || params["boundary"] == "" {
			writeError(w, fmt.Errorf("%w: upload needs a multipart body", sandbox.ErrInvalidSpec))
			return
		}
		out, err := ws.upload(&partSource{r: multipart.NewReader(req.Body, params["boundary"])})
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, out)
	}))
}

// partSource reads an upload's files from multipart parts, each naming its
// workspace path and mode in the runner's part headers.
type partSource struct {
	r *multipart.Reader
}

func (p *partSource) Next() (sandbox.UploadFile, error) {
	part, err := p.r.NextRawPart()
	if err != nil {
		return sandbox.UploadFile{}, err
	}
	if reason := part.Header.Get(runnerapi.UploadAbandonHeader); reason != "" {
		if unescaped, err := url.PathUnescape(reason); err == nil {
			reason = unescaped
		}
		// Answered only once upload has removed what it staged, which the
		// sender waits for.
		return sandbox.UploadFile{}, fmt.Errorf("%w: upload abandoned by its sender: %s", sandbox.ErrInvalidSpec, reason)
	}
	mode, err := strconv.ParseUint(part.Header.Get(runnerapi.UploadModeHeader), 8, 32)
	if err != nil {
		return sandbox.UploadFile{}, fmt.Errorf("%w: mode %q", sandbox.ErrInvalidSpec, part.Header.Get(runnerapi.UploadModeHeader))
	}
	name, err := url.PathUnescape(part.Header.Get(runnerapi.UploadPathHeader))
	if err != nil {
		return sandbox.UploadFile{}, fmt.Errorf("%w: path %q", sandbox.ErrInvalidPath, part.Header.Get(runnerapi.UploadPathHeader))
	}
	return sandbox.UploadFile{Path: name, Mode: uint32(mode), Body: part}, nil
}

// terminalRoutes serves the web terminal's pseudo-terminals.
func (r *Runner) terminalRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/terminals", func(w http.ResponseWriter, req *http.Request) {
		var spec sandbox.TerminalSpec
		if err := json.NewDecoder(req.Body).Decode(&spec); err != nil {
			writeError(w, fmt.Errorf("%w: %v", sandbox.ErrInvalidSpec, err))
			return
		}
		st, err := r.startTerminal(spec)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, st)
	})
	mux.HandleFunc("GET /v1/terminals/{id}", r.withTerminal(func(w http.ResponseWriter, _ *http.Request, t *terminal) {
		writeJSON(w, t.status())
	}))
	mux.HandleFunc("POST /v1/terminals/{id}/input", r.withTerminal(func(w http.ResponseWriter, req *http.Request, t *terminal) {
		data, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		if err == nil {
			err = t.write(data)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, struct{}{})
	}))
	mux.HandleFunc("POST /v1/terminals/{id}/resize", r.withTerminal(func(w http.ResponseWriter, req *http.Request, t *terminal) {
		var body runnerapi.ResizeRequest
		err := json.NewDecoder(req.Body).Decode(&body)
		if err != nil {
			err = fmt.Errorf("%w: %v", sandbox.ErrInvalidSpec, err)
		} else {
			err = t.resize(body.Cols, body.Rows)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, struct{}{})
	}))
	mux.HandleFunc("POST /v1/terminals/{id}/interrupt", r.withTerminal(func(w http.ResponseWriter, _ *http.Request, t *terminal) {
		ok, err := t.interrupt()
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, runnerapi.InterruptResult{Interrupted: ok})
	}))
	mux.HandleFunc("GET /v1/terminals/{id}/output", r.withTerminal(func(w http.ResponseWriter, req *http.Request, t *terminal) {
		after, err := strconv.ParseInt(req.URL.Query().Get("after"), 10, 64)
		if (err != nil && req.URL.Query().Get("after") != "") || after < 0 {
			writeError(w, fmt.Errorf("%w: after %q", sandbox.ErrInvalidSpec, req.URL.Query().Get("after")))
			return
		}
		w.Header().Set("Content-Type", "application/x-astrabox-journal")
		w.WriteHeader(http.StatusOK)
		flusher, _ := w.(http.Flusher)
		if flusher != nil {
			flusher.Flush()
		}
		var frame []byte
		err = t.stream(req.Context(), after, func(data []byte, end int64) error {
			frame = runnerapi.AppendRecord(frame[:0], end, sandbox.Stdout, data)
			if _, err := w.Write(frame); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		})
		if errors.Is(err, io.EOF) {
			_, _ = w.Write(runnerapi.AppendEnd(nil, runnerapi.EndExited))
		}
	}))
}

func (r *Runner) withTerminal(h func(http.ResponseWriter, *http.Request, *terminal)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		t, ok := r.terms[req.PathValue("id")]
		r.mu.Unlock()
		if !ok {
			writeError(w, fmt.Errorf("terminal %q: %w", req.PathValue("id"), sandbox.ErrNoProcess))
			return
		}
		h(w, req, t)
	}
}

func (r *Runner) startTerminal(spec sandbox.TerminalSpec) (sandbox.TerminalStatus, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.TerminalStatus{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.terms[spec.ID]
	if ok && prev.running() == nil {
		st := prev.status()
		st.Existed = true
		return st, nil
	}
	t, err := startTerminal(spec, prev, envList(r.cfg.Env, spec.Env), r.cfg.Workspace, r.acct)
	if err != nil {
		return sandbox.TerminalStatus{}, err
	}
	r.terms[spec.ID] = t
	return t.status(), nil
}
