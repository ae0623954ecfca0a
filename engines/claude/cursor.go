package claude

import (
	"encoding/json"

	"github.com/astrabox/astrabox/engines"
)

// position is a cursor's position in the process's journal, with Claude's translation state
// (engines.JournalPosition).
type position = engines.JournalPosition[transState]

// generationOf names the incarnation a journal belongs to: the process session (a new
// one for every launch, so its journal offsets start again) and Claude's session id.
func generationOf(processName, claudeSession string) string {
	return processName + "/" + claudeSession
}

// cursorAt builds the cursor for a position; the state is encoded once per line by the
// caller and passed as stateJSON.
func cursorAt(generation string, line int64, skip int, stateJSON json.RawMessage) engines.RuntimeCursor {
	return engines.JournalCursor(generation, line, skip, stateJSON)
}

// decodeCursor reads a cursor of this generation, or reports it expired.
func decodeCursor(generation string, c engines.RuntimeCursor) (position, error) {
	return engines.DecodeJournalCursor[transState](generation, c, "Claude Code process")
}
