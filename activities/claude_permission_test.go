package activities_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// setMode asks the Session's workflow for a permission mode, as the API does.
func (s *stack) setMode(sessionID, mode string) (workflows.PermissionModeSet, error) {
	signaler := &api.TemporalSignaler{Client: s.tc, TaskQueue: s.taskQueue}
	return signaler.SetPermissionMode(s.ctx, sessionID, mode)
}

// answered waits for the response that answers input to end and returns it.
func (s *stack) answered(sessionID, input string) store.Response {
	s.t.Helper()
	var r store.Response
	s.eventually("the response to "+input, func() bool {
		rs, err := s.st.ListResponsesBySession(s.ctx, sessionID)
		require.NoError(s.t, err)
		for _, candidate := range rs {
			var ids []string
			require.NoError(s.t, json.Unmarshal(candidate.InputIDs, &ids))
			if slices.Contains(ids, input) && candidate.Outcome != nil {
				r = candidate
				return true
			}
		}
		return false
	})
	return r
}

func (s *stack) storedMode(sessionID string) string {
	sess := s.session(sessionID)
	if sess.PermissionMode == nil {
		return ""
	}
	return *sess.PermissionMode
}

func (s *stack) requireFile(sessionID, path string, exists bool) {
	s.t.Helper()
	h, err := s.backend.Get(s.ctx, *s.session(sessionID).SandboxID)
	require.NoError(s.t, err)
	defer h.Close()
	_, err = h.ReadFile(s.ctx, path)
	if exists {
		require.NoError(s.t, err, path)
	} else {
		require.Error(s.t, err, path)
	}
}

// TestClaudeCodeRunningSessionSwitchesToEveryPermissionMode: a Session started in
// default is switched to bypassPermissions while Claude Code runs, and a prompt-worthy
// command runs without an approval; back in default the same command asks again.
// Every mode Claude Code declares is applied to the live process and stored.
func TestClaudeCodeRunningSessionSwitchesToEveryPermissionMode(t *testing.T) {
	s := newClaudeStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	_, err := s.st.SetSessionPermissionMode(s.ctx, id, "default")
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *s.answered(id, s.send(id, "hello")).Outcome)

	res, err := s.setMode(id, "bypassPermissions")
	require.NoError(t, err)
	require.True(t, res.Applied, "the running program took the mode")
	require.Equal(t, "bypassPermissions", s.storedMode(id))
	r := s.answered(id, s.send(id, `[[script:bash cmd="touch bypassed.txt"]]`))
	require.Equal(t, store.OutcomeCompleted, *r.Outcome, "no approval held the command")
	s.requireFile(id, "/workspace/bypassed.txt", true)

	for _, mode := range claude.PermissionModes {
		res, err := s.setMode(id, mode)
		require.NoError(t, err, mode)
		require.True(t, res.Applied, mode)
		require.Equal(t, mode, s.storedMode(id))
	}

	res, err = s.setMode(id, "default")
	require.NoError(t, err)
	require.True(t, res.Applied)
	s.send(id, `[[script:bash cmd="touch asked.txt"]]`)
	s.eventually("an approval in default mode", func() bool {
		open, err := s.st.ListOpenInteractions(s.ctx, id)
		require.NoError(t, err)
		return len(open) > 0
	})
	s.requireFile(id, "/workspace/asked.txt", false)
	require.Equal(t, store.LifecycleActive, s.session(id).Lifecycle)
}

// skipPermissionsFlag is what Claude Code needs at launch to switch to bypassPermissions.
const skipPermissionsFlag = "--allow-dangerously-skip-permissions"

// withoutSkipPermissions starts Claude Code as the earlier release did, without the
// flag, through a shell that drops it from the adapter's arguments.
func withoutSkipPermissions(command []string) []string {
	script := `for a do shift; [ "$a" = ` + skipPermissionsFlag + ` ] || set -- "$@" "$a"; done; exec "$@"`
	return append([]string{"/bin/sh", "-c", script, "sh"}, command...)
}

// TestClaudeCodeRefusedPermissionModeNeitherStoredNorTerminating drives a Claude Code
// process that refuses bypassPermissions (launched without the flag, as before this
// release). The refusal reaches the caller in Claude's words and nothing is stored.
// Then the Session is poisoned the way the earlier release did (the mode stored
// although refused) and its worker replaced: the reconnect keeps the runtime, brings
// the stored mode back to the default Claude holds, and the Session keeps working.
func TestClaudeCodeRefusedPermissionModeNeitherStoredNorTerminating(t *testing.T) {
	s := newClaudeStack(t, withoutSkipPermissions)
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()
	_, err := s.st.SetSessionPermissionMode(s.ctx, id, "default")
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *s.answered(id, s.send(id, "hello")).Outcome)

	_, err = s.setMode(id, "bypassPermissions")
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, workflows.ErrPermissionModeRefused, app.Type())
	require.Contains(t, app.Message(), "dangerously-skip-permissions", "Claude's own words")
	require.Equal(t, "default", s.storedMode(id), "a refused mode is not stored")
	require.Equal(t, store.LifecycleActive, s.session(id).Lifecycle)

	_, err = s.st.SetSessionPermissionMode(s.ctx, id, "bypassPermissions")
	require.NoError(t, err)
	stopA()
	s.startWorker("host-b-" + uniq())
	after := s.send(id, "after the reconnect")
	require.Equal(t, store.OutcomeCompleted, *s.answered(id, after).Outcome, "the runtime came back despite the refused mode")
	require.Equal(t, "default", s.storedMode(id), "the stored mode is the one Claude holds")
	sess := s.session(id)
	require.Equal(t, store.LifecycleActive, sess.Lifecycle, "never terminated")
	require.Equal(t, int64(1), sess.RuntimeGeneration, "the same process, reconnected")
}
