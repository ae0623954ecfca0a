// Package osbfake is an in-process OpenSandbox lifecycle server for tests: it
// serves the lifecycle API of the copied OpenAPI document (specs/, verbatim
// from alibaba/OpenSandbox) and validates every request it receives and every
// response it sends against that document with kin-openapi, error bodies
// included; a mismatch is recorded (Violations) and fails the test that owns
// the fake. Sandboxes are backed by a Runtime: HostRunner runs each sandbox's
// entry point, the real astrabox-runner, as a host process, so process and
// file operations through the box are real. Faults are injected by the test:
// boxes that stay Pending, answers 429 or 503, a key refused, a box deleted
// behind the platform's back, a default time-to-live.
package osbfake

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

//go:embed specs/sandbox-lifecycle.yml
var specs embed.FS

// APIKeyHeader is the lifecycle API's key header.
const APIKeyHeader = "OPEN-SANDBOX-API-KEY"

// CreateRequest is the part of CreateSandboxRequest a Runtime needs.
type CreateRequest struct {
	Image struct {
		URI string `json:"uri"`
	} `json:"image"`
	Entrypoint []string          `json:"entrypoint"`
	Env        map[string]string `json:"env"`
	Metadata   map[string]string `json:"metadata"`
	Timeout    *int              `json:"timeout"`
}

// Runtime runs sandboxes, as Docker or Kubernetes does behind a real server.
type Runtime interface {
	Start(id string, req CreateRequest) (Box, error)
}

// Box is one running sandbox.
type Box interface {
	// Endpoint is the address (host:port, no scheme) of a port of the box.
	Endpoint(port int) (string, bool)
	Pause() error
	Resume() error
	// Stop ends every process of the box and removes what it owned.
	Stop() error
	// Exited is closed when the entry point exits; ExitCode is then its code.
	Exited() <-chan struct{}
	ExitCode() int
}

// Fake is the server. Its fields configure faults and may be changed while it
// serves, under Lock.
type Fake struct {
	URL    string // base URL with /v1
	APIKey string

	srv    *httptest.Server
	doc    *openapi3.T
	router routers.Router
	rt     Runtime

	stopping sync.WaitGroup // boxes being stopped in the background
	done     chan struct{}

	mu         sync.Mutex
	closed     bool
	boxes      map[string]*fakeBox
	violations []string
	faults     []fault
	calls      map[string]int
	// PendingFor keeps new boxes Pending this long before starting them
	// (forever when negative): the create-timeout fault.
	pendingFor time.Duration
	// defaultTTL expires boxes created without a timeout, as servers with a
	// default time-to-live do.
	defaultTTL time.Duration
}

type fakeBox struct {
	id         string
	req        CreateRequest
	state      string
	reason     string
	message    string
	createdAt  time.Time
	transition time.Time
	expiresAt  *time.Time
	box        Box
	startAt    time.Time
}

// Operations, as the document names them: method and path template.
const (
	CreateSandbox   = "POST /sandboxes"
	ListSandboxes   = "GET /sandboxes"
	GetSandbox      = "GET /sandboxes/{sandboxId}"
	DeleteSandbox   = "DELETE /sandboxes/{sandboxId}"
	PauseSandbox    = "POST /sandboxes/{sandboxId}/pause"
	ResumeSandbox   = "POST /sandboxes/{sandboxId}/resume"
	RenewExpiration = "POST /sandboxes/{sandboxId}/renew-expiration"
	GetEndpoint     = "GET /sandboxes/{sandboxId}/endpoints/{port}"
)

type fault struct {
	operation  string // an operation above, or "" for any
	status     int
	retryAfter int
	times      int
}

