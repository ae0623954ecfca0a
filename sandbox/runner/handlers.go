package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

func (r *Runner) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/info", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, r.info) })
	mux.HandleFunc("POST /v1/processes", r.handleStart)
	mux.HandleFunc("GET /v1/processes", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, r.list()) })
	mux.HandleFunc("GET /v1/processes/{id}", r.withProcess(func(w http.ResponseWriter, _ *http.Request, p *process) {
		writeJSON(w, p.status())
	}))
	mux.HandleFunc("GET /v1/processes/{id}/wait", r.withProcess(func(w http.ResponseWriter, req *http.Request, p *process) {
		select {
		case <-p.exited:
			writeJSON(w, p.status())
		case <-req.Context().Done():
		}
	}))
	mux.HandleFunc("POST /v1/processes/{id}/stdin", r.withProcess(r.handleStdin))
	mux.HandleFunc("POST /v1/processes/{id}/stdin/close", r.withProcess(func(w http.ResponseWriter, _ *http.Request, p *process) {
		p.closeStdin()
		writeJSON(w, struct{}{})
	}))
	mux.HandleFunc("POST /v1/processes/{id}/signal", r.withProcess(r.handleSignal))
	mux.HandleFunc("GET /v1/processes/{id}/output", r.withProcess(r.handleOutput))
	mux.HandleFunc("POST /v1/processes/{id}/output/commit", r.withProcess(func(w http.ResponseWriter, req *http.Request, p *process) {
		through, err := strconv.ParseInt(req.URL.Query().Get("through"), 10, 64)
		if err == nil {
			err = p.journal.release(through)
		} else {
			err = fmt.Errorf("%w: through %q", sandbox.ErrInvalidSpec, req.URL.Query().Get("through"))
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, struct{}{})
	}))
	mux.HandleFunc("POST /v1/exec", r.handleExec)
	// Files are read and written as the program account (see account.do).
	mux.HandleFunc("GET /v1/files", r.asProgram(handleReadFile))
	mux.HandleFunc("PUT /v1/files", r.asProgram(handleWriteFile))
	mux.HandleFunc("GET /v1/dirs", r.asProgram(handleListDir))
	r.workspaceRoutes(mux)
	r.terminalRoutes(mux)
	mux.HandleFunc("GET /v1/ports/{port}", handlePort)
	mux.HandleFunc("GET "+runnerapi.TunnelPath, r.handleTunnel)
	mux.HandleFunc("GET "+runnerapi.TunnelForwardsPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]string{"forwards": r.cfg.TunnelForwards})
	})
	mux.HandleFunc("POST /v1/shutdown", func(w http.ResponseWriter, req *http.Request) {
		var body runnerapi.ShutdownRequest
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, fmt.Errorf("%w: %v", sandbox.ErrInvalidSpec, err))
			return
		}
		writeJSON(w, struct{}{})
		go r.shutdown(body.Grace)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(errorStatus(err))
	_ = json.NewEncoder(w).Encode(runnerapi.ErrorBody{Code: runnerapi.CodeFor(err), Message: err.Error()})
}

func (r *Runner) withProcess(h func(http.ResponseWriter, *http.Request, *process)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		p, err := r.process(req.PathValue("id"))
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, req, p)
	}
}

// asProgram serves h with the program account's file-system identity.
func (r *Runner) asProgram(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if err := r.acct.do(func() error { h(w, req); return nil }); err != nil {
			writeError(w, err)
		}
	}
}

func (r *Runner) handleStart(w http.ResponseWriter, req *http.Request) {
	var spec sandbox.ProcessSpec
	if err := json.NewDecoder(req.Body).Decode(&spec); err != nil {
		writeError(w, fmt.Errorf("%w: %v", sandbox.ErrInvalidSpec, err))
		return
	}
	st, err := r.start(spec)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, st)
}

func (r *Runner) handleStdin(w http.ResponseWriter, req *http.Request, p *process) {
	data, err := io.ReadAll(req.Body)
	if err != nil {
		writeError(w, fmt.Errorf("read stdin body: %w", err))
		return
	}
	res, err := p.write(req.URL.Query().Get("write_id"), data)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, res)
}

