package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The lifecycle API's shapes (sandbox-lifecycle.yml), only the fields AstraBox
// sends or reads.

// createRequest is CreateSandboxRequest.
type createRequest struct {
	Image          imageSpec         `json:"image"`
	Entrypoint     []string          `json:"entrypoint"`
	Timeout        *int              `json:"timeout,omitempty"`
	ResourceLimits map[string]string `json:"resourceLimits"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	NetworkPolicy  *networkPolicy    `json:"networkPolicy,omitempty"`
	Volumes        []volume          `json:"volumes,omitempty"`
}

type imageSpec struct {
	URI string `json:"uri"`
}

// networkPolicy is the egress policy; AstraBox sends deny-all for boxes without
// network, which OpenSandbox enforces with its egress sidecar.
type networkPolicy struct {
	DefaultAction string `json:"defaultAction"`
	Egress        []any  `json:"egress"`
}

type volume struct {
	Name      string     `json:"name"`
	MountPath string     `json:"mountPath"`
	PVC       *pvcVolume `json:"pvc"`
}

type pvcVolume struct {
	ClaimName string `json:"claimName"`
}

// sandboxStatus is SandboxStatus.
type sandboxStatus struct {
	State            string     `json:"state"`
	Reason           string     `json:"reason,omitempty"`
	Message          string     `json:"message,omitempty"`
	LastTransitionAt *time.Time `json:"lastTransitionAt,omitempty"`
}

// sandboxInfo is Sandbox (and CreateSandboxResponse, a subset).
type sandboxInfo struct {
	ID         string            `json:"id"`
	Status     sandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	Entrypoint []string          `json:"entrypoint"`
}

type listResponse struct {
	Items      []sandboxInfo `json:"items"`
	Pagination struct {
		Page        int  `json:"page"`
		HasNextPage bool `json:"hasNextPage"`
	} `json:"pagination"`
}

type renewRequest struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// endpoint is Endpoint: an address without scheme, and headers a gateway wants.
type endpoint struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// errorResponse is ErrorResponse, the body of every error answer.
type errorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// APIError is an error answer of the lifecycle API.
type APIError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("opensandbox: %d %s: %s", e.Status, e.Code, e.Message)
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// Errors of the lifecycle API a caller checks with errors.Is.
var (
	// ErrUnauthorized: the API key was refused (401) or lacks permission (403).
	ErrUnauthorized = errors.New("opensandbox: API key refused")
	// ErrConflict: the sandbox's state forbids the operation (409).
	ErrConflict = errors.New("opensandbox: conflict with the sandbox's state")
	errNotFound = errors.New("opensandbox: not found")
)

// Is maps answers onto the package's sentinels.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrConflict:
		return e.Status == http.StatusConflict
	case errNotFound:
		return e.Status == http.StatusNotFound
	}
	return false
}

// lifecycle is a client of the lifecycle API with retries: an answer 429 or 5xx,
// or a failed connection, is tried again with exponential backoff and jitter
// (honouring Retry-After) until the attempts or ctx run out. Every request is
// idempotent on the server's side except create, whose retry after a lost
// answer may leave a box behind: those carry AstraBox's labels and are reaped.
type lifecycle struct {
	base       string
	apiKey     string
	hc         *http.Client
	attempts   int
	backoff    time.Duration
	maxBackoff time.Duration
	timeout    time.Duration
}

// APIKeyHeader carries the API key (securityScheme apiKeyAuth).
const APIKeyHeader = "OPEN-SANDBOX-API-KEY"

func (l *lifecycle) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	delay := l.backoff
	for attempt := 1; ; attempt++ {
		retryAfter, err := l.once(ctx, method, path, query, body, out)
		if err == nil {
			return nil
		}
		var apiErr *APIError
		retryable := !errors.As(err, &apiErr) || apiErr.Status == http.StatusTooManyRequests || apiErr.Status >= 500
		if !retryable || attempt >= l.attempts || ctx.Err() != nil {
			return err
		}
		wait := delay/2 + rand.N(delay/2+1)
		if retryAfter > wait {
			wait = retryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		delay = min(delay*2, l.maxBackoff)
	}
}

// once sends one request; it returns the server's Retry-After with an error.
func (l *lifecycle) once(ctx context.Context, method, path string, query url.Values, body []byte, out any) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	u := l.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(APIKeyHeader, l.apiKey)
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("opensandbox %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, fmt.Errorf("opensandbox %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-ID")}
		var er errorResponse
		if json.Unmarshal(raw, &er) == nil && er.Code != "" {
			e.Code, e.Message = er.Code, er.Message
		} else {
			e.Code, e.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(raw))
		}
		var wait time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		return wait, fmt.Errorf("%s %s: %w", method, path, e)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return 0, fmt.Errorf("opensandbox %s %s: decode answer: %w", method, path, err)
		}
	}
	return 0, nil
}

func sandboxPath(id string, rest ...string) string {
	p := "/sandboxes/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func (l *lifecycle) create(ctx context.Context, req createRequest) (sandboxInfo, error) {
	var out sandboxInfo
	return out, l.do(ctx, http.MethodPost, "/sandboxes", nil, req, &out)
}

func (l *lifecycle) get(ctx context.Context, id string) (sandboxInfo, error) {
	var out sandboxInfo
	return out, l.do(ctx, http.MethodGet, sandboxPath(id), nil, nil, &out)
}

func (l *lifecycle) delete(ctx context.Context, id string) error {
	return l.do(ctx, http.MethodDelete, sandboxPath(id), nil, nil, nil)
}

func (l *lifecycle) pause(ctx context.Context, id string) error {
	return l.do(ctx, http.MethodPost, sandboxPath(id, "pause"), nil, nil, nil)
}

func (l *lifecycle) resume(ctx context.Context, id string) error {
	return l.do(ctx, http.MethodPost, sandboxPath(id, "resume"), nil, nil, nil)
}

func (l *lifecycle) renew(ctx context.Context, id string, until time.Time) (time.Time, error) {
	var out renewRequest
	err := l.do(ctx, http.MethodPost, sandboxPath(id, "renew-expiration"), nil, renewRequest{ExpiresAt: until.UTC()}, &out)
	return out.ExpiresAt, err
}

func (l *lifecycle) endpoint(ctx context.Context, id string, port int, serverProxy bool) (endpoint, error) {
	var out endpoint
	q := url.Values{}
	if serverProxy {
		q.Set("use_server_proxy", "true")
	}
	return out, l.do(ctx, http.MethodGet, sandboxPath(id, "endpoints", strconv.Itoa(port)), q, nil, &out)
}

// list returns every sandbox whose metadata holds all of labels, page by page.
func (l *lifecycle) list(ctx context.Context, labels map[string]string) ([]sandboxInfo, error) {
	filter := url.Values{}
	for k, v := range labels {
		filter.Set(k, v)
	}
	var all []sandboxInfo
	for page := 1; ; page++ {
		q := url.Values{"metadata": {filter.Encode()}, "page": {strconv.Itoa(page)}, "pageSize": {"100"}}
		var out listResponse
		if err := l.do(ctx, http.MethodGet, "/sandboxes", q, nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Items...)
		if !out.Pagination.HasNextPage || len(out.Items) == 0 {
			return all, nil
		}
	}
}
