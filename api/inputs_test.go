package api

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

func (f *fixture) countInputs(sessionID string) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.db.QueryRow(f.ctx, "SELECT count(*) FROM inputs WHERE session_id = $1", sessionID).Scan(&n))
	return n
}

func TestSendInputReturnsTheReceipt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	path := "/api/v1/sessions/" + id + "/inputs"
	var r inputReceipt
	f.call("POST", path, f.member, map[string]any{"content": "Analyze the code.", "client_message_id": "analysis-1"}).ok(t).into(t, &r)
	assert.Equal(t, id, r.SessionID)
	assert.Equal(t, "pending", r.State)
	assert.False(t, r.Duplicate)
	assert.Equal(t, "analysis-1", *r.ClientMessageID)
	assert.False(t, r.AcceptedAt.IsZero())
	// The workflow is signalled after the receipt is written.
	require.Eventually(t, func() bool { return len(f.signals.named(workflows.SignalInputAccepted)) == 1 }, 10*time.Second, 5*time.Millisecond)
	sig := f.signals.named(workflows.SignalInputAccepted)
	assert.Equal(t, workflows.InputAccepted{InputID: r.InputID}, sig[0].Payload)

	// The same client_message_id names the same message, with its recorded failure.
	f.exec(`UPDATE inputs SET state = 'failed', failure_code = 'INPUT_REFUSED', failure_message = 'too long', failed_at = now() WHERE id = $1`, r.InputID)
	var again inputReceipt
	f.call("POST", path, f.member, map[string]any{"content": "something else", "client_message_id": "analysis-1"}).ok(t).into(t, &again)
	assert.True(t, again.Duplicate)
	assert.Equal(t, r.InputID, again.InputID)
	assert.Equal(t, "failed", again.State)
	require.NotNil(t, again.Failure)
	assert.Equal(t, inputFailure{Code: "INPUT_REFUSED", Message: "too long"}, *again.Failure)
	assert.Equal(t, 1, f.countInputs(id))

	// Without a client_message_id every message is new. A message sent while the
	// Session is CREATING is kept.
	f.call("POST", path, f.member, map[string]any{"content": "one"}).ok(t)
	f.call("POST", path, f.member, map[string]any{"content": "one"}).ok(t)
	assert.Equal(t, 3, f.countInputs(id))
	assert.Len(t, f.session(id, f.member).HeldInputs, 2)
}

// While a live Relay says it takes the Session's inputs on notice, an input is
// answered without a workflow signal; once the record is gone, inputs are signalled
// again.
func TestAnInputLeftToTheRelayIsNotSignalled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.activate(id)
	path := "/api/v1/sessions/" + id + "/inputs"
	lease, err := f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{SessionID: id, Holder: "relay", TTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, f.st.SetInputsOnNotice(f.ctx, id, lease.Generation))

	var onNotice inputReceipt
	f.call("POST", path, f.member, map[string]any{"content": "taken on notice"}).ok(t).into(t, &onNotice)
	assert.Equal(t, "pending", onNotice.State, "the input is in custody all the same")

	require.NoError(t, f.st.ClearInputsOnNotice(f.ctx, id, lease.Generation))
	var signalled inputReceipt
	f.call("POST", path, f.member, map[string]any{"content": "signalled"}).ok(t).into(t, &signalled)
	require.Eventually(t, func() bool { return len(f.signals.named(workflows.SignalInputAccepted)) > 0 }, 10*time.Second, 5*time.Millisecond)
	sent := f.signals.named(workflows.SignalInputAccepted)
	require.Len(t, sent, 1, "only the input no Relay took on notice was signalled")
	assert.Equal(t, workflows.InputAccepted{InputID: signalled.InputID}, sent[0].Payload)
}

func TestSendInputRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.MaxInputBytes = 64 })
	id := f.newSession(f.member)
	path := "/api/v1/sessions/" + id + "/inputs"
	cases := []struct {
		body  any
		field string
	}{
		{`{"content":`, "body"},
		{``, "body"},
		{`"text"`, "body"},
		{map[string]any{}, "content"},
		{map[string]any{"content": "  "}, "content"},
		{map[string]any{"content": 7}, "content"},
		{map[string]any{"content": strings.Repeat("x", 65)}, "content"},
		{map[string]any{"content": "hi", "client_message_id": ""}, "client_message_id"},
		{map[string]any{"content": "hi", "client_message_id": strings.Repeat("c", 201)}, "client_message_id"},
		{map[string]any{"content": "hi", "attachments": []string{}}, "attachments"},
		{map[string]any{"content": "nul\u0000byte"}, "content"},
		{`{"content":"a"} {"content":"b"}`, "body"},
	}
	for _, tc := range cases {
		r := f.call("POST", path, f.member, tc.body).refused(t, http.StatusBadRequest, CodeInvalidRequest)
		assert.Contains(t, r.Message, tc.field, "%v", tc.body)
	}
	f.call("POST", path, f.member, strings.Repeat(" ", 8000)).refused(t, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "body")
	f.call("POST", path, f.other, map[string]any{"content": "hi"}).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("POST", path, "", map[string]any{"content": "hi"}).refused(t, http.StatusUnauthorized, CodeUnauthorized)
	f.call("POST", path, f.member, map[string]any{"content": strings.Repeat("x", 64)}).ok(t)
	assert.Equal(t, 1, f.countInputs(id), "refused messages wrote nothing")

	f.exec(`UPDATE sessions SET lifecycle = 'terminated' WHERE id = $1`, id)
	f.call("POST", path, f.member, map[string]any{"content": "hi"}).refused(t, http.StatusConflict, CodeAgentRuntimeError, "TERMINATED")
	f.exec(`UPDATE sessions SET lifecycle = 'deleted', deleted_at = now() WHERE id = $1`, id)
	f.call("POST", path, f.member, map[string]any{"content": "hi"}).refused(t, http.StatusConflict, CodeAgentRuntimeError, "DELETED")
	assert.Equal(t, 1, f.countInputs(id))
}

func TestAdmissionPolicyRefusesWith429(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.MaxHeldInputs = 2 })
	id := f.newSession(f.member)
	path := "/api/v1/sessions/" + id + "/inputs"
	var first inputReceipt
	f.call("POST", path, f.member, map[string]any{"content": "1", "client_message_id": "m1"}).ok(t).into(t, &first)
	f.call("POST", path, f.member, map[string]any{"content": "2"}).ok(t)
	f.call("POST", path, f.member, map[string]any{"content": "3"}).refused(t, http.StatusTooManyRequests, CodeAdmissionDenied, "limit 2")
	// A repeated message is not a new one: it still gets its receipt.
	var dup inputReceipt
	f.call("POST", path, f.member, map[string]any{"content": "1", "client_message_id": "m1"}).ok(t).into(t, &dup)
	assert.True(t, dup.Duplicate)
	// Once the program takes a message, there is room again.
	f.exec(`UPDATE inputs SET state = 'admitted', admitted_at = now() WHERE id = $1`, first.InputID)
	f.call("POST", path, f.member, map[string]any{"content": "3"}).ok(t)
	assert.Equal(t, 3, f.countInputs(id))
}

func TestParallelSendsWithOneClientMessageIDMakeOneInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	path := "/api/v1/sessions/" + id + "/inputs"
	const n = 50
	receipts := make([]inputReceipt, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			f.call("POST", path, f.member, map[string]any{"content": fmt.Sprintf("attempt %d", i), "client_message_id": "same"}).ok(t).into(t, &receipts[i])
		})
	}
	wg.Wait()
	assert.Equal(t, 1, f.countInputs(id))
	fresh := 0
	for _, r := range receipts {
		assert.Equal(t, receipts[0].InputID, r.InputID)
		if !r.Duplicate {
			fresh++
		}
	}
	assert.Equal(t, 1, fresh, "exactly one receipt is the original")
}

