package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/workflows"
)

func TestCreateSessionIsIdempotentPerUserAndAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := "/api/v1/agents/" + f.agent.ID + "/conversations"
	var first, again, otherKey, otherUser createdSession
	f.call("POST", path, f.member, "{}", "Idempotency-Key", "create-code-review-session").ok(t).into(t, &first)
	assert.Equal(t, f.agent.ID, first.AgentID)
	assert.Equal(t, "code-reviewer", first.DeploymentName)
	f.call("POST", path, f.member, "{}", "Idempotency-Key", "create-code-review-session").ok(t).into(t, &again)
	assert.Equal(t, first.SessionID, again.SessionID)
	f.call("POST", path, f.member, "{}", "Idempotency-Key", "another").ok(t).into(t, &otherKey)
	assert.NotEqual(t, first.SessionID, otherKey.SessionID)
	f.call("POST", path, f.other, "{}", "Idempotency-Key", "create-code-review-session").ok(t).into(t, &otherUser)
	assert.NotEqual(t, first.SessionID, otherUser.SessionID)

	// Concurrent requests with one key create one Session.
	ids := make(chan string, 20)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			var c createdSession
			f.call("POST", path, f.member, "", "Idempotency-Key", "burst").ok(t).into(t, &c)
			ids <- c.SessionID
		})
	}
	wg.Wait()
	close(ids)
	distinct := map[string]bool{}
	for id := range ids {
		distinct[id] = true
	}
	assert.Len(t, distinct, 1)

	// The body identifies nothing: an Agent, version or RuntimeProfile is refused.
	for _, body := range []string{`{"agent":{}}`, `{"runtime_profile_id":"x"}`, `{"version":1}`, `[]`, `{"a":`} {
		f.call("POST", path, f.member, body).refused(t, http.StatusBadRequest, CodeInvalidRequest)
	}
	f.call("POST", path, f.member, "{}", "Idempotency-Key", strings.Repeat("k", 201)).refused(t, http.StatusBadRequest, CodeInvalidRequest, "Idempotency-Key")
	f.call("POST", "/api/v1/agents/00000000-0000-0000-0000-000000000000/conversations", f.member, "{}").refused(t, http.StatusNotFound, CodeNotFound)
	var list []sessionSummary
	f.call("GET", "/api/v1/sessions", f.member, nil).ok(t).into(t, &list)
	assert.Len(t, list, 3, "refused creations wrote nothing")
	assert.Contains(t, f.signals.starts, first.SessionID, "creation starts the Session's workflow")
}

