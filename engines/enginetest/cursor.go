package enginetest

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/astrabox/astrabox/engines"
)

// ReadFunc re-reads events after a cursor (from the start for nil), as
// RuntimeClient.Events or an adapter's translator over a vendor recording does.
type ReadFunc func(ctx context.Context, after *engines.RuntimeCursor) iter.Seq2[engines.Event, error]

// CheckCursorDeterminism checks a recording, a sequence of events with their cursors:
// each event is valid, each browser frame is already public (PublicFrame applied), and
// reading again from the start and after every cursor in it yields the same events
// after that cursor, in the same order, as encoded for storage. Reading stops once the
// expected events arrived, so read may follow a live stream. Each read gets a context
// bounded by timeout (default 10s when 0).
func CheckCursorDeterminism(t testing.TB, recording []engines.Event, read ReadFunc, timeout time.Duration) {
	t.Helper()
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	want := make([][]byte, len(recording))
	for i, ev := range recording {
		if err := ev.Validate(); err != nil {
			t.Errorf("cursor determinism: recorded event %d (%s) is invalid: %v", i, ev.Type(), err)
		}
		if out, ok := ev.(engines.ResponseOutput); ok && !engines.PublicFrame(out.Frame).Equal(out.Frame) {
			t.Errorf("cursor determinism: recorded event %d carries a frame PublicFrame would change; build it with NewResponseOutput: %s", i, out.Frame)
		}
		enc, err := engines.MarshalEvent(ev)
		if err != nil {
			t.Errorf("cursor determinism: recorded event %d does not encode: %v", i, err)
			return
		}
		want[i] = enc
	}
	for start := -1; start < len(recording)-1; start++ {
		var after *engines.RuntimeCursor
		label := "the start"
		if start >= 0 {
			c := recording[start].EventCursor()
			after = &c
			label = fmt.Sprintf("the cursor of event %d", start)
		}
		if err := readCompare(read, after, want[start+1:], start+1, timeout); err != nil {
			t.Errorf("cursor determinism: reading after %s: %v", label, err)
		}
	}
}

// readCompare reads len(want) events after a cursor and compares each with the
// recording as it arrives, so a divergence is reported at once; first is the recording
// index of want[0].
func readCompare(read ReadFunc, after *engines.RuntimeCursor, want [][]byte, first int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	n := 0
	for ev, err := range read(ctx, after) {
		if n == len(want) {
			break
		}
		if err != nil {
			return fmt.Errorf("after %d events: %w", n, err)
		}
		if ev == nil {
			return fmt.Errorf("after %d events: nil event", n)
		}
		enc, err := engines.MarshalEvent(ev)
		if err != nil {
			return fmt.Errorf("event %d does not encode: %w", first+n, err)
		}
		if !bytes.Equal(enc, want[n]) {
			return fmt.Errorf("event %d differs from the recording:\n got %s\nwant %s", first+n, enc, want[n])
		}
		n++
		if n == len(want) {
			return nil
		}
	}
	if n < len(want) {
		if ctx.Err() != nil {
			return fmt.Errorf("got %d of %d events before the %s deadline", n, len(want), timeout)
		}
		return fmt.Errorf("the reader ended after %d of %d events", n, len(want))
	}
	return nil
}

// readN reads n events from the start and returns their encodings.
func readN(read ReadFunc, n int, timeout time.Duration) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := make([][]byte, 0, n)
	for ev, err := range read(ctx, nil) {
		if err != nil {
			return out, fmt.Errorf("after %d events: %w", len(out), err)
		}
		if ev == nil {
			return out, fmt.Errorf("after %d events: nil event", len(out))
		}
		enc, err := engines.MarshalEvent(ev)
		if err != nil {
			return out, fmt.Errorf("event %d does not encode: %w", len(out), err)
		}
		out = append(out, enc)
		if len(out) == n {
			return out, nil
		}
	}
	return out, fmt.Errorf("got %d of %d events", len(out), n)
}

// CheckClientCursorDeterminism records the first n events a connected client yields
// from the start and runs CheckCursorDeterminism over them with the client's own Events.
// Use it with a client over a scripted or replayed vendor.
func CheckClientCursorDeterminism(t testing.TB, client engines.RuntimeClient, n int, timeout time.Duration) {
	t.Helper()
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	encoded, err := readN(client.Events, n, timeout)
	if err != nil {
		t.Errorf("cursor determinism: recording %d events: %v", n, err)
		return
	}
	recording := make([]engines.Event, len(encoded))
	for i, enc := range encoded {
		ev, err := engines.UnmarshalEvent(enc)
		if err != nil {
			t.Errorf("cursor determinism: recorded event %d: %v", i, err)
			return
		}
		recording[i] = ev
	}
	CheckCursorDeterminism(t, recording, client.Events, timeout)
}
