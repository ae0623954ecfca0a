package faultstack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// resumeCursorType is the transient part the stream sends after every stored
// part, carrying that part's seq.
const resumeCursorType = "data-resume-cursor"

// doneLine ends a stream.
const doneLine = "[DONE]"

// Part types the harness and its tests look for.
const (
	// PartTextDelta shows a reply under way.
	PartTextDelta = "text-delta"
	// PartApprovalRequest pauses a response until an approval is answered.
	PartApprovalRequest = "tool-approval-request"
)

// Decisions an approval is answered with.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

// Part is one stored part read from a Session's stream.
type Part struct {
	Seq  int64
	Type string
	Raw  json.RawMessage
}

// Transcript is what a reader received from a Session's stream, across every
// reconnect, with each part once, in seq order.
type Transcript struct {
	// After is the after_seq the reading began from.
	After int64
	Parts []Part
	// Reconnects counts streams that broke off before [DONE] and were resumed.
	Reconnects int
	// Done reports that the stream ended with [DONE].
	Done bool
	// cursors are the resume-cursor lines as received, one per part.
	cursors []string
}

// Last is the seq of the last part read, the after_seq to resume from.
func (t Transcript) Last() int64 {
	if len(t.Parts) == 0 {
		return t.After
	}
	return t.Parts[len(t.Parts)-1].Seq
}

// SSE is the stream as one uninterrupted reader would have received it: every
// part with its resume cursor, then [DONE] when the stream ended.
func (t Transcript) SSE() []byte {
	var b bytes.Buffer
	for i, p := range t.Parts {
		fmt.Fprintf(&b, "data: %s\n\ndata: %s\n\n", p.Raw, t.cursors[i])
	}
	if t.Done {
		b.WriteString("data: " + doneLine + "\n\n")
	}
	return b.Bytes()
}

// Types lists the part types in order.
func (t Transcript) Types() []string {
	out := make([]string, len(t.Parts))
	for i, p := range t.Parts {
		out[i] = p.Type
	}
	return out
}

// FollowOptions tune Follow.
type FollowOptions struct {
	// OnPart sees every part once its seq is known (it must not block long).
	OnPart func(Part)
	// Until ends the reading after a part for which it returns true, for a
	// stream that stays open (a response paused on an approval).
	Until func(Part) bool
	// WatchSession polls the Session while reading and gives up with
	// ErrTerminated once it is TERMINATED: its stream would never end.
	WatchSession bool
}

// watchInterval paces the Session polls of a watching reader.
const watchInterval = time.Second

// ErrSequence reports a repeated or missing part: a seq that does not follow
// the previous one.
var ErrSequence = errors.New("stream seq is not contiguous")

// Follow reads the Session's stream from after until [DONE] (or Until), as a
// browser does: a stream that breaks off is resumed from the last seq it
// carried, and a refused or failed connection is retried until ctx ends. It
// fails with ErrSequence when a seq repeats or skips.
func (c *Client) Follow(ctx context.Context, sessionID string, after int64, opts FollowOptions) (Transcript, error) {
	if opts.WatchSession {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go c.watchTerminated(ctx, sessionID, cancel)
	}
	t, err := c.follow(ctx, sessionID, after, opts)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrTerminated) {
		return t, fmt.Errorf("stream after seq %d: %w", t.Last(), cause)
	}
	return t, err
}

// watchTerminated cancels the reading once the Session is TERMINATED.
func (c *Client) watchTerminated(ctx context.Context, sessionID string, cancel context.CancelCauseFunc) {
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if view, err := c.Session(ctx, sessionID); err == nil && view.State == StateTerminated {
			cancel(ErrTerminated)
			return
		}
	}
}

func (c *Client) follow(ctx context.Context, sessionID string, after int64, opts FollowOptions) (Transcript, error) {
	t := Transcript{After: after}
	for attempt := 0; ; attempt++ {
		resp, err := c.openStream(ctx, sessionID, t.Last())
		if err != nil {
			if !retryable(err) {
				return t, err
			}
			select {
			case <-ctx.Done():
				return t, fmt.Errorf("resume stream after seq %d: %w (last: %v)", t.Last(), ctx.Err(), err)
			case <-time.After(retryInterval):
			}
			continue
		}
		done, err := t.read(resp.Body, opts)
		resp.Body.Close()
		if err != nil && errors.Is(err, ErrSequence) {
			return t, err
		}
		if done || t.Done {
			return t, nil
		}
		if ctx.Err() != nil {
			return t, fmt.Errorf("stream after seq %d: %w", t.Last(), ctx.Err())
		}
		t.Reconnects++
	}
}

func (c *Client) openStream(ctx context.Context, sessionID string, after int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/sessions/%s/stream?after_seq=%d", c.base, sessionID, after), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errTransport, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env envelope
	_ = json.Unmarshal(raw, &env)
	if resp.StatusCode >= 500 {
		c.noteOutage(OutageAnswer{Path: "/sessions/" + sessionID + "/stream", Status: resp.StatusCode, Code: env.Code, RetryAfter: resp.Header.Get("Retry-After")})
	}
	return nil, &APIError{Status: resp.StatusCode, Code: env.Code, Message: env.Message}
}

// read consumes one connection's stream. A part counts only once its resume
// cursor arrived: a part cut off before its cursor is sent again on resume.
// It reports whether reading is over (Until held).
func (t *Transcript) read(body io.Reader, opts FollowOptions) (bool, error) {
	r := bufio.NewReaderSize(body, 64<<10)
	var pending *Part
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false, err
		}
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
		if !ok {
			continue
		}
		if data == doneLine {
			if pending != nil {
				return false, fmt.Errorf("%w: a %s part without its resume cursor before [DONE]", ErrSequence, pending.Type)
			}
			t.Done = true
			return true, nil
		}
		var head struct {
			Type string `json:"type"`
			Data struct {
				Seq int64 `json:"seq"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(data), &head); err != nil {
			return false, fmt.Errorf("%w: undecodable part %q: %v", ErrSequence, data, err)
		}
		if head.Type != resumeCursorType {
			if pending != nil {
				return false, fmt.Errorf("%w: two parts without a resume cursor between them (%s, %s)", ErrSequence, pending.Type, head.Type)
			}
			pending = &Part{Type: head.Type, Raw: json.RawMessage(data)}
			continue
		}
		if pending == nil {
			return false, fmt.Errorf("%w: resume cursor %d follows no part", ErrSequence, head.Data.Seq)
		}
		if want := t.Last() + 1; head.Data.Seq != want {
			return false, fmt.Errorf("%w: part %s carries seq %d where %d was due (types so far %v)", ErrSequence, pending.Type, head.Data.Seq, want, t.Types())
		}
		pending.Seq = head.Data.Seq
		t.Parts = append(t.Parts, *pending)
		t.cursors = append(t.cursors, data)
		if opts.OnPart != nil {
			opts.OnPart(*pending)
		}
		if opts.Until != nil && opts.Until(*pending) {
			return true, nil
		}
		pending = nil
	}
}

// Append returns t followed by a later reading that resumed from t.Last().
func (t Transcript) Append(later Transcript) Transcript {
	t.Parts = append(append([]Part{}, t.Parts...), later.Parts...)
	t.cursors = append(append([]string{}, t.cursors...), later.cursors...)
	t.Reconnects += later.Reconnects
	t.Done = later.Done
	return t
}
