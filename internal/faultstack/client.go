package faultstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// retryInterval paces the client's retries while a dependency is down.
const retryInterval = 250 * time.Millisecond

// Client drives the public API as an application does. Every call is
// idempotent (inputs carry a client_message_id, creation an Idempotency-Key),
// so it retries a refused connection and a 5xx answer until its context ends:
// a fault is expected to interrupt service, not to lose what was asked. It
// records every 5xx answer so tests can check how an outage was reported.
type Client struct {
	base  string
	token string
	http  *http.Client

	mu       sync.Mutex
	outages  []OutageAnswer
	attempts int
}

// OutageAnswer is a 5xx answer the client saw and retried.
type OutageAnswer struct {
	Path       string
	Status     int
	Code       string
	RetryAfter string
}

// APIError is an answer outside 2xx that the client does not retry.
type APIError struct {
	Status  int
	Code    string
	Message string
	Data    json.RawMessage
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// NewClient returns a client of the API at base (…/api/v1) with a bearer token.
func NewClient(base, token string) *Client {
	return &Client{base: base, token: token, http: &http.Client{}}
}

// Outages returns the 5xx answers seen so far, and forgets them.
func (c *Client) Outages() []OutageAnswer {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.outages
	c.outages = nil
	return out
}

func (c *Client) noteOutage(a OutageAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outages = append(c.outages, a)
}

// envelope is every JSON answer of the API.
type envelope struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// call sends a JSON request, retrying outages, and decodes the envelope's data
// into out (when not nil).
func (c *Client) call(ctx context.Context, method, path string, body any, header http.Header, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	for {
		env, err := c.once(ctx, method, path, payload, header)
		if err == nil {
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(env.Data, out); err != nil {
				return fmt.Errorf("decode %s %s: %w: %s", method, path, err, env.Data)
			}
			return nil
		}
		if !retryable(err) {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w (last: %v)", method, path, ctx.Err(), err)
		case <-time.After(retryInterval):
		}
	}
}

// errTransport marks a request that got no HTTP answer.
var errTransport = errors.New("no answer")

func retryable(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status >= 500
	}
	return errors.Is(err, errTransport)
}

