package devmodel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
)

// errDropConnection is what a format's writeReply returns when the script asks for
// the connection to be dropped mid-reply; the handler then aborts the connection.
var errDropConnection = errors.New("scripted connection drop")

// maxBodyBytes bounds a request body; Claude Code's requests carry its whole
// system prompt and tool schemas, well under this.
const maxBodyBytes = 64 << 20

// wireFormat is one model API: how its requests are parsed and its replies and
// errors written.
type wireFormat interface {
	// api names the format in the request log.
	api() string
	// authorized reports whether r carries the credential header this API uses.
	// Any non-empty key is accepted: programs are given placeholders.
	authorized(r *http.Request) bool
	parse(body []byte) (*conversation, error)
	writeError(w http.ResponseWriter, status int, message string, retryAfter time.Duration)
	// writeReply sends p; it returns an error when the client went away.
	writeReply(ctx context.Context, w http.ResponseWriter, conv *conversation, p plan, inputTokens int) error
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	anthropic := anthropicFormat{}
	responses := responsesFormat{}
	chat := chatFormat{}
	for _, prefix := range []string{"/v1", ""} {
		mux.HandleFunc("POST "+prefix+"/messages", func(w http.ResponseWriter, r *http.Request) { s.serveModel(w, r, anthropic) })
		mux.HandleFunc("POST "+prefix+"/messages/count_tokens", s.serveCountTokens)
		mux.HandleFunc("POST "+prefix+"/responses", func(w http.ResponseWriter, r *http.Request) { s.serveModel(w, r, responses) })
		mux.HandleFunc("POST "+prefix+"/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.serveModel(w, r, chat) })
		mux.HandleFunc("GET "+prefix+"/models", s.serveModels)
	}
	mux.HandleFunc("POST /v1beta/models/{call}", s.serveGemini)
	mux.HandleFunc("/", s.serveOther)
	return mux
}

// serveModel is the flow every model request follows: check the key, parse,
// let the script decide, log, answer.
func (s *Server) serveModel(w http.ResponseWriter, r *http.Request, f wireFormat) {
	start := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		f.writeError(w, http.StatusBadRequest, fmt.Sprintf("read body: %v", err), 0)
		return
	}
	rec := Request{
		Received: start, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		API: f.api(), Header: redactedHeader(r.Header), Body: json.RawMessage(body), Outcome: OutcomeActive,
	}
	if !f.authorized(r) {
		rec.Status, rec.Outcome = http.StatusUnauthorized, OutcomeFailed
		s.finish(rec, start)
		f.writeError(w, http.StatusUnauthorized, "missing API key header", 0)
		return
	}
	conv, err := f.parse(body)
	if err != nil {
		rec.Status, rec.Outcome = http.StatusBadRequest, OutcomeFailed
		s.finish(rec, start)
		f.writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	p := s.scripter.decide(conv)
	rec.Model, rec.Stream, rec.Tools = conv.model, conv.stream, conv.tools
	rec.Prompt, rec.Script, rec.Step = conv.currentTurn().prompt, p.script, p.step
	for _, b := range p.blocks {
		switch b.kind {
		case blockText:
			rec.Reply += b.text()
		case blockToolCall:
			rec.ToolCall = b.call.name
		}
	}
	if p.err == nil && p.streamErr != nil && !conv.stream {
		p.err = p.streamErr
	}
	if p.err != nil {
		rec.Status, rec.Outcome = p.err.status, OutcomeFailed
		s.finish(rec, start)
		f.writeError(w, p.err.status, p.err.message, p.err.retryAfter)
		return
	}
	rec.Status = http.StatusOK
	seq := s.requests.add(rec)
	rec.Seq = seq
	werr := f.writeReply(r.Context(), w, conv, p, estimateTokens(body))
	rec.Outcome, rec.Duration = OutcomeCompleted, time.Since(start)
	switch {
	case werr != nil:
		rec.Outcome = OutcomeCancelled
	case p.streamErr != nil:
		rec.Outcome = OutcomeFailed
	}
	dropped := errors.Is(werr, errDropConnection)
	if dropped {
		rec.Outcome = OutcomeFailed
	}
	s.requests.update(seq, func(e *Request) { e.Outcome, e.Duration = rec.Outcome, rec.Duration })
	s.logRequest(rec, werr)
	if dropped {
		// The server closes the connection without ending the response: the
		// program reads a stream cut off mid-reply, with no error event.
		panic(http.ErrAbortHandler)
	}
}

// finish logs a request that is answered at once (errors).
func (s *Server) finish(rec Request, start time.Time) {
	rec.Duration = time.Since(start)
	rec.Seq = s.requests.add(rec)
	s.logRequest(rec, nil)
}

func (s *Server) logRequest(rec Request, err error) {
	fields := []zap.Field{
		zap.Int("seq", rec.Seq), zap.String("api", rec.API), zap.String("path", rec.Path), zap.String("model", rec.Model),
		zap.Bool("stream", rec.Stream), zap.String("script", rec.Script), zap.Int("step", rec.Step),
		zap.Int("status", rec.Status), zap.String("outcome", rec.Outcome), zap.Duration("duration", rec.Duration),
		zap.String("prompt", firstLine(rec.Prompt)), zap.Int("tools", len(rec.Tools)),
		zap.String("user_agent", rec.Header.Get("User-Agent")), zap.Int("body_bytes", len(rec.Body)),
	}
	if rec.ToolCall != "" {
		fields = append(fields, zap.String("tool_call", rec.ToolCall))
	}
	if err != nil {
		fields = append(fields, zap.NamedError("stream_error", err))
	}
	s.log.Info("model request", fields...)
	// The whole body only at debug level: Claude Code's are over 100 KB.
	s.log.Debug("model request body", zap.Int("seq", rec.Seq), zap.ByteString("body", rec.Body))
}

// serveCountTokens answers Anthropic's token counting with an estimate.
func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	rec := Request{Received: start, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		API: APIAnthropicCountTokens, Header: redactedHeader(r.Header), Body: json.RawMessage(body)}
	f := anthropicFormat{}
	switch {
	case err != nil:
		rec.Status, rec.Outcome = http.StatusBadRequest, OutcomeFailed
		f.writeError(w, http.StatusBadRequest, fmt.Sprintf("read body: %v", err), 0)
	case !f.authorized(r):
		rec.Status, rec.Outcome = http.StatusUnauthorized, OutcomeFailed
		f.writeError(w, http.StatusUnauthorized, "missing API key header", 0)
	default:
		if conv, perr := f.parse(body); perr != nil {
			rec.Status, rec.Outcome = http.StatusBadRequest, OutcomeFailed
			f.writeError(w, http.StatusBadRequest, perr.Error(), 0)
		} else {
			rec.Model, rec.Status, rec.Outcome = conv.model, http.StatusOK, OutcomeCompleted
			writeJSON(w, http.StatusOK, map[string]int{"input_tokens": estimateTokens(body)})
		}
	}
	s.finish(rec, start)
}

