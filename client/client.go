// Package client is a Go client of AstraBox's public API (/api/v1): typed requests
// and answers, the envelope's errors as *Error values that errors.Is matches by code,
// and a Session's SSE stream as an iterator that resumes from the last seq it saw.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to one AstraBox deployment with one API token. It is safe for
// concurrent use.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
	// retries bounds how many times in a row a stream reconnects without progress.
	retries int
	// backoff is the first wait before a stream reconnects; it doubles up to maxBackoff.
	backoff    time.Duration
	maxBackoff time.Duration
}

// Option adjusts a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc instead of a client without timeouts (a
// stream stays open as long as a response runs, so the default sets none).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithStreamRetries sets how many times in a row a stream reconnects without
// receiving a part before it gives up (default 5), and the first wait between tries
// (default 200 ms, doubling up to 5 s).
func WithStreamRetries(n int, backoff time.Duration) Option {
	return func(c *Client) { c.retries, c.backoff = n, backoff }
}

// New returns a client of the deployment at serviceURL (SERVICE_URL, such as
// http://127.0.0.1:8080) authenticating with token (ACCESS_TOKEN); an empty token
// sends no Authorization header, which is all a share link's routes need.
func New(serviceURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(serviceURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("service url %q: must be an http or https URL", serviceURL)
	}
	c := &Client{baseURL: u.String() + "/api/v1", token: token, http: &http.Client{}, retries: 5,
		backoff: 200 * time.Millisecond, maxBackoff: 5 * time.Second}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Error is an error envelope {code, message, data} with its HTTP status. errors.Is
// matches it against the Err* values by code, so callers switch on the product's codes:
// errors.Is(err, client.ErrSessionBusy).
type Error struct {
	Status  int
	Code    string
	Message string
	// Data is the envelope's data, such as {input_ids} of PENDING_INPUTS_NOT_CANCELLED.
	Data json.RawMessage
	// RequestID is the server's X-Request-ID, to find the request in its logs.
	RequestID string
}

func (e *Error) Error() string {
	return fmt.Sprintf("astrabox: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is reports whether target is an *Error of the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// The product's error codes, for errors.Is.
var (
	ErrInvalidRequest            = &Error{Code: "INVALID_REQUEST"}
	ErrUnauthorized              = &Error{Code: "UNAUTHORIZED"}
	ErrForbidden                 = &Error{Code: "FORBIDDEN"}
	ErrNotFound                  = &Error{Code: "NOT_FOUND"}
	ErrConflict                  = &Error{Code: "CONFLICT"}
	ErrAgentRuntime              = &Error{Code: "AGENT_RUNTIME_ERROR"}
	ErrSessionBusy               = &Error{Code: "SESSION_BUSY"}
	ErrInteractionNotOpen        = &Error{Code: "INTERACTION_NOT_OPEN"}
	ErrPendingInputsNotCancelled = &Error{Code: "PENDING_INPUTS_NOT_CANCELLED"}
	ErrAdmissionDenied           = &Error{Code: "ADMISSION_DENIED"}
	ErrTooManyStreams            = &Error{Code: "TOO_MANY_STREAMS"}
	ErrServiceUnavailable        = &Error{Code: "SERVICE_UNAVAILABLE"}
)

// envelope is the shape of every JSON answer.
type envelope struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// request builds a request of path (relative to /api/v1) with body encoded as JSON.
func (c *Client) request(ctx context.Context, method, path string, query url.Values, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s body: %w", method, path, err)
		}
		rd = bytes.NewReader(raw)
	}
	target := c.baseURL + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// do sends a request and decodes its envelope's data into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any, header ...string) error {
	req, err := c.request(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	env, err := readEnvelope(resp)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("%s %s: decode data: %w", method, path, err)
	}
	return nil
}

// readEnvelope reads a JSON answer, returning an *Error for an error envelope.
func readEnvelope(resp *http.Response) (envelope, error) {
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return envelope{}, fmt.Errorf("read answer: %w", err)
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return envelope{}, fmt.Errorf("answer %d is not an envelope: %.200q", resp.StatusCode, raw)
	}
	if resp.StatusCode != http.StatusOK || env.Code != "OK" {
		return envelope{}, &Error{Status: resp.StatusCode, Code: env.Code, Message: env.Message, Data: env.Data,
			RequestID: resp.Header.Get("X-Request-ID")}
	}
	return env, nil
}

// retryable reports whether a failed stream request may be tried again: a dropped
// connection or a passing outage, never a refusal.
func retryable(err error) bool {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr.Status == http.StatusServiceUnavailable
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

func pathEscape(s string) string { return url.PathEscape(s) }