func (c *Client) once(ctx context.Context, method, path string, payload []byte, header http.Header) (envelope, error) {
	reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(reqCtx, method, c.base+path, rd)
	if err != nil {
		return envelope{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return envelope{}, fmt.Errorf("%w: %w", errTransport, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return envelope{}, fmt.Errorf("%w: read body: %w", errTransport, err)
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		if resp.StatusCode >= 500 {
			c.noteOutage(OutageAnswer{Path: path, Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")})
			return envelope{}, &APIError{Status: resp.StatusCode, Message: string(raw)}
		}
		return envelope{}, fmt.Errorf("decode answer %d: %w: %s", resp.StatusCode, err, raw)
	}
	if resp.StatusCode/100 != 2 {
		if resp.StatusCode >= 500 {
			c.noteOutage(OutageAnswer{Path: path, Status: resp.StatusCode, Code: env.Code, RetryAfter: resp.Header.Get("Retry-After")})
		}
		return envelope{}, &APIError{Status: resp.StatusCode, Code: env.Code, Message: env.Message, Data: env.Data}
	}
	return env, nil
}

// CreateSession creates a conversation with the Agent; the same key returns
// the same Session.
func (c *Client) CreateSession(ctx context.Context, agentID, idempotencyKey string) (string, error) {
	var out struct {
		SessionID string `json:"session_id"`
	}
	err := c.call(ctx, http.MethodPost, "/agents/"+agentID+"/conversations", struct{}{}, http.Header{"Idempotency-Key": {idempotencyKey}}, &out)
	return out.SessionID, err
}

// Receipt is the API's answer to an input.
type Receipt struct {
	InputID   string          `json:"input_id"`
	State     string          `json:"state"`
	Duplicate bool            `json:"duplicate"`
	Failure   json.RawMessage `json:"failure"`
	OutputSeq int64           `json:"output_seq"`
}

// Send sends a message with its client_message_id.
func (c *Client) Send(ctx context.Context, sessionID, content, clientMessageID string) (Receipt, error) {
	var out Receipt
	body := map[string]string{"content": content, "client_message_id": clientMessageID}
	err := c.call(ctx, http.MethodPost, "/sessions/"+sessionID+"/inputs", body, nil, &out)
	return out, err
}

// Response is a response as the Session's details show it.
type Response struct {
	ResponseID   string   `json:"response_id"`
	InputIDs     []string `json:"input_ids"`
	Outcome      *string  `json:"outcome"`
	NativeReason *string  `json:"native_reason"`
}

// Interaction is an open approval or question.
type Interaction struct {
	InteractionID string `json:"interaction_id"`
	State         string `json:"state"`
	AnswerSaved   bool   `json:"answer_saved"`
}

// SessionView is GET /sessions/{id}.
type SessionView struct {
	SessionID          string       `json:"session_id"`
	State              string       `json:"state"`
	RuntimeStatus      *string      `json:"runtime_status"`
	PermissionMode     *string      `json:"permission_mode"`
	CurrentResponses   []Response   `json:"current_responses"`
	LastResponse       *Response    `json:"last_response"`
	PendingInteraction *Interaction `json:"pending_interaction"`
	HeldInputs         []struct {
		InputID string `json:"input_id"`
		State   string `json:"state"`
	} `json:"held_inputs"`
	OutputSeq          int64 `json:"output_seq"`
	RuntimeUnavailable bool  `json:"runtime_unavailable"`
}

// Session reads a Session's details.
func (c *Client) Session(ctx context.Context, sessionID string) (SessionView, error) {
	var out SessionView
	err := c.call(ctx, http.MethodGet, "/sessions/"+sessionID, nil, nil, &out)
	return out, err
}

// SetPermissionMode sets the Session's permission mode.
func (c *Client) SetPermissionMode(ctx context.Context, sessionID, mode string) error {
	return c.call(ctx, http.MethodPost, "/sessions/"+sessionID+"/permission-mode", map[string]string{"permission_mode": mode}, nil, nil)
}

// Answer answers an open interaction with a decision (approve or deny).
func (c *Client) Answer(ctx context.Context, sessionID, interactionID, decision string) error {
	body := map[string]any{"answer": map[string]string{"decision": decision}}
	return c.call(ctx, http.MethodPost, "/sessions/"+sessionID+"/interactions/"+interactionID+"/answer", body, nil, nil)
}

// HistoryMessage is one UI message of GET /sessions/{id}/messages.
type HistoryMessage struct {
	ID       string `json:"id"`
	Role     string `json:"role"`
	Metadata struct {
		InputID      string          `json:"input_id"`
		State        string          `json:"state"`
		Failure      json.RawMessage `json:"failure"`
		ResponseID   string          `json:"response_id"`
		InputIDs     []string        `json:"input_ids"`
		Outcome      *string         `json:"outcome"`
		NativeReason *string         `json:"native_reason"`
		Open         bool            `json:"open"`
	} `json:"metadata"`
	Parts []map[string]any `json:"parts"`
}

// Text joins the message's text parts.
func (m HistoryMessage) Text() string {
	var b bytes.Buffer
	for _, p := range m.Parts {
		if p["type"] == "text" {
			fmt.Fprint(&b, p["text"])
		}
	}
	return b.String()
}

// History reads the Session's recorded messages, oldest first.
func (c *Client) History(ctx context.Context, sessionID string) ([]HistoryMessage, error) {
	var all []HistoryMessage
	before := ""
	for {
		q := url.Values{"limit": {"200"}}
		if before != "" {
			q.Set("before", before)
		}
		var page struct {
			Messages []HistoryMessage `json:"messages"`
			HasMore  bool             `json:"has_more"`
			Before   *string          `json:"before"`
		}
		if err := c.call(ctx, http.MethodGet, "/sessions/"+sessionID+"/messages?"+q.Encode(), nil, nil, &page); err != nil {
			return nil, err
		}
		all = append(page.Messages, all...)
		if !page.HasMore || page.Before == nil || *page.Before == "" {
			return all, nil
		}
		before = *page.Before
	}
}

// Probe makes one GET without retrying and returns the status, the envelope's
// code (if any) and the Retry-After header, to check how an outage answers.
func (c *Client) Probe(ctx context.Context, path string) (status int, code, retryAfter string, err error) {
	reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", "", fmt.Errorf("probe %s: %w", path, err)
	}
	defer resp.Body.Close()
	var env envelope
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &env)
	}
	return resp.StatusCode, env.Code, resp.Header.Get("Retry-After"), nil
}

// ErrTerminated reports a Session TERMINATED while a caller waited for it.
var ErrTerminated = errors.New("the Session is TERMINATED")

// WaitSession polls the Session until cond holds, failing at once with
// ErrTerminated when it is TERMINATED (no fault may terminate a Session).
func (c *Client) WaitSession(ctx context.Context, sessionID, what string, cond func(SessionView) bool) (SessionView, error) {
	var last SessionView
	tick := time.NewTicker(retryInterval)
	defer tick.Stop()
	for {
		view, err := c.Session(ctx, sessionID)
		if err != nil {
			return last, fmt.Errorf("wait for %s: %w", what, err)
		}
		last = view
		if view.State == StateTerminated {
			return view, fmt.Errorf("wait for %s: %w", what, ErrTerminated)
		}
		if cond(view) {
			return view, nil
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("wait for %s: %w (last seen: state %s, %d held, %d open responses)", what, ctx.Err(), last.State, len(last.HeldInputs), len(last.CurrentResponses))
		case <-tick.C:
		}
	}
}

// Settled reports a Session at rest: READY, nothing held, no open response.
func Settled(v SessionView) bool {
	return v.State == StateReady && len(v.HeldInputs) == 0 && len(v.CurrentResponses) == 0
}
