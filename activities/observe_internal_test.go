package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/astrabox/astrabox/store"
)

// TestAProcessingSessionIsShownOnceItHasLasted: a PROCESSING observation waits
// until observations have found the Session PROCESSING for processingShownAfter; a
// Session found READY in between starts the wait again, and other states and a
// PROCESSING already shown never wait.
func TestAProcessingSessionIsShownOnceItHasLasted(t *testing.T) {
	processing := SessionObservation{State: string(store.StateProcessing), OpenResponses: 1}
	ready := SessionObservation{State: string(store.StateReady)}
	waiting := SessionObservation{State: string(store.StateWaitingInput), OpenInteractions: 1}
	start := time.Unix(1_000, 0)
	at := func(d time.Duration) time.Time { return start.Add(d) }

	r := &relayRun{observed: ready}
	assert.Equal(t, processingShownAfter, r.processingLeft(processing, at(0)), "first found PROCESSING")
	assert.Equal(t, processingShownAfter-2*time.Second, r.processingLeft(processing, at(2*time.Second)))
	assert.Zero(t, r.processingLeft(ready, at(3*time.Second)), "a turn that ended is not held back")
	assert.Equal(t, processingShownAfter, r.processingLeft(processing, at(4*time.Second)), "the next turn waits anew")
	assert.Zero(t, r.processingLeft(processing, at(4*time.Second+processingShownAfter)), "it lasted: shown")
	assert.Zero(t, r.processingLeft(waiting, at(0)), "WAITING_INPUT is never held back")

	r = &relayRun{observed: processing}
	assert.Zero(t, r.processingLeft(SessionObservation{State: processing.State, HeldInputs: 1}, at(0)),
		"a change while PROCESSING is shown goes as any other")
}