// New starts a fake server with key as its API key.
func New(rt Runtime, key string) (*Fake, error) {
	raw, err := specs.ReadFile("specs/sandbox-lifecycle.yml")
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("load lifecycle spec: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("lifecycle spec: %w", err)
	}
	f := &Fake{APIKey: key, doc: doc, rt: rt, boxes: map[string]*fakeBox{}, calls: map[string]int{}, done: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL + "/v1"
	doc.Servers = openapi3.Servers{{URL: f.URL}}
	if f.router, err = gorillamux.NewRouter(doc); err != nil {
		f.srv.Close()
		return nil, fmt.Errorf("route lifecycle spec: %w", err)
	}
	go f.tick()
	return f, nil
}

// Close stops the server and every box still running.
func (f *Fake) Close() {
	f.srv.Close()
	close(f.done)
	f.mu.Lock()
	f.closed = true
	boxes := f.boxes
	f.boxes = map[string]*fakeBox{}
	f.mu.Unlock()
	for _, s := range boxes {
		if s.box != nil {
			_ = s.box.Stop()
		}
	}
	f.stopping.Wait()
}

// Violations lists every request or response that did not match the document.
func (f *Fake) Violations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.violations...)
}

// Calls reports how many requests an operation (operation) received.
func (f *Fake) Calls(operation string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[operation]
}

// FailNext answers the next times requests of operation ("" for any) with
// status and an ErrorResponse, with Retry-After when retryAfter is positive.
func (f *Fake) FailNext(operation string, status, times, retryAfter int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fault{operation: operation, status: status, times: times, retryAfter: retryAfter})
}

// KeepPending keeps boxes created from now on Pending for d (forever if d < 0).
func (f *Fake) KeepPending(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pendingFor = d
}

// SetDefaultTTL expires boxes created without a timeout after d (0: never).
func (f *Fake) SetDefaultTTL(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.defaultTTL = d
}

// Vanish removes a box at once, as an operator's delete or a lost node does:
// its processes end and the server no longer knows it.
func (f *Fake) Vanish(id string) bool {
	f.mu.Lock()
	s, ok := f.boxes[id]
	delete(f.boxes, id)
	f.mu.Unlock()
	if ok && s.box != nil {
		_ = s.box.Stop()
	}
	return ok
}

// Count reports how many boxes the server holds.
func (f *Fake) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.boxes)
}

// tick moves boxes through their states: Pending boxes start, expired ones
// and those whose entry point exited end.
func (f *Fake) tick() {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-t.C:
			f.step()
		}
	}
}

func (f *Fake) step() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.stopping.Add(1)
	defer f.stopping.Done()
	var starts, stops []*fakeBox
	now := time.Now()
	for _, s := range f.boxes {
		switch {
		case s.state == "Pending" && !s.startAt.IsZero() && now.After(s.startAt):
			s.startAt = time.Time{}
			starts = append(starts, s)
		case (s.state == "Running" || s.state == "Paused") && s.expiresAt != nil && now.After(*s.expiresAt):
			s.setState("Terminated", "SANDBOX_EXPIRED", "the sandbox expired")
			stops = append(stops, s)
		case s.state == "Running" && s.box != nil:
			select {
			case <-s.box.Exited():
				code := s.box.ExitCode()
				if code == 0 {
					s.setState("Terminated", "CONTAINER_EXITED", "container exited with code 0")
				} else {
					s.setState("Failed", "CONTAINER_EXITED_ERROR", fmt.Sprintf("container exited with code %d", code))
				}
				stops = append(stops, s)
			default:
			}
		}
	}
	f.mu.Unlock()
	for _, s := range starts {
		box, err := f.rt.Start(s.id, s.req)
		f.mu.Lock()
		if err != nil {
			s.setState("Failed", "START_FAILED", err.Error())
		} else if f.boxes[s.id] != s {
			_ = box.Stop() // deleted while starting
		} else {
			s.box = box
			s.setState("Running", "", "")
		}
		f.mu.Unlock()
	}
	for _, s := range stops {
		if s.box != nil {
			_ = s.box.Stop()
		}
	}
}

func (s *fakeBox) setState(state, reason, message string) {
	s.state, s.reason, s.message, s.transition = state, reason, message, time.Now().UTC()
}