func TestRepeatedMessageGetsItsReceiptAfterTheSessionStoppedAcceptingInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	path := "/api/v1/sessions/" + id + "/inputs"
	var first inputReceipt
	f.call("POST", path, f.member, map[string]any{"content": "1", "client_message_id": "m1"}).ok(t).into(t, &first)

	f.exec(`UPDATE sessions SET lifecycle = 'terminated' WHERE id = $1`, id)
	var dup inputReceipt
	f.call("POST", path, f.member, map[string]any{"content": "1", "client_message_id": "m1"}).ok(t).into(t, &dup)
	assert.True(t, dup.Duplicate)
	assert.Equal(t, first.InputID, dup.InputID)
	assert.Equal(t, first.AcceptedAt, dup.AcceptedAt)
	// A new message is still refused.
	f.call("POST", path, f.member, map[string]any{"content": "2", "client_message_id": "m2"}).refused(t, http.StatusConflict, CodeAgentRuntimeError, "TERMINATED")
	f.call("POST", path, f.member, map[string]any{"content": "3"}).refused(t, http.StatusConflict, CodeAgentRuntimeError, "TERMINATED")
	assert.Equal(t, 1, f.countInputs(id))
}

// TestSendInputTakesOneStatement: with the default admission policy and a cached
// token, a receipt is the insert alone, which checks the Session's owner, lifecycle
// and held inputs itself; with a cap set too.
func TestSendInputTakesOneStatement(t *testing.T) {
	t.Parallel()
	for name, limit := range map[string]int{"no cap": 0, "a cap": 5} {
		t.Run(name, func(t *testing.T) {
			f, counter := newCountingFixture(t, func(o *Options) { o.MaxHeldInputs = limit })
			id := f.newSession(f.member)
			path := "/api/v1/sessions/" + id + "/inputs"
			// The first request reads the token and its user (then cached) and records
			// the token's use (at most once a minute).
			f.call("POST", path, f.member, map[string]any{"content": "warm up"}).ok(t)
			counter.n.Store(0)
			f.call("POST", path, f.member, map[string]any{"content": "hello", "client_message_id": "m1"}).ok(t)
			assert.Equal(t, int64(1), counter.n.Load(), "the insert; the token from the cache")
			counter.n.Store(0)
			var dup inputReceipt
			f.call("POST", path, f.member, map[string]any{"content": "hello", "client_message_id": "m1"}).ok(t).into(t, &dup)
			assert.True(t, dup.Duplicate)
			assert.Equal(t, int64(2), counter.n.Load(), "a repeat: the insert, then the first input's read")
		})
	}
}

// TestAReceiptNamesTheOutputPositionItWasAcceptedAt: the receipt's output_seq is the
// Session's output position as the input was accepted, where its response follows.
func TestAReceiptNamesTheOutputPositionItWasAcceptedAt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	path := "/api/v1/sessions/" + id + "/inputs"
	f.exec(`UPDATE session_outputs SET output_seq = 41 WHERE session_id = $1`, id)
	var r inputReceipt
	f.call("POST", path, f.member, map[string]any{"content": "one"}).ok(t).into(t, &r)
	assert.Equal(t, int64(41), r.OutputSeq)
	var dup inputReceipt
	f.exec(`UPDATE session_outputs SET output_seq = 57 WHERE session_id = $1`, id)
	f.call("POST", path, f.member, map[string]any{"content": "two", "client_message_id": "m2"}).ok(t)
	f.call("POST", path, f.member, map[string]any{"content": "two", "client_message_id": "m2"}).ok(t).into(t, &dup)
	assert.True(t, dup.Duplicate)
	assert.Equal(t, int64(57), dup.OutputSeq)
}

// TestABadMessageToAnotherUsersSessionIsNotFound: access is checked before the body, so
// a Session the caller may not see answers not found whatever was sent, and an admin
// who may read it is refused changing it.
func TestABadMessageToAnotherUsersSessionIsNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	path := "/api/v1/sessions/" + id + "/inputs"
	f.call("POST", path, f.other, map[string]any{}).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("POST", path, f.other, `{"content":`).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("POST", path, f.admin, map[string]any{"content": "hi"}).refused(t, http.StatusForbidden, CodeForbidden)
	f.call("POST", "/api/v1/sessions/not-a-uuid/inputs", f.member, map[string]any{"content": "hi"}).refused(t, http.StatusNotFound, CodeNotFound)
	assert.Equal(t, 0, f.countInputs(id))
}
