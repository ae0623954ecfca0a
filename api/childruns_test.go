package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// stoppingEngine declares child-run stop support; testEngine does not.
const stoppingEngine = "stopping"

// newStoppingSession starts a member's Session of an Agent whose engine can stop
// child runs.
func (f *fixture) newStoppingSession() string {
	f.t.Helper()
	caps := testCaps(stoppingEngine, engines.SessionKindAgentChat)
	caps.SupportsChildRunStop = true
	require.NoError(f.t, f.registry.Register(stoppingEngine, &testAdapter{caps: caps}))
	profile, err := f.st.CreateRuntimeProfile(f.ctx, store.NewRuntimeProfile{Name: "stopping-profile", EngineKind: stoppingEngine, Enabled: true, SandboxBackend: store.SandboxLocal})
	require.NoError(f.t, err)
	mode := "default"
	agent, err := f.st.CreateAgent(f.ctx, store.NewAgent{Name: "delegator", EngineKind: stoppingEngine, RuntimeProfileID: profile.ID, PermissionMode: &mode, CreatedBy: &f.adminID})
	require.NoError(f.t, err)
	var created createdSession
	f.call("POST", "/api/v1/agents/"+agent.ID+"/conversations", f.member, "{}").ok(f.t).into(f.t, &created)
	return created.SessionID
}

// addChildRun records a child run as the program would have reported it.
func (f *fixture) addChildRun(sessionID, nativeRef, status string, controlRef *string) string {
	f.t.Helper()
	id := engines.ChildRunID(sessionID, nativeRef)
	f.exec(`INSERT INTO child_runs (id, session_id, native_ref, name, status, control_ref) VALUES ($1, $2, $3, 'explore', $4, $5)`,
		id, sessionID, nativeRef, status, controlRef)
	return id
}

func TestStopChildRunSignalsTheWorkflow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newStoppingSession()
	ref := "ctl-1"
	running := f.addChildRun(id, "native-1", "running", &ref)
	stopPath := func(sessionID, childID string) string {
		return "/api/v1/sessions/" + sessionID + "/child-runs/" + childID + "/stop"
	}

	var runs []childRunView
	f.call("GET", "/api/v1/sessions/"+id+"/child-runs", f.member, nil).ok(t).into(t, &runs)
	require.Len(t, runs, 1)
	assert.True(t, runs[0].Stoppable)

	var res stopChildRunResult
	f.call("POST", stopPath(id, running), f.member, nil).ok(t).into(t, &res)
	assert.Equal(t, stopChildRunResult{Status: "accepted", ChildRunID: running}, res)
	sig := f.signals.named(workflows.SignalStopChildRun)
	require.Len(t, sig, 1)
	assert.Equal(t, id, sig[0].SessionID)
	assert.Equal(t, workflows.StopChildRun{ChildRunID: running}, sig[0].Payload)

	// The status changes only when the program reports it.
	got, err := f.st.GetChildRunByID(f.ctx, id, running)
	require.NoError(t, err)
	assert.Equal(t, "running", got.Status)
}

func TestStopChildRunRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newStoppingSession()
	ref := "ctl-2"
	noRef := f.addChildRun(id, "native-2", "running", nil)
	ended := f.addChildRun(id, "native-3", "completed", &ref)
	running := f.addChildRun(id, "native-4", "running", &ref)
	plain := f.newSession(f.member) // its engine does not declare child-run stop
	unsupported := f.addChildRun(plain, "native-5", "running", &ref)
	stop := func(sessionID, childID, token string) reply {
		return f.call("POST", "/api/v1/sessions/"+sessionID+"/child-runs/"+childID+"/stop", token, nil)
	}

	stop(id, noRef, f.member).refused(t, http.StatusConflict, CodeConflict)
	stop(id, ended, f.member).refused(t, http.StatusConflict, CodeConflict)
	stop(plain, unsupported, f.member).refused(t, http.StatusConflict, CodeConflict)
	stop(id, "cr_missing", f.member).refused(t, http.StatusNotFound, CodeNotFound)
	stop(plain, running, f.member).refused(t, http.StatusNotFound, CodeNotFound) // a child run of another Session
	stop(id, running, f.other).refused(t, http.StatusNotFound, CodeNotFound)
	stop(id, running, f.admin).refused(t, http.StatusForbidden, CodeForbidden)
	assert.Empty(t, f.signals.named(workflows.SignalStopChildRun), "a refused stop reaches no workflow")

	var runs []childRunView
	f.call("GET", "/api/v1/sessions/"+id+"/child-runs", f.member, nil).ok(t).into(t, &runs)
	stoppable := map[string]bool{}
	for _, r := range runs {
		stoppable[r.ChildRunID] = r.Stoppable
	}
	assert.Equal(t, map[string]bool{noRef: false, ended: false, running: true}, stoppable)

	// A released box or an archived Session took its child runs with it.
	f.exec(`UPDATE sessions SET runtime_unavailable = true WHERE id = $1`, id)
	stop(id, running, f.member).refused(t, http.StatusConflict, CodeConflict)
	f.exec(`UPDATE sessions SET runtime_unavailable = false, archived_at = now() WHERE id = $1`, id)
	stop(id, running, f.member).refused(t, http.StatusConflict, CodeConflict)
	assert.Empty(t, f.signals.named(workflows.SignalStopChildRun))
}
