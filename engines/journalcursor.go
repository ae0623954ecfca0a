package engines

import (
	"encoding/json"
	"fmt"
)

// JournalPosition is the cursor position of a runtime client that translates the
// journalled output lines of the program's process (the runner's journal): Line is the
// journal offset of the line whose events continue after the cursor and Skip how many
// of that line's events were already delivered; State is the adapter's translation
// state from before Line. Translating Line again from State yields the same events, so
// a reader skips Skip of them and continues. A cursor between lines (after a fact found
// while the program printed nothing) has Skip 0 and Line = the next offset to read.
type JournalPosition[S any] struct {
	Line  int64 `json:"line"`
	Skip  int   `json:"skip"`
	State S     `json:"state"`
}

// JournalCursor builds the cursor of a journal position; the caller encodes the state
// once per line and passes it as stateJSON.
func JournalCursor(generation string, line int64, skip int, stateJSON json.RawMessage) RuntimeCursor {
	raw := fmt.Appendf(nil, `{"line":%d,"skip":%d,"state":%s}`, line, skip, stateJSON)
	return RuntimeCursor{Generation: generation, Position: raw}
}

// DecodeJournalCursor reads a journal cursor of this generation, or reports it expired.
// process names the program's process in the reason ("Claude Code process").
func DecodeJournalCursor[S any](generation string, c RuntimeCursor, process string) (JournalPosition[S], error) {
	if c.Generation != generation {
		return JournalPosition[S]{}, &RuntimeCursorExpired{Cursor: c,
			Reason: fmt.Sprintf("the cursor belongs to %q; this %s is %q", c.Generation, process, generation)}
	}
	var p JournalPosition[S]
	if err := c.DecodePosition(&p); err != nil || p.Line < 0 || p.Skip < 0 {
		return JournalPosition[S]{}, &RuntimeCursorExpired{Cursor: c, Reason: "the position is not a journal position of this " + process}
	}
	return p, nil
}

// WithCursor returns ev carrying c.
func WithCursor(ev Event, c RuntimeCursor) Event {
	switch e := ev.(type) {
	case InputAdmitted:
		e.Cursor = c
		return e
	case ResponseStarted:
		e.Cursor = c
		return e
	case ResponseOutput:
		e.Cursor = c
		return e
	case InteractionOpened:
		e.Cursor = c
		return e
	case InteractionClosed:
		e.Cursor = c
		return e
	case ResponseEnded:
		e.Cursor = c
		return e
	case StatusChanged:
		e.Cursor = c
		return e
	case RuntimeDiagnostic:
		e.Cursor = c
		return e
	}
	return ev
}
