package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/workflows"
)

func (f *fixture) openInteraction(sessionID, interactionID string, c engines.InteractionContract) {
	f.t.Helper()
	raw, err := json.Marshal(c)
	require.NoError(f.t, err)
	f.exec(`INSERT INTO interactions (session_id, interaction_id, response_id, contract) VALUES ($1, $2, 'r-1', $3)`, sessionID, interactionID, string(raw))
}

func TestAnswerInteraction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.activate(id)
	native := engines.NativeRequest{Type: "permission", ID: "n-1"}
	f.openInteraction(id, "int-1", engines.ToolApprovalContract(native, "call-1", "Bash", json.RawMessage(`{}`)))
	f.openInteraction(id, "int-2", engines.DecisionContract(native, "Which?", engines.DecisionOption{ID: "a", Label: "A"}))
	f.openInteraction(id, "int-3", engines.DecisionContract(native, "Gone?", engines.DecisionOption{ID: "a", Label: "A"}))
	f.exec(`UPDATE interactions SET state = 'withdrawn', closed_at = now() WHERE interaction_id = 'int-3'`)
	base := "/api/v1/sessions/" + id + "/interactions/"

	for _, body := range []any{
		`{}`, map[string]any{"answer": nil}, map[string]any{"answer": map[string]any{"decision": "maybe"}},
		map[string]any{"answer": map[string]any{"decision": "approve", "mood": "happy"}}, map[string]any{"answer": "approve"},
	} {
		f.call("POST", base+"int-1/answer", f.member, body).refused(t, http.StatusBadRequest, CodeInvalidRequest, "answer")
	}
	f.call("POST", base+"int-1/answer", f.other, map[string]any{"answer": map[string]any{"decision": "approve"}}).refused(t, http.StatusNotFound, CodeNotFound)
	assert.Empty(t, f.signals.named(workflows.SignalInteractionAnswered))

	var v interactionView
	f.call("POST", base+"int-1/answer", f.member, map[string]any{"answer": map[string]any{"decision": "approve"}}).ok(t).into(t, &v)
	assert.True(t, v.AnswerSaved)
	assert.Equal(t, "open", v.State, "the runtime closes it, not the answer")
	sig := f.signals.named(workflows.SignalInteractionAnswered)
	require.Len(t, sig, 1)
	assert.Equal(t, workflows.InteractionAnswered{InteractionID: "int-1"}, sig[0].Payload)
	var saved string
	require.NoError(t, f.db.QueryRow(f.ctx, `SELECT answer::text FROM interactions WHERE interaction_id = 'int-1'`).Scan(&saved))
	assert.JSONEq(t, `{"decision":"approve"}`, saved)

	f.call("POST", base+"int-1/answer", f.member, map[string]any{"answer": map[string]any{"decision": "deny"}}).refused(t, http.StatusConflict, CodeInteractionNotOpen)
	f.call("POST", base+"int-3/answer", f.member, map[string]any{"answer": map[string]any{"decision": "a"}}).refused(t, http.StatusConflict, CodeInteractionNotOpen)
	f.exec(`UPDATE interactions SET state = 'expired', closed_at = now() WHERE interaction_id = 'int-2'`)
	f.call("POST", base+"int-2/answer", f.member, map[string]any{"answer": map[string]any{"decision": "a"}}).refused(t, http.StatusConflict, CodeInteractionNotOpen)
	f.call("POST", base+"nope/answer", f.member, map[string]any{"answer": map[string]any{"decision": "a"}}).refused(t, http.StatusNotFound, CodeNotFound)
	assert.Len(t, f.signals.named(workflows.SignalInteractionAnswered), 1)
}

func TestInterrupt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.activate(id)
	path := "/api/v1/sessions/" + id + "/interrupt"
	var res interruptResult
	f.call("POST", path, f.member, nil).ok(t).into(t, &res)
	assert.Equal(t, "idle", res.Status)
	assert.Empty(t, f.signals.named(workflows.SignalInterrupt))

	var a, b inputReceipt
	f.call("POST", "/api/v1/sessions/"+id+"/inputs", f.member, map[string]any{"content": "1"}).ok(t).into(t, &a)
	f.call("POST", "/api/v1/sessions/"+id+"/inputs", f.member, map[string]any{"content": "2"}).ok(t).into(t, &b)
	r := f.call("POST", path, f.member, nil).refused(t, http.StatusConflict, CodePendingInputsNotCancelled)
	var data struct {
		InputIDs []string `json:"input_ids"`
	}
	r.into(t, &data)
	assert.Equal(t, []string{a.InputID, b.InputID}, data.InputIDs)
	assert.Len(t, f.session(id, f.member).HeldInputs, 2, "held inputs are not withdrawn")

	f.exec(`INSERT INTO responses (session_id, response_id, origin, started_seq) VALUES ($1, 'r-1', 'input', 1)`, id)
	f.call("POST", path, f.member, nil).ok(t).into(t, &res)
	assert.Equal(t, "accepted", res.Status)
	sig := f.signals.named(workflows.SignalInterrupt)
	require.Len(t, sig, 1)
	assert.Equal(t, workflows.Interrupt{CancelQueued: false, RequestID: res.RequestID}, sig[0].Payload)
	f.call("POST", path, f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("POST", path, f.member, `{"cancel_queued":true}`).refused(t, http.StatusBadRequest, CodeInvalidRequest, "cancel_queued")
}

func TestChildRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	childID := engines.ChildRunID(id, "native-7")
	f.exec(`INSERT INTO child_runs (id, session_id, native_ref, name, status) VALUES ($1, $2, 'native-7', 'explore', 'running')`, childID, id)
	r := f.relay(id)
	msg := func(text string) engines.Frame {
		fr, err := engines.SubagentMessageFrame(id, "native-7", engines.ChildRunMessage{MessageID: "m-1", Role: "assistant",
			Parts: json.RawMessage(`[{"type":"text","text":"` + text + `"}]`)})
		require.NoError(t, err)
		return fr
	}
	r.append("", msg("draft"), msg("final"))

	var runs []childRunView
	f.call("GET", "/api/v1/sessions/"+id+"/child-runs", f.member, nil).ok(t).into(t, &runs)
	require.Len(t, runs, 1)
	assert.Equal(t, childID, runs[0].ChildRunID)
	assert.Equal(t, "running", runs[0].Status)
	assert.False(t, runs[0].Stoppable)
	var msgs struct {
		Messages []childRunMessage `json:"messages"`
	}
	f.call("GET", "/api/v1/sessions/"+id+"/child-runs/"+childID+"/messages", f.member, nil).ok(t).into(t, &msgs)
	require.Len(t, msgs.Messages, 1, "the latest report of each message")
	assert.JSONEq(t, `[{"type":"text","text":"final"}]`, string(msgs.Messages[0].Parts))
	f.call("POST", "/api/v1/sessions/"+id+"/child-runs/"+childID+"/stop", f.member, nil).refused(t, http.StatusConflict, CodeConflict)
	f.call("GET", "/api/v1/sessions/"+id+"/child-runs/cr_missing/messages", f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", "/api/v1/sessions/"+id+"/child-runs", f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)
}
