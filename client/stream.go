package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Part is one part of a Session's AI SDK UI Message Stream, with the seq its resume
// cursor carried: pass the last one as afterSeq to continue after it.
type Part struct {
	Seq  int64
	Type string
	// Raw is the part's JSON as the stream carried it.
	Raw json.RawMessage
}

// resumeCursor is the transient part that follows every part with its seq.
const resumeCursor = "data-resume-cursor"

// errStreamCut reports a stream that ended before its [DONE].
var errStreamCut = errors.New("the stream ended before [DONE]")

// Stream yields the Session's parts after afterSeq up to the part that finishes a
// response (or reports a refused message outside any response), as one stream request
// of the API delivers them. A connection that drops is opened again from the last
// seq received, so no part is lost or repeated; a refusal (an *Error other than 503)
// or too many tries in a row without a part end the iteration with an error.
func (c *Client) Stream(ctx context.Context, sessionID string, afterSeq int64) iter.Seq2[Part, error] {
	return c.stream(ctx, "/sessions/"+pathEscape(sessionID)+"/stream", afterSeq, false)
}

// Follow is Stream across responses: after each response it opens the next stream
// from the last seq, until ctx ends (which ends the iteration without an error) or
// the loop stops.
func (c *Client) Follow(ctx context.Context, sessionID string, afterSeq int64) iter.Seq2[Part, error] {
	return c.stream(ctx, "/sessions/"+pathEscape(sessionID)+"/stream", afterSeq, true)
}

// SharedStream is Stream for a share link's viewer (no account needed).
func (c *Client) SharedStream(ctx context.Context, shareToken string, afterSeq int64) iter.Seq2[Part, error] {
	return c.stream(ctx, "/shared/"+pathEscape(shareToken)+"/stream", afterSeq, false)
}

func (c *Client) stream(ctx context.Context, path string, afterSeq int64, follow bool) iter.Seq2[Part, error] {
	return func(yield func(Part, error) bool) {
		cursor := afterSeq
		failures, wait := 0, c.backoff
		for {
			received, done, stopped, err := c.streamOnce(ctx, path, &cursor, yield)
			if stopped {
				return
			}
			if received > 0 {
				failures, wait = 0, c.backoff
			}
			if done {
				if !follow {
					return
				}
				continue
			}
			if ctx.Err() != nil {
				if !follow {
					yield(Part{}, ctx.Err())
				}
				return
			}
			if !retryable(err) {
				yield(Part{}, err)
				return
			}
			failures++
			if failures > c.retries {
				yield(Part{}, fmt.Errorf("stream after seq %d: gave up after %d tries: %w", cursor, failures, err))
				return
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
			case <-timer.C:
			}
			wait = min(2*wait, c.maxBackoff)
		}
	}
}

// streamOnce reads one stream request from *cursor, yielding each part once its resume
// cursor arrived and moving *cursor past it. It reports how many parts it yielded,
// whether the stream reached [DONE], and whether the consumer stopped.
func (c *Client) streamOnce(ctx context.Context, path string, cursor *int64, yield func(Part, error) bool) (int, bool, bool, error) {
	req, err := c.request(ctx, "GET", path, url.Values{"after_seq": {strconv.FormatInt(*cursor, 10)}}, nil)
	if err != nil {
		return 0, false, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, false, false, fmt.Errorf("open stream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, err := readEnvelope(resp)
		if err == nil {
			err = fmt.Errorf("open stream: status %d", resp.StatusCode)
		}
		return 0, false, false, err
	}
	r := bufio.NewReader(resp.Body)
	var pending *Part
	var data bytes.Buffer
	received := 0
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errStreamCut
			}
			return received, false, false, fmt.Errorf("read stream: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			// Comments (": keep-alive") and other fields carry nothing to keep.
			if payload, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				data.Write(payload)
			}
			continue
		}
		if data.Len() == 0 {
			continue
		}
		event := bytes.Clone(data.Bytes())
		data.Reset()
		if string(event) == "[DONE]" {
			return received, true, false, nil
		}
		var head struct {
			Type string `json:"type"`
			Data struct {
				Seq int64 `json:"seq"`
			} `json:"data"`
		}
		if err := json.Unmarshal(event, &head); err != nil {
			return received, false, false, fmt.Errorf("read stream: part is not JSON: %w", err)
		}
		if head.Type != resumeCursor {
			pending = &Part{Type: head.Type, Raw: event}
			continue
		}
		if pending == nil {
			continue
		}
		pending.Seq = head.Data.Seq
		*cursor = head.Data.Seq
		received++
		if !yield(*pending, nil) {
			return received, false, true, nil
		}
		pending = nil
	}
}