func (r *Runner) handleSignal(w http.ResponseWriter, req *http.Request, p *process) {
	var body runnerapi.SignalRequest
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeError(w, fmt.Errorf("%w: %v", sandbox.ErrInvalidSpec, err))
		return
	}
	sig, err := parseSignal(body.Signal)
	if err == nil {
		err = p.signal(sig, body.Group)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, struct{}{})
}

func (r *Runner) handleOutput(w http.ResponseWriter, req *http.Request, p *process) {
	q := req.URL.Query()
	after, err := strconv.ParseInt(q.Get("after"), 10, 64)
	if err != nil && q.Get("after") != "" {
		writeError(w, fmt.Errorf("%w: after %q", sandbox.ErrInvalidSpec, q.Get("after")))
		return
	}
	if err := p.journal.readable(after); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-astrabox-journal")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		_ = bw.Flush()
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush() // the client sees the stream open before the first line
	err = p.journal.stream(req.Context(), after, q.Get("follow") == "1", bw, flush)
	if err != nil && !errors.Is(err, context.Canceled) {
		r.logger.Printf("output of %s: %v", p.spec.ID, err)
	}
}

func (r *Runner) handleExec(w http.ResponseWriter, req *http.Request) {
	var body sandbox.ExecRequest
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeError(w, fmt.Errorf("%w: %v", sandbox.ErrInvalidSpec, err))
		return
	}
	if body.Dir == "" {
		body.Dir = r.cfg.Workspace
	}
	res, err := execute(req.Context(), body, envList(r.cfg.Env, body.Env), r.acct)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, res)
}

// handleReadFile sends a file, from the byte offset asked for (0 by default): a
// caller following an append-only file reads only what it gained. The file's size
// when opened comes in a header, so a caller can tell a file that shrank below its
// offset (replaced) from one that has nothing new.
func handleReadFile(w http.ResponseWriter, req *http.Request) {
	offset, err := fileOffset(req.URL.Query().Get("offset"))
	if err != nil {
		writeError(w, err)
		return
	}
	f, err := os.Open(req.URL.Query().Get("path"))
	if err != nil {
		writeError(w, fmt.Errorf("open: %w", err))
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		writeError(w, fmt.Errorf("stat: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(runnerapi.FileSizeHeader, strconv.FormatInt(info.Size(), 10))
	if offset >= info.Size() {
		return
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		writeError(w, fmt.Errorf("seek: %w", err))
		return
	}
	_, _ = io.Copy(w, f)
}

func fileOffset(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: offset %q is not a byte count", sandbox.ErrInvalidSpec, v)
	}
	return n, nil
}

func handleWriteFile(w http.ResponseWriter, req *http.Request) {
	path := req.URL.Query().Get("path")
	mode, err := strconv.ParseUint(req.URL.Query().Get("mode"), 8, 32)
	if err != nil || !filepath.IsAbs(path) {
		writeError(w, fmt.Errorf("%w: path %q mode %q", sandbox.ErrInvalidSpec, path, req.URL.Query().Get("mode")))
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		writeError(w, fmt.Errorf("create parents: %w", err))
		return
	}
	// Write beside the target and rename, so readers never see half a file.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".astrabox-write-*")
	if err != nil {
		writeError(w, fmt.Errorf("create: %w", err))
		return
	}
	_, err = io.Copy(tmp, req.Body)
	if err == nil {
		err = tmp.Chmod(os.FileMode(mode))
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		writeError(w, fmt.Errorf("write %s: %w", path, err))
		return
	}
	writeJSON(w, struct{}{})
}

func handleListDir(w http.ResponseWriter, req *http.Request) {
	dir := req.URL.Query().Get("path")
	entries, err := os.ReadDir(dir)
	if err != nil {
		writeError(w, fmt.Errorf("list: %w", err))
		return
	}
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		kind := "other"
		switch {
		case info.Mode().IsRegular():
			kind = "file"
		case info.IsDir():
			kind = "directory"
		case info.Mode()&os.ModeSymlink != 0:
			kind = "symlink"
		}
		out = append(out, sandbox.FileInfo{Path: filepath.Join(dir, e.Name()), Type: kind, Size: info.Size(),
			Mode: uint32(info.Mode().Perm()), ModifiedAt: info.ModTime().UTC().Truncate(time.Millisecond)})
	}
	writeJSON(w, out)
}
