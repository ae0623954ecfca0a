package activities

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/astrabox/astrabox/engines"
)

func TestContinueFromReadsANewIncarnationFromItsStart(t *testing.T) {
	t.Parallel()
	at := func(gen string, line int) *engines.RuntimeCursor {
		return &engines.RuntimeCursor{Generation: gen, Position: json.RawMessage(`{"line":` + string(rune('0'+line)) + `}`)}
	}
	now := engines.RuntimeState{Cursor: at("process-b", 7)}

	// The stored cursor belongs to the process a replaced box ran: nothing of the new
	// one is recorded, so its events are read from the start, a response it began
	// before this reader connected included.
	assert.Nil(t, continueFrom(at("process-a", 9), now))

	// Within one incarnation the expired position is gone: read on where State says.
	assert.Equal(t, now.Cursor, continueFrom(at("process-b", 2), now))

	// No stored cursor, or a runtime that has journalled nothing yet.
	assert.Equal(t, now.Cursor, continueFrom(nil, now))
	assert.Nil(t, continueFrom(at("process-a", 9), engines.RuntimeState{}))
}
