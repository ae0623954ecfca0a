package api

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLiveBoxCapRefusesNewSessionsWith429: a user may hold only so many
// Sessions with a live box; more are refused with ADMISSION_DENIED until one is
// archived or releases its box, while retries of a created Session still
// answer and other users are not affected.
func TestLiveBoxCapRefusesNewSessionsWith429(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.MaxLiveBoxesPerUser = 2 })
	path := "/api/v1/agents/" + f.agent.ID + "/conversations"
	var first createdSession
	f.call("POST", path, f.member, "{}", "Idempotency-Key", "first").ok(t).into(t, &first)
	second := f.newSession(f.member)
	f.exec(`UPDATE sessions SET lifecycle = 'active', sandbox_id = 'box-1' WHERE id = $1`, second)
	f.call("POST", path, f.member, "{}").refused(t, http.StatusTooManyRequests, CodeAdmissionDenied, "archive one")

	var again createdSession
	f.call("POST", path, f.member, "{}", "Idempotency-Key", "first").ok(t).into(t, &again)
	assert.Equal(t, first.SessionID, again.SessionID, "a retried create is not a new Session")
	f.newSession(f.other)

	// A Session whose idle box was released holds none.
	f.exec(`UPDATE sessions SET lifecycle = 'active', sandbox_id = NULL WHERE id = $1`, first.SessionID)
	third := f.newSession(f.member)
	f.call("POST", path, f.member, "{}").refused(t, http.StatusTooManyRequests, CodeAdmissionDenied)
	// Archiving frees a place as well.
	f.exec(`UPDATE sessions SET archived_at = now() WHERE id = $1`, third)
	f.newSession(f.member)
}

// TestLiveBoxCapHoldsUnderConcurrentCreates: parallel creates of one user are
// counted one after the other, so the cap is never overshot.
func TestLiveBoxCapHoldsUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.MaxLiveBoxesPerUser = 3 })
	path := "/api/v1/agents/" + f.agent.ID + "/conversations"
	const n = 12
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { statuses[i] = f.call("POST", path, f.member, "{}").Status })
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		if s == http.StatusOK || s == http.StatusCreated {
			created++
		} else {
			assert.Equal(t, http.StatusTooManyRequests, s)
		}
	}
	assert.Equal(t, 3, created)
}
