package devmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// sseWriter writes one server-sent event stream and flushes after every event,
// so each delta reaches the program when the script says, not when a buffer fills.
type sseWriter struct {
	ctx context.Context
	w   http.ResponseWriter
	rc  *http.ResponseController
}

func startSSE(ctx context.Context, w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{ctx: ctx, w: w, rc: http.NewResponseController(w)}
}

// event writes `event: name` (omitted when name is empty) and `data: <json of v>`.
func (s *sseWriter) event(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("marshal %s event: %w", name, err)
	}
	return s.raw(name, string(data))
}

// raw writes an event whose data is already text (such as `[DONE]`).
func (s *sseWriter) raw(name, data string) error {
	if err := s.ctx.Err(); err != nil {
		return fmt.Errorf("client gone: %w", err)
	}
	var frame string
	if name != "" {
		frame = "event: " + name + "\n"
	}
	frame += "data: " + data + "\n\n"
	if _, err := s.w.Write([]byte(frame)); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("flush event: %w", err)
	}
	return nil
}

// pause waits d, returning early with an error when the client goes away: this
// is how a slow reply notices an interrupt.
func (s *sseWriter) pause(d time.Duration) error {
	if d <= 0 {
		return s.ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.ctx.Done():
		return fmt.Errorf("client gone: %w", s.ctx.Err())
	}
}

// jsonPieces splits a JSON argument string into up to three pieces, to stream a
// tool call's arguments as several deltas the way real models do.
func jsonPieces(args string) []string {
	if len(args) < 6 {
		return []string{args}
	}
	a, b := runeStart(args, len(args)/3), runeStart(args, 2*len(args)/3)
	return []string{args[:a], args[a:b], args[b:]}
}

// runeStart moves i forward to the start of a UTF-8 sequence so a split never
// cuts a character in two.
func runeStart(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}