func TestGetSessionShowsEveryField(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.call("GET", "/api/v1/sessions/"+id, f.member, nil).ok(t)
	var fields map[string]json.RawMessage
	r.into(t, &fields)
	for _, k := range []string{"session_id", "agent_id", "state", "title", "model_name", "permission_mode", "runtime_status",
		"current_responses", "last_response", "pending_interaction", "held_inputs", "output_seq", "runtime_unavailable",
		"created_at", "updated_at", "archived", "last_output_at", "read_at", "unread", "runtime_error"} {
		assert.Contains(t, fields, k)
	}
	d := f.session(id, f.member)
	assert.Equal(t, "CREATING", d.State)
	assert.Equal(t, "default", *d.PermissionMode, "the Agent's default mode")
	assert.Empty(t, d.CurrentResponses)
	assert.NotNil(t, d.CurrentResponses, "arrays are [] not null")
	assert.Equal(t, "[]", string(fields["held_inputs"]))

	// Recorded facts show up and drive the derived state.
	f.activate(id)
	assert.Equal(t, "READY", f.session(id, f.member).State)
	f.exec(`INSERT INTO responses (session_id, response_id, origin, started_seq, outcome, native_reason, ended_seq, ended_at)
		VALUES ($1, 'r-old', 'input', 1, 'failed', 'max_tokens', 2, now())`, id)
	f.exec(`INSERT INTO responses (session_id, response_id, origin, started_seq) VALUES ($1, 'r-1', 'engine', 3)`, id)
	f.exec(`UPDATE sessions SET runtime_status = 'working', model_name = 'test-model' WHERE id = $1`, id)
	d = f.session(id, f.member)
	assert.Equal(t, "PROCESSING", d.State)
	require.Len(t, d.CurrentResponses, 1)
	assert.Equal(t, "r-1", d.CurrentResponses[0].ResponseID)
	require.NotNil(t, d.LastResponse)
	assert.Equal(t, "failed", *d.LastResponse.Outcome)
	assert.Equal(t, "max_tokens", *d.LastResponse.NativeReason)
	assert.Equal(t, "test-model", *d.ModelName)
	f.exec(`INSERT INTO interactions (session_id, interaction_id, response_id, contract) VALUES ($1, 'i-1', 'r-1', '{"presentation":"decision"}')`, id)
	d = f.session(id, f.member)
	assert.Equal(t, "WAITING_INPUT", d.State)
	require.NotNil(t, d.PendingInteraction)
	assert.Equal(t, "i-1", d.PendingInteraction.InteractionID)

	// Another user's Session does not exist for them; an administrator may read it.
	f.call("GET", "/api/v1/sessions/"+id, f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", "/api/v1/sessions/"+id, f.admin, nil).ok(t)
	f.call("PATCH", "/api/v1/sessions/"+id, f.other, `{"title":"mine"}`).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("PATCH", "/api/v1/sessions/"+id, f.admin, `{"title":"mine"}`).refused(t, http.StatusForbidden, CodeForbidden)
	f.call("GET", "/api/v1/sessions/not-a-uuid", f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)
}

func TestListSessionsPagesAndOrdersByActivity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ids []string
	for i := range 5 {
		id := f.newSession(f.member)
		// Distinct activity times, oldest first.
		f.exec(`UPDATE sessions SET last_activity_at = now() - make_interval(mins => $2) WHERE id = $1`, id, 10-i)
		ids = append(ids, id)
	}
	f.newSession(f.other)
	newestFirst := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}

	var page sessionPage
	f.call("GET", "/api/v1/sessions?page=1&limit=2", f.member, nil).ok(t).into(t, &page)
	assert.Equal(t, newestFirst[:2], summaryIDs(page.Sessions))
	require.True(t, page.HasMore)
	require.NotNil(t, page.NextCursor)
	var seen []string
	seen = append(seen, summaryIDs(page.Sessions)...)
	for page.HasMore {
		cursor := *page.NextCursor
		page = sessionPage{}
		f.call("GET", "/api/v1/sessions?page=1&limit=2&cursor="+cursor, f.member, nil).ok(t).into(t, &page)
		seen = append(seen, summaryIDs(page.Sessions)...)
	}
	assert.Equal(t, newestFirst, seen)
	assert.Nil(t, page.NextCursor)
	f.call("GET", "/api/v1/sessions?page=2&limit=2", f.member, nil).ok(t).into(t, &page)
	assert.Equal(t, newestFirst[2:4], summaryIDs(page.Sessions))

	var all []sessionSummary
	f.call("GET", "/api/v1/sessions", f.member, nil).ok(t).into(t, &all)
	assert.Equal(t, newestFirst, summaryIDs(all), "without page=1: the unpaged array")

	// Renaming does not move a Session; a finished response does.
	f.call("PATCH", "/api/v1/sessions/"+ids[0], f.member, `{"title":"Release checklist"}`).ok(t)
	f.call("GET", "/api/v1/sessions", f.member, nil).ok(t).into(t, &all)
	assert.Equal(t, newestFirst, summaryIDs(all))
	require.NoError(t, f.st.BumpSessionActivity(f.ctx, ids[1]))
	f.call("GET", "/api/v1/sessions", f.member, nil).ok(t).into(t, &all)
	assert.Equal(t, ids[1], all[0].SessionID)

	// Archived Sessions leave the active list.
	f.call("POST", "/api/v1/sessions/"+ids[2]+"/archive", f.member, nil).ok(t)
	f.call("GET", "/api/v1/sessions", f.member, nil).ok(t).into(t, &all)
	assert.NotContains(t, summaryIDs(all), ids[2])
	f.call("GET", "/api/v1/sessions?archived=true", f.member, nil).ok(t).into(t, &all)
	assert.Equal(t, []string{ids[2]}, summaryIDs(all))
	assert.True(t, all[0].Archived)

	for _, q := range []string{"page=0", "page=x", "limit=0", "limit=101&page=1", "cursor=!!!", "cursor=bm90LWEtY3Vyc29y", "archived=perhaps", "sort=name"} {
		r := f.call("GET", "/api/v1/sessions?"+q, f.member, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest)
		name, _, _ := strings.Cut(q, "=")
		assert.Contains(t, r.Message, name, q)
	}
}

