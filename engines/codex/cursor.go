package codex

import (
	"encoding/json"
	"fmt"

	"github.com/astrabox/astrabox/engines"
)

// position is a cursor's position. Line is the journal offset of the line whose events
// continue after the cursor and Skip how many of that line's events were already
// delivered; State is the translation state from before Line. Translating Line again
// from State yields the same events, so a reader skips Skip of them and continues.
// A cursor between lines (after an admission found while Codex printed nothing) has
// Skip 0 and Line = the next offset to read.
type position struct {
	Line  int64      `json:"line"`
	Skip  int        `json:"skip"`
	State transState `json:"state"`
}

// generationOf names the incarnation a journal belongs to: the process session (a new
// one for every launch, so its journal offsets start again) and Codex's thread id.
func generationOf(processName, threadID string) string {
	return processName + "/" + threadID
}

// cursorAt builds the cursor for a position; the state is encoded once per line by the
// caller and passed as stateJSON.
func cursorAt(generation string, line int64, skip int, stateJSON json.RawMessage) engines.RuntimeCursor {
	raw := fmt.Appendf(nil, `{"line":%d,"skip":%d,"state":%s}`, line, skip, stateJSON)
	return engines.RuntimeCursor{Generation: generation, Position: raw}
}

// decodeCursor reads a cursor of this generation, or reports it expired.
func decodeCursor(generation string, c engines.RuntimeCursor) (position, error) {
	if c.Generation != generation {
		return position{}, &engines.RuntimeCursorExpired{Cursor: c,
			Reason: fmt.Sprintf("the cursor belongs to %q; this Codex app-server is %q", c.Generation, generation)}
	}
	var p position
	if err := c.DecodePosition(&p); err != nil || p.Line < 0 || p.Skip < 0 {
		return position{}, &engines.RuntimeCursorExpired{Cursor: c, Reason: "the position is not a Codex app-server journal position"}
	}
	return p, nil
}

// withCursor returns ev carrying c.
func withCursor(ev engines.Event, c engines.RuntimeCursor) engines.Event {
	switch e := ev.(type) {
	case engines.InputAdmitted:
		e.Cursor = c
		return e
	case engines.ResponseStarted:
		e.Cursor = c
		return e
	case engines.ResponseOutput:
		e.Cursor = c
		return e
	case engines.InteractionOpened:
		e.Cursor = c
		return e
	case engines.InteractionClosed:
		e.Cursor = c
		return e
	case engines.ResponseEnded:
		e.Cursor = c
		return e
	case engines.StatusChanged:
		e.Cursor = c
		return e
	case engines.RuntimeDiagnostic:
		e.Cursor = c
		return e
	}
	return ev
}
