package activities_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// needsMore is scriptagent declaring one more required command than its box has.
type needsMore struct {
	*scriptengine.Adapter
	extra string
}

func (a needsMore) Capabilities() engines.EngineRuntimeCapabilities {
	caps := a.Adapter.Capabilities()
	caps.Workload.RequiredCommands = append(caps.Workload.RequiredCommands, a.extra)
	return caps
}

// TestMissingRequiredCommandStopsActivationAndTheSessionSaysWhy: a command the engine
// declares in Workload.RequiredCommands and the box lacks fails activation before the
// program starts; the Session ends TERMINATED with the command named in its
// runtime_error, and the input stays in custody, never admitted.
func TestMissingRequiredCommandStopsActivationAndTheSessionSaysWhy(t *testing.T) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	missing := "astrabox-absent-" + uniq()
	s := newStackWith(t, engineSetup{
		kind:    scriptengine.Kind,
		adapter: needsMore{Adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"}, extra: missing},
		mounts:  []sandbox.Mount{{Source: binDir, Target: agentMount}},
	})
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	in := s.send(id, "quick")
	s.eventually("the Session to be terminated", func() bool { return s.session(id).Lifecycle == store.LifecycleTerminated })
	sess := s.session(id)
	require.NotNil(t, sess.RuntimeError)
	require.Contains(t, *sess.RuntimeError, missing)
	require.NotContains(t, *sess.RuntimeError, "scriptagent,", "the commands the box has are not named")
	got, err := s.st.GetInputByID(s.ctx, in)
	require.NoError(t, err)
	require.NotEqual(t, store.InputAdmitted, got.State)
}

// TestTheProgramLearnsItsWorkspaceFromItsWorkingDirectoryVariable: the variable the
// engine's sandbox request names (WorkingDirectoryVariable) holds the box's
// workspace in every process of the box, the program's included.
func TestTheProgramLearnsItsWorkspaceFromItsWorkingDirectoryVariable(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	s.waitEnded(id, "resp-"+s.send(id, "quick"))

	h, err := s.backend.Get(s.ctx, *s.session(id).SandboxID)
	require.NoError(t, err)
	defer h.Close()
	variable := (&scriptengine.Adapter{}).SandboxRequest().WorkingDirectoryVariable
	res, err := h.Exec(s.ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", `printf %s "$` + variable + `"`}})
	require.NoError(t, err)
	require.Equal(t, "/workspace", string(res.Stdout))
}