// serveModels lists one model for clients that look before they ask.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	s.finish(Request{Received: time.Now(), Method: r.Method, Path: r.URL.Path, API: APIModels,
		Header: redactedHeader(r.Header), Status: http.StatusOK, Outcome: OutcomeCompleted}, time.Now())
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": "devmodel", "object": "model", "type": "model", "created": 0, "created_at": "1970-01-01T00:00:00Z",
			"owned_by": "astrabox", "display_name": "AstraBox scripted model",
		}},
		"has_more": false, "first_id": "devmodel", "last_id": "devmodel",
	})
}

// serveOther answers anything else: HEAD and GET succeed empty (Claude Code's
// reachability probe), other methods get 404, and all are logged.
func (s *Server) serveOther(w http.ResponseWriter, r *http.Request) {
	status := http.StatusNotFound
	if r.Method == http.MethodHead || r.Method == http.MethodGet {
		status = http.StatusOK
	}
	s.finish(Request{Received: time.Now(), Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, API: APIOther,
		Header: redactedHeader(r.Header), Status: status, Outcome: OutcomeCompleted}, time.Now())
	if status == http.StatusOK {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"type": "not_found_error", "message": "no such endpoint: " + r.URL.Path}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An encoding error here means the client went away; nothing is left to do.
	_ = json.NewEncoder(w).Encode(v)
}

// setRetryAfter sets both the standard header and the millisecond variant the
// Anthropic and OpenAI clients prefer.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	if d <= 0 {
		return
	}
	w.Header().Set("retry-after-ms", fmt.Sprint(d.Milliseconds()))
	w.Header().Set("retry-after", fmt.Sprint(int((d+time.Second-1)/time.Second)))
}

// estimateTokens is a stand-in token count: about four bytes a token.
func estimateTokens(body []byte) int { return len(body)/4 + 1 }

// newID returns prefix followed by 24 random hex digits, the shape of the real
// APIs' ids (msg_…, toolu_…, call_…); ids must stay unique across server restarts
// because programs keep them in their transcripts.
func newID(prefix string) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("read random bytes: %v", err))
	}
	return prefix + hex.EncodeToString(b)
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}