func summaryIDs(list []sessionSummary) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.SessionID
	}
	return out
}

func TestRenameSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	var d sessionDetails
	f.call("PATCH", "/api/v1/sessions/"+id, f.member, map[string]any{"title": "  Release \n\t checklist  \r\n v2 "}).ok(t).into(t, &d)
	assert.Equal(t, "Release checklist v2", *d.Title)
	f.call("PATCH", "/api/v1/sessions/"+id, f.member, map[string]any{"title": strings.Repeat("é", 200)}).ok(t)
	for _, body := range []any{
		map[string]any{"title": " \n "}, map[string]any{"title": strings.Repeat("a", 201)}, map[string]any{},
		map[string]any{"title": 3}, map[string]any{"title": "x", "pinned": true}, "",
	} {
		f.call("PATCH", "/api/v1/sessions/"+id, f.member, body).refused(t, http.StatusBadRequest, CodeInvalidRequest)
	}
	assert.Equal(t, strings.Repeat("é", 200), *f.session(id, f.member).Title, "refused renames changed nothing")
}

func TestPermissionModeAndRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	var d sessionDetails
	f.call("POST", "/api/v1/sessions/"+id+"/permission-mode", f.member, map[string]any{"permission_mode": "acceptEdits"}).ok(t).into(t, &d)
	assert.Equal(t, "acceptEdits", *d.PermissionMode)
	sig := f.signals.named(workflows.UpdateSetPermissionMode)
	require.Len(t, sig, 1)
	assert.Equal(t, workflows.SetPermissionMode{PermissionMode: "acceptEdits"}, sig[0].Payload)
	f.call("POST", "/api/v1/sessions/"+id+"/permission-mode", f.member, map[string]any{"permission_mode": "bypassPermissions"}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "permission_mode")
	f.call("POST", "/api/v1/sessions/"+id+"/permission-mode", f.member, map[string]any{}).refused(t, http.StatusBadRequest, CodeInvalidRequest, "permission_mode")
	assert.Equal(t, "acceptEdits", *f.session(id, f.member).PermissionMode)
	assert.Len(t, f.signals.named(workflows.UpdateSetPermissionMode), 1, "an undeclared mode never reaches the workflow")

	// Unread follows last_output_at against read_at.
	assert.False(t, f.session(id, f.member).Unread)
	f.exec(`UPDATE session_outputs SET last_output_at = now() WHERE session_id = $1`, id)
	assert.True(t, f.session(id, f.member).Unread)
	f.call("POST", "/api/v1/sessions/"+id+"/read", f.member, nil).ok(t).into(t, &d)
	assert.False(t, d.Unread)
	assert.NotNil(t, d.ReadAt)
	f.call("POST", "/api/v1/sessions/"+id+"/read", f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)
}