// serve validates the request, dispatches it, validates the response and
// sends it.
func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-ID", newUUID())
	route, params, err := f.router.FindRoute(r)
	if err != nil {
		f.violate("%s %s: no such operation in the document: %v", r.Method, r.URL.Path, err)
		writeError(rec, http.StatusNotFound, "NOT_FOUND", "no such route")
		f.send(w, rec, nil, nil)
		return
	}
	op := route.Method + " " + route.Path
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: func(context.Context, *openapi3filter.AuthenticationInput) error { return nil },
			SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020(), openapi3.EnableFormatValidation()}}}
	f.mu.Lock()
	f.calls[op]++
	f.mu.Unlock()
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		f.violate("%s %s: request does not match the document: %v", r.Method, r.URL.Path, err)
		writeError(rec, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		f.send(w, rec, in, nil)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch {
	case r.Header.Get(APIKeyHeader) != f.APIKey:
		writeError(rec, http.StatusUnauthorized, "UNAUTHORIZED", "missing or invalid API key")
	case f.injected(rec, op):
	default:
		f.dispatch(rec, r, op, params, body)
	}
	f.send(w, rec, in, body)
}

// injected answers with a queued fault, if one applies.
func (f *Fake) injected(w *httptest.ResponseRecorder, op string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.faults {
		ft := &f.faults[i]
		if ft.times > 0 && (ft.operation == "" || ft.operation == op) {
			ft.times--
			if ft.retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(ft.retryAfter))
			}
			writeError(w, ft.status, http.StatusText(ft.status), "injected fault")
			return true
		}
	}
	return false
}

// send validates the recorded response and writes it. A status the document
// does not list for the operation (429 or 503 from a gateway in front of the
// server) must still carry the document's ErrorResponse.
func (f *Fake) send(w http.ResponseWriter, rec *httptest.ResponseRecorder, in *openapi3filter.RequestValidationInput, _ []byte) {
	res := rec.Result()
	raw := rec.Body.Bytes()
	if in != nil {
		documented := in.Route.Operation.Responses.Status(res.StatusCode) != nil
		if documented {
			out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
				Body: io.NopCloser(bytes.NewReader(raw)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true,
					SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020(), openapi3.EnableFormatValidation()}}}
			if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
				f.violate("%s %s -> %d: response does not match the document: %v", in.Request.Method, in.Request.URL.Path, res.StatusCode, err)
			}
		} else if res.StatusCode < 300 {
			f.violate("%s %s -> %d: status not in the document", in.Request.Method, in.Request.URL.Path, res.StatusCode)
		} else if err := f.checkErrorBody(raw); err != nil {
			f.violate("%s %s -> %d: error body is not an ErrorResponse: %v", in.Request.Method, in.Request.URL.Path, res.StatusCode, err)
		}
	}
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(raw)
}

func (f *Fake) checkErrorBody(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return f.doc.Components.Schemas["ErrorResponse"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
}

func (f *Fake) violate(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.violations = append(f.violations, fmt.Sprintf(format, args...))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]string{"code": code, "message": message})
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// view is a Sandbox as the API shows it.
func (s *fakeBox) view() map[string]any {
	status := map[string]any{"state": s.state, "lastTransitionAt": s.transition.Format(time.RFC3339Nano)}
	if s.reason != "" {
		status["reason"] = s.reason
	}
	if s.message != "" {
		status["message"] = s.message
	}
	v := map[string]any{"id": s.id, "status": status, "createdAt": s.createdAt.Format(time.RFC3339Nano),
		"entrypoint": s.req.Entrypoint, "image": map[string]string{"uri": s.req.Image.URI}}
	if len(s.req.Metadata) > 0 {
		v["metadata"] = s.req.Metadata
	}
	if s.expiresAt != nil {
		v["expiresAt"] = s.expiresAt.Format(time.RFC3339Nano)
	}
	return v
}

