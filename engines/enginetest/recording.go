package enginetest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/astrabox/astrabox/engines"
)

// ReadRecording reads events stored one tagged envelope (engines.MarshalEvent) per
// line; blank lines are skipped.
func ReadRecording(r io.Reader) ([]engines.Event, error) {
	var out []engines.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		ev, err := engines.UnmarshalEvent(text)
		if err != nil {
			return nil, fmt.Errorf("recording line %d: %w", line, err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read recording: %w", err)
	}
	return out, nil
}

// WriteRecording writes events one tagged envelope per line, the form ReadRecording reads.
func WriteRecording(w io.Writer, events []engines.Event) error {
	for i, ev := range events {
		enc, err := engines.MarshalEvent(ev)
		if err != nil {
			return fmt.Errorf("write recording event %d: %w", i, err)
		}
		if _, err := w.Write(append(enc, '\n')); err != nil {
			return fmt.Errorf("write recording: %w", err)
		}
	}
	return nil
}

// MustLoadRecording reads a recording file in a test, failing the test when it cannot.
func MustLoadRecording(t testing.TB, path string) []engines.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("load recording: %v", err)
	}
	defer f.Close()
	events, err := ReadRecording(f)
	if err != nil {
		t.Fatalf("load recording %s: %v", path, err)
	}
	return events
}