func TestLifecycleOperations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.activate(id)
	f.exec(`UPDATE sessions SET runtime_status = 'working' WHERE id = $1`, id)
	f.call("POST", "/api/v1/sessions/"+id+"/archive", f.member, nil).refused(t, http.StatusConflict, CodeSessionBusy)
	f.call("DELETE", "/api/v1/sessions/"+id, f.member, nil).refused(t, http.StatusConflict, CodeSessionBusy)
	assert.Empty(t, f.signals.named(workflows.SignalLifecycle))

	// Waiting for an answer is not working.
	f.exec(`UPDATE sessions SET runtime_status = 'waiting' WHERE id = $1`, id)
	var d sessionDetails
	f.call("POST", "/api/v1/sessions/"+id+"/archive", f.member, nil).ok(t).into(t, &d)
	assert.True(t, d.Archived)
	f.call("POST", "/api/v1/sessions/"+id+"/recover", f.member, nil).refused(t, http.StatusConflict, CodeConflict)
	f.exec(`UPDATE sessions SET lifecycle = 'terminated' WHERE id = $1`, id)
	assert.Equal(t, "TERMINATED", f.session(id, f.member).State)
	f.call("POST", "/api/v1/sessions/"+id+"/recover", f.member, nil).ok(t).into(t, &d)
	assert.Equal(t, "CREATING", d.State)
	f.call("DELETE", "/api/v1/sessions/"+id, f.other, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("DELETE", "/api/v1/sessions/"+id, f.member, nil).ok(t).into(t, &d)
	assert.Equal(t, "DELETED", d.State)
	f.call("DELETE", "/api/v1/sessions/"+id, f.member, nil).ok(t)

	var actions []workflows.LifecycleAction
	for _, s := range f.signals.named(workflows.SignalLifecycle) {
		actions = append(actions, s.Payload.(workflows.Lifecycle).Action)
	}
	assert.Equal(t, []workflows.LifecycleAction{workflows.LifecycleArchive, workflows.LifecycleRecover, workflows.LifecycleDelete, workflows.LifecycleDelete}, actions)
	var all []sessionSummary
	f.call("GET", "/api/v1/sessions?archived=true", f.member, nil).ok(t).into(t, &all)
	assert.Empty(t, all, "deleted Sessions leave every list")
	assert.Equal(t, fmt.Sprint("DELETED"), f.session(id, f.member).State)
}

// TestPermissionModeTheProgramRefusesIsReportedNotStored answers the program's refusal
// in its own words, and the Session keeps the mode it had.
func TestPermissionModeTheProgramRefusesIsReportedNotStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.activate(id)
	const said = "Cannot set permission mode to plan: the session was not launched with --allow-plan"
	f.runtime.refuse["plan"] = said
	r := f.call("POST", "/api/v1/sessions/"+id+"/permission-mode", f.member, map[string]any{"permission_mode": "plan"}).
		refused(t, http.StatusConflict, CodePermissionModeRefused, `"plan"`)
	var data struct {
		PermissionMode string `json:"permission_mode"`
		ProgramMessage string `json:"program_message"`
	}
	r.into(t, &data)
	assert.Equal(t, "plan", data.PermissionMode)
	assert.Equal(t, said, data.ProgramMessage)
	d := f.session(id, f.member)
	require.NotNil(t, d.PermissionMode)
	assert.Equal(t, "default", *d.PermissionMode, "the Session keeps the mode it had")
	assert.Equal(t, "READY", d.State, "a refused mode leaves the Session as it was")

	var ok sessionDetails
	f.call("POST", "/api/v1/sessions/"+id+"/permission-mode", f.member, map[string]any{"permission_mode": "acceptEdits"}).ok(t).into(t, &ok)
	assert.Equal(t, "acceptEdits", *ok.PermissionMode, "a mode the program accepts is stored")
}

