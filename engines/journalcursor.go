package engines

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
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

// JournalTranslator is one adapter's translation of its process's journal, with
// translation state S, as ReplayJournal drives it.
type JournalTranslator[S any] interface {
	// State is the translation state now; it travels in every cursor.
	State() S
	// Apply translates one journal line into its events.
	Apply(line OutputLine) []Event
	// Poll returns the events of facts found outside the journal since the last
	// call (inputs the vendor's own record now holds while the program printed
	// nothing), or none.
	Poll() []Event
}

// JournalReplay is where ReplayJournal reads: the process, its generation, and
// how the client around it follows.
type JournalReplay struct {
	Process    ProcessSession
	Generation string
	// Program names the process in errors ("claude code process").
	Program string
	// PollInterval spaces Poll calls while following.
	PollInterval time.Duration
	// Seen is called with every line's offset (for a control reader's tail).
	Seen func(offset int64)
	// Ended is called when a followed journal ends because the process exited.
	Ended func()
}

// ReplayJournal translates the journal from pos and yields every event with the
// cursor that resumes after it. With follow it waits for new lines, polling tr in
// between, until ctx ends or the process exits (then the connection is lost);
// without it stops at the current end. It returns the translation state and the
// offset after the last line read. A position whose line the box no longer
// retains is RuntimeCursorExpired.
func ReplayJournal[S any](ctx context.Context, r JournalReplay, tr JournalTranslator[S], pos JournalPosition[S], follow bool,
	yield func(Event, error) bool) (S, int64) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type item struct {
		line OutputLine
		err  error
	}
	lines := make(chan item)
	go func() {
		defer close(lines)
		for line, err := range r.Process.ReadOutput(rctx, pos.Line, follow) {
			select {
			case lines <- item{line, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	skip, first := pos.Skip, true
	next := pos.Line
	ticker := time.NewTicker(r.PollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return tr.State(), next
		case <-ticker.C:
			if !follow {
				continue
			}
			found := tr.Poll()
			if len(found) == 0 {
				continue
			}
			state, _ := json.Marshal(tr.State())
			for _, ev := range found {
				if !yield(WithCursor(ev, JournalCursor(r.Generation, next, 0, state)), nil) {
					return tr.State(), next
				}
			}
		case it, ok := <-lines:
			if !ok {
				if follow && ctx.Err() == nil {
					// The journal ends only when the process exited: this connection
					// has nothing more to drive.
					if r.Ended != nil {
						r.Ended()
					}
					yield(nil, fmt.Errorf("%s %s ended: %w", r.Program, r.Process.Name(), ErrRuntimeConnectionLost))
				}
				return tr.State(), next
			}
			if it.err != nil {
				if ctx.Err() == nil {
					yield(nil, fmt.Errorf("read %s output: %w: %w", r.Program, ErrRuntimeConnectionLost, it.err))
				}
				return tr.State(), next
			}
			line := it.line
			if first && skip > 0 && line.Offset != pos.Line {
				yield(nil, &RuntimeCursorExpired{Cursor: JournalCursor(r.Generation, pos.Line, pos.Skip, json.RawMessage("null")),
					Reason: fmt.Sprintf("journal line %d is no longer retained", pos.Line)})
				return tr.State(), next
			}
			if r.Seen != nil {
				r.Seen(line.Offset)
			}
			stateBefore, _ := json.Marshal(tr.State())
			events := tr.Apply(line)
			next = line.Offset + 1
			for i, ev := range events {
				if first && i < skip {
					continue
				}
				if !yield(WithCursor(ev, JournalCursor(r.Generation, line.Offset, i+1, stateBefore)), nil) {
					return tr.State(), next
				}
			}
			first = false
		}
	}
}