func (f *Fake) dispatch(w http.ResponseWriter, r *http.Request, op string, params map[string]string, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := params["sandboxId"]
	s := f.boxes[id]
	if id != "" && s == nil {
		writeError(w, http.StatusNotFound, "SANDBOX_NOT_FOUND", fmt.Sprintf("sandbox %s not found", id))
		return
	}
	switch op {
	case CreateSandbox:
		var req CreateRequest
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
			return
		}
		now := time.Now().UTC()
		s := &fakeBox{id: newUUID(), req: req, createdAt: now}
		s.setState("Pending", "", "")
		if f.pendingFor >= 0 {
			s.startAt = now.Add(f.pendingFor)
		}
		switch {
		case req.Timeout != nil:
			at := now.Add(time.Duration(*req.Timeout) * time.Second)
			s.expiresAt = &at
		case f.defaultTTL > 0:
			at := now.Add(f.defaultTTL)
			s.expiresAt = &at
		}
		f.boxes[s.id] = s
		v := s.view()
		delete(v, "image")
		w.Header().Set("Location", f.URL+"/sandboxes/"+s.id)
		writeJSON(w, http.StatusAccepted, v)
	case GetSandbox:
		writeJSON(w, http.StatusOK, s.view())
	case ListSandboxes:
		f.list(w, r)
	case DeleteSandbox:
		delete(f.boxes, id)
		if s.box != nil {
			f.stopping.Add(1)
			go func() {
				defer f.stopping.Done()
				_ = s.box.Stop()
			}()
		}
		w.WriteHeader(http.StatusNoContent)
	case PauseSandbox:
		if s.state != "Running" || s.box == nil {
			writeError(w, http.StatusConflict, "INVALID_STATE", "sandbox is "+s.state)
			return
		}
		if err := s.box.Pause(); err != nil {
			writeError(w, http.StatusInternalServerError, "PAUSE_FAILED", err.Error())
			return
		}
		s.setState("Paused", "", "")
		w.WriteHeader(http.StatusAccepted)
	case ResumeSandbox:
		if s.state != "Paused" {
			writeError(w, http.StatusConflict, "INVALID_STATE", "sandbox is "+s.state)
			return
		}
		if err := s.box.Resume(); err != nil {
			writeError(w, http.StatusInternalServerError, "RESUME_FAILED", err.Error())
			return
		}
		s.setState("Running", "", "")
		w.WriteHeader(http.StatusAccepted)
	case RenewExpiration:
		var req struct {
			ExpiresAt time.Time `json:"expiresAt"`
		}
		_ = json.Unmarshal(body, &req)
		if s.state == "Terminated" || s.state == "Failed" {
			writeError(w, http.StatusConflict, "INVALID_STATE", "sandbox is "+s.state)
			return
		}
		if !req.ExpiresAt.After(time.Now()) || (s.expiresAt != nil && !req.ExpiresAt.After(*s.expiresAt)) {
			writeError(w, http.StatusBadRequest, "INVALID_EXPIRATION", "expiresAt must be in the future and later than the current one")
			return
		}
		at := req.ExpiresAt.UTC()
		s.expiresAt = &at
		writeJSON(w, http.StatusOK, map[string]string{"expiresAt": at.Format(time.RFC3339Nano)})
	case GetEndpoint:
		port, _ := strconv.Atoi(params["port"])
		if s.box == nil || s.state != "Running" && s.state != "Paused" {
			writeError(w, http.StatusNotFound, "SANDBOX_NOT_RUNNING", "sandbox is "+s.state)
			return
		}
		addr, ok := s.box.Endpoint(port)
		if !ok {
			writeError(w, http.StatusNotFound, "PORT_NOT_EXPOSED", fmt.Sprintf("port %d is not exposed", port))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"endpoint": addr})
	default:
		writeError(w, http.StatusNotImplemented, "NOT_IMPLEMENTED", op+" is not served by the fake")
	}
}

func (f *Fake) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_METADATA", err.Error())
		return
	}
	page, size := 1, 20
	if v, err := strconv.Atoi(q.Get("page")); err == nil {
		page = v
	}
	if v, err := strconv.Atoi(q.Get("pageSize")); err == nil {
		size = v
	}
	states := q["state"]
	var match []*fakeBox
	for _, s := range f.boxes {
		ok := len(states) == 0
		for _, st := range states {
			ok = ok || st == s.state
		}
		for k := range want {
			ok = ok && s.req.Metadata[k] == want.Get(k)
		}
		if ok {
			match = append(match, s)
		}
	}
	sort.Slice(match, func(i, j int) bool { return match[i].createdAt.Before(match[j].createdAt) })
	items := []map[string]any{}
	for i := (page - 1) * size; i < len(match) && i < page*size; i++ {
		items = append(items, match[i].view())
	}
	pages := (len(match) + size - 1) / size
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "pagination": map[string]any{
		"page": page, "pageSize": size, "totalItems": len(match), "totalPages": pages, "hasNextPage": page < pages}})
}