// TestPermissionModeUnconfirmedOrOfADeletedSession answers 503 when the workflow
// cannot confirm the mode, and refuses a deleted Session before asking it.
func TestPermissionModeUnconfirmedOrOfADeletedSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.signals.modeErr = errors.New("temporal: connection refused")
	r := f.call("POST", "/api/v1/sessions/"+id+"/permission-mode", f.member, map[string]any{"permission_mode": "plan"}).
		refused(t, http.StatusServiceUnavailable, CodeServiceUnavailable, "could not confirm")
	assert.NotContains(t, string(r.Data)+r.Message, "connection refused", "the cause stays in the logs")
	assert.Equal(t, "default", *f.session(id, f.member).PermissionMode)

	f.signals.modeErr = nil
	f.exec("UPDATE sessions SET lifecycle = 'deleted', deleted_at = now() WHERE id = $1", id)
	sent := len(f.signals.named(workflows.UpdateSetPermissionMode))
	f.call("POST", "/api/v1/sessions/"+id+"/permission-mode", f.member, map[string]any{"permission_mode": "plan"}).
		refused(t, http.StatusConflict, CodeConflict)
	assert.Len(t, f.signals.named(workflows.UpdateSetPermissionMode), sent, "a deleted Session's workflow is not asked")
}

// TestATerminatedSessionIsNeverBusy: a Session recorded TERMINATED with a stale
// "working" report and a response still recorded open (as a runtime terminated before
// its settlement left it) answers interrupt with what happens (nothing runs there: no
// signal, "idle"), and can be archived and deleted.
func TestATerminatedSessionIsNeverBusy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.exec(`UPDATE sessions SET lifecycle = 'terminated', runtime_status = 'working' WHERE id = $1`, id)
	f.exec(`INSERT INTO responses (session_id, response_id, origin, started_seq) VALUES ($1, 'r-stale', 'input', 1)`, id)

	var res interruptResult
	f.call("POST", "/api/v1/sessions/"+id+"/interrupt", f.member, nil).ok(t).into(t, &res)
	assert.Equal(t, "idle", res.Status, "no runtime takes the request")
	assert.Empty(t, f.signals.named(workflows.SignalInterrupt))

	var d sessionDetails
	f.call("POST", "/api/v1/sessions/"+id+"/archive", f.member, nil).ok(t).into(t, &d)
	assert.True(t, d.Archived)
	f.call("DELETE", "/api/v1/sessions/"+id, f.member, nil).ok(t).into(t, &d)
	assert.Equal(t, "DELETED", d.State)
}

// TestUnpagedListSaysWhenItIsCut: the unpaged array holds at most 1000 Sessions; a cut
// list says so (X-List-Truncated: true) and names the cursor that continues it in the
// paged form, which reaches every Session.
func TestUnpagedListSaysWhenItIsCut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.newSession(f.member)
	var all []sessionSummary
	r := f.call("GET", "/api/v1/sessions", f.member, nil).ok(t)
	r.into(t, &all)
	assert.Equal(t, "false", r.Header.Get(headerListTruncated))
	assert.Empty(t, r.Header.Get(headerNextCursor))

	f.exec(`INSERT INTO sessions (id, agent_id, user_id, last_activity_at)
		SELECT gen_random_uuid(), agent_id, user_id, last_activity_at - make_interval(secs => n)
		FROM sessions, generate_series(1, 1000) AS n WHERE id = $1`, first)
	r = f.call("GET", "/api/v1/sessions", f.member, nil).ok(t)
	r.into(t, &all)
	require.Len(t, all, maxUnpagedSessions)
	assert.Equal(t, "true", r.Header.Get(headerListTruncated))
	cursor := r.Header.Get(headerNextCursor)
	require.NotEmpty(t, cursor)
	var rest sessionPage
	f.call("GET", "/api/v1/sessions?cursor="+cursor, f.member, nil).ok(t).into(t, &rest)
	require.Len(t, rest.Sessions, 1, "the cursor continues where the array stopped")
	assert.False(t, rest.HasMore)
	assert.NotContains(t, summaryIDs(all), rest.Sessions[0].SessionID)
}
