package enginetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/engines"
)

// liveWait bounds how long a live test waits for one event of a real program in a box.
const liveWait = 90 * time.Second

// LiveReader runs one reader's Events loop over a live runtime client, as the platform's
// Relay does, and hands the events to a test, which keeps what it has read in Seen.
type LiveReader struct {
	T testing.TB
	// Cancel ends the reader's loop, as a stopped worker's would end.
	Cancel context.CancelFunc
	Events chan engines.Event
	// Errs receives the error that ended the loop (the program's process gone).
	Errs chan error
	Seen []engines.Event
	// Reconciled are the parts the platform adds after this reader's, when it ends a
	// response the runtime lost.
	Reconciled []engines.Frame
}

// StartLiveReader starts reading c's events after the cursor (nil: from the start).
func StartLiveReader(t testing.TB, ctx context.Context, c engines.RuntimeClient, after *engines.RuntimeCursor) *LiveReader {
	rctx, cancel := context.WithCancel(ctx)
	r := &LiveReader{T: t, Cancel: cancel, Events: make(chan engines.Event, 4096), Errs: make(chan error, 1)}
	go func() {
		for ev, err := range c.Events(rctx, after) {
			if err != nil {
				r.Errs <- err
				return
			}
			r.Events <- ev
		}
	}()
	t.Cleanup(cancel)
	return r
}

// Until reads events until match returns true and returns that event; it fails the
// test, naming the newest events, when the loop ends or none matches in time.
func (r *LiveReader) Until(what string, match func(engines.Event) bool) engines.Event {
	r.T.Helper()
	timeout := time.After(liveWait)
	for {
		select {
		case ev := <-r.Events:
			r.Seen = append(r.Seen, ev)
			if match(ev) {
				return ev
			}
		case err := <-r.Errs:
			r.T.Fatalf("waiting for %s: events ended: %v\n%s", what, err, LastEvents(r.Seen, 30))
		case <-timeout:
			r.T.Fatalf("waiting for %s: no such event; the last events were:\n%s", what, LastEvents(r.Seen, 30))
		}
	}
}

// Ended reads until the next response ends and returns its end.
func (r *LiveReader) Ended() engines.ResponseEnded {
	r.T.Helper()
	return r.Until("response end", IsType(engines.EventResponseEnded)).(engines.ResponseEnded)
}

// Stop ends the reader and keeps what it had already received: what is buffered, and
// what arrives until the loop has been quiet for a moment.
func (r *LiveReader) Stop() {
	r.Cancel()
	for {
		select {
		case ev := <-r.Events:
			r.Seen = append(r.Seen, ev)
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

// Frames are the UI parts the readers relayed, in order: each reader's after the
// previous one's, as a client resuming from reader to reader would read them.
func Frames(readers ...*LiveReader) []engines.Frame {
	var frames []engines.Frame
	for _, r := range readers {
		for _, ev := range r.Seen {
			if out, ok := ev.(engines.ResponseOutput); ok {
				frames = append(frames, out.Frame)
			}
		}
	}
	return frames
}

// IsType matches events of one type.
func IsType(typ engines.EventType) func(engines.Event) bool {
	return func(ev engines.Event) bool { return ev.Type() == typ }
}

// IsFrame matches response output of one UI part type.
func IsFrame(typ string) func(engines.Event) bool {
	return func(ev engines.Event) bool {
		out, ok := ev.(engines.ResponseOutput)
		return ok && out.Frame.Type() == typ
	}
}

// LastEvents describes the newest n events for a failure message.
func LastEvents(seen []engines.Event, n int) string {
	var b strings.Builder
	for _, ev := range seen[max(0, len(seen)-n):] {
		raw, _ := engines.MarshalEvent(ev)
		b.Write(raw[:min(len(raw), 400)])
		b.WriteByte('\n')
	}
	return b.String()
}
