package pi

import (
	"encoding/json"

	"github.com/astrabox/astrabox/engines"
)

// position is a cursor's position in the process's journal, with Pi's translation
// state (engines.JournalPosition).
type position = engines.JournalPosition[transState]

// generationOf names the incarnation a journal belongs to: the process session (a new
// one for every launch, so its journal offsets start again) and the session key.
func generationOf(processName, sessionKey string) string {
	return processName + "/" + sessionKey
}

func cursorAt(generation string, line int64, skip int, stateJSON json.RawMessage) engines.RuntimeCursor {
	return engines.JournalCursor(generation, line, skip, stateJSON)
}

func decodeCursor(generation string, c engines.RuntimeCursor) (position, error) {
	return engines.DecodeJournalCursor[transState](generation, c, "Pi rpc process")
}
