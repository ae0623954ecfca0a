package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// needsMore is scriptagent declaring one more required command than its box has,
// until cured, when set, says it no longer does.
type needsMore struct {
	*scriptengine.Adapter
	extra string
	cured *atomic.Bool
}

func (a needsMore) Capabilities() engines.EngineRuntimeCapabilities {
	caps := a.Adapter.Capabilities()
	if a.cured == nil || !a.cured.Load() {
		caps.Workload.RequiredCommands = append(caps.Workload.RequiredCommands, a.extra)
	}
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
	require.Equal(t, store.InputFailed, got.State, "the preparation refused it: it will not run")
	require.Equal(t, store.InputFailurePreparationRefused, *got.FailureCode)
	require.Contains(t, *got.FailureMessage, missing)
	require.Contains(t, s.inputFailedParts(id), in, "the refusal is on the stream")
	s.eventually("TERMINATED in the search attribute", func() bool { return s.searchState(id) == string(store.StateTerminated) })
	s.requireGaplessLog(id)
}

// inputFailedParts returns the input ids the Session's data-input-failed parts name.
func (s *stack) inputFailedParts(sessionID string) []string {
	var out []string
	for _, p := range s.parts(sessionID) {
		var f struct {
			Type string `json:"type"`
			Data struct {
				InputID string `json:"input_id"`
			} `json:"data"`
		}
		require.NoError(s.t, json.Unmarshal(p.Frame, &f))
		if f.Type == "data-input-failed" {
			out = append(out, f.Data.InputID)
		}
	}
	return out
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

// wantsSecret is scriptagent asking for a named platform secret; it hands what its
// startup context carried to the test.
type wantsSecret struct {
	*scriptengine.Adapter
	name string
	got  chan map[string]string
}

func (a wantsSecret) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return engines.EngineStartupMaterialRequest{Secrets: []string{a.name}}
}

func (a wantsSecret) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	select {
	case a.got <- sc.Secrets:
	default:
	}
	return a.Adapter.ActivateRuntime(ctx, sc, box)
}

// TestPlatformSecretsReachTheAdapterAndNoHistory: a platform secret the adapter asks
// for in its StartupMaterialRequest is resolved from the workers' configuration into
// its startup context, and its value is in no workflow history; an unconfigured one
// stops activation and the Session names it (never a value).
func TestPlatformSecretsReachTheAdapterAndNoHistory(t *testing.T) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	value := "sv-" + uniq()
	setup := func(name string) engineSetup {
		return engineSetup{
			kind:    scriptengine.Kind,
			adapter: wantsSecret{Adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"}, name: name, got: make(chan map[string]string, 1)},
			mounts:  []sandbox.Mount{{Source: binDir, Target: agentMount}},
			secrets: map[string]string{"search_token": value},
		}
	}

	good := setup("search_token")
	s := newStackWith(t, good)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	s.waitEnded(id, "resp-"+s.send(id, "quick"))
	require.Equal(t, map[string]string{"search_token": value}, <-good.adapter.(wantsSecret).got)
	hist := s.tc.GetWorkflowHistory(s.ctx, workflows.SessionWorkflowID(id), "", false, 0)
	for hist.HasNext() {
		ev, err := hist.Next()
		require.NoError(t, err)
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		require.NotContains(t, string(raw), value)
	}

	bad := setup("absent_token")
	s2 := newStackWith(t, bad)
	s2.startWorker("host-b-" + uniq())
	id2 := s2.newSession()
	s2.send(id2, "quick")
	s2.eventually("the Session to be terminated", func() bool { return s2.session(id2).Lifecycle == store.LifecycleTerminated })
	require.Contains(t, *s2.session(id2).RuntimeError, "absent_token")
}

// requireRuntimeInfo reads the Session's runtime-info snapshot and checks what every
// activation records: the current box, the runner's build and the adapter's version;
// it also checks the workflow's memo carries the snapshot's line.
func (s *stack) requireRuntimeInfo(sessionID string) activities.RuntimeInfo {
	s.t.Helper()
	sess := s.session(sessionID)
	var info activities.RuntimeInfo
	require.NoError(s.t, json.Unmarshal(sess.RuntimeInfo, &info), "runtime_info: %s", sess.RuntimeInfo)
	require.Equal(s.t, *sess.SandboxID, info.SandboxID)
	require.NotEmpty(s.t, info.RunnerBuild)
	require.Contains(s.t, info.AdapterVersion, "engine contract v")
	desc, err := s.tc.DescribeWorkflowExecution(s.ctx, workflows.SessionWorkflowID(sessionID), "")
	require.NoError(s.t, err)
	field, ok := desc.WorkflowExecutionInfo.GetMemo().GetFields()[workflows.MemoRuntime]
	require.True(s.t, ok, "the workflow memo has %s", workflows.MemoRuntime)
	var line string
	require.NoError(s.t, converter.GetDefaultDataConverter().FromPayload(field, &line))
	require.Contains(s.t, line, "runner "+info.RunnerBuild)
	return info
}

// TestActivationSavesTheRuntimeInfoSnapshot: each activation saves what ran (runner
// build, adapter version, box) on the Session and in the workflow's memo, and a
// replacement box replaces the snapshot.
func TestActivationSavesTheRuntimeInfoSnapshot(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	s.waitEnded(id, "resp-"+s.send(id, "quick"))
	first := s.requireRuntimeInfo(id)
	require.Nil(t, first.RuntimeVersions, "scriptagent declares no server info")

	require.NoError(t, s.backend.Destroy(s.ctx, first.SandboxID))
	s.eventually("a reply from a new box", func() bool {
		next := s.send(id, "quick")
		r := s.waitEnded(id, "resp-"+next)
		return *r.Outcome == store.OutcomeCompleted
	})
	second := s.requireRuntimeInfo(id)
	require.NotEqual(t, first.SandboxID, second.SandboxID)
	require.True(t, second.ObservedAt.After(first.ObservedAt))
}

// TestPlatformSecretsNeverEnterALog: with every worker log line kept at debug level,
// the value of a platform secret the adapter asked for appears in no log line, no
// workflow history event and no file the box backend keeps (box records, box logs,
// process journals), through a reply, a box destroyed under the Session and its
// restore; the log does say a Session ran, so the check reads real output.
func TestPlatformSecretsNeverEnterALog(t *testing.T) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	value := "sv-" + uniq()
	var logs bytes.Buffer
	adapter := wantsSecret{Adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"}, name: "search_token", got: make(chan map[string]string, 2)}
	s := newStackWith(t, engineSetup{
		kind: scriptengine.Kind, adapter: adapter,
		mounts:  []sandbox.Mount{{Source: binDir, Target: agentMount}},
		secrets: map[string]string{"search_token": value},
		logs:    &logs,
	})
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	s.waitEnded(id, "resp-"+s.send(id, "quick"))
	require.NoError(t, s.backend.Destroy(s.ctx, *s.session(id).SandboxID))
	s.eventually("a reply from a new box", func() bool {
		r := s.waitEnded(id, "resp-"+s.send(id, "quick"))
		return *r.Outcome == store.OutcomeCompleted
	})
	require.Equal(t, value, (<-adapter.got)["search_token"])

	require.Contains(t, logs.String(), id, "the worker logged the Session")
	require.NotContains(t, logs.String(), value, "worker logs")
	hist := s.tc.GetWorkflowHistory(s.ctx, workflows.SessionWorkflowID(id), "", false, 0)
	for hist.HasNext() {
		ev, err := hist.Next()
		require.NoError(t, err)
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		require.NotContains(t, string(raw), value, "workflow history")
	}
	files := 0
	require.NoError(t, filepath.WalkDir(s.stateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // a box being removed, a socket
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		files++
		require.NotContains(t, string(data), value, "box backend file %s", p)
		return nil
	}))
	require.NotZero(t, files, "the backend's files were read")
}

// TestSharedTenancyIsRefusedWhereTheBackendCannotIsolate: a RuntimeProfile stored with
// shared sandbox tenancy (the API refuses to save one for this backend; this one
// predates a change) stops the Session before any box is made, saying why, and its
// input stays in custody.
func TestSharedTenancyIsRefusedWhereTheBackendCannotIsolate(t *testing.T) {
	s := newStack(t)
	profile, err := s.st.CreateRuntimeProfile(s.ctx, store.NewRuntimeProfile{Name: "shared-" + uniq(), EngineKind: scriptengine.Kind,
		Enabled: true, SandboxBackend: store.SandboxLocal, SandboxTenancy: store.TenancyShared})
	require.NoError(t, err)
	s.agent, err = s.st.CreateAgent(s.ctx, store.NewAgent{Name: "a-" + uniq(), EngineKind: scriptengine.Kind, RuntimeProfileID: profile.ID})
	require.NoError(t, err)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	in := s.send(id, "quick")
	s.eventually("the Session to be terminated", func() bool { return s.session(id).Lifecycle == store.LifecycleTerminated })
	sess := s.session(id)
	require.Contains(t, *sess.RuntimeError, `shared sandbox tenancy, but the sandbox backend "local" cannot isolate conversations in one box`)
	require.Nil(t, sess.SandboxID, "no box was made")
	got, err := s.st.GetInputByID(s.ctx, in)
	require.NoError(t, err)
	require.NotEqual(t, store.InputAdmitted, got.State)
}

// configDirProbe is scriptagent whose activation first runs a probe process as the
// runtime identity, without setting any environment itself, and reports what the
// engine's configuration-directory variable held in it.
type configDirProbe struct {
	*scriptengine.Adapter
	seen chan string
}

func (a configDirProbe) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	env := a.Capabilities().Workload.ConfigDirEnv
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: "probe-" + uniq(), Identity: sc.RuntimeIdentity,
		Command: []string{"/bin/sh", "-c", `printf '%s\n' "$` + env + `"`}})
	if err != nil {
		return engines.SessionRuntime{}, err
	}
	for line, err := range proc.ReadOutput(ctx, 0, true) {
		if err != nil {
			return engines.SessionRuntime{}, err
		}
		select {
		case a.seen <- string(line.Data):
		default:
		}
		break
	}
	return a.Adapter.ActivateRuntime(ctx, sc, box)
}

// TestTheProgramFindsItsConfigDirectoryFromItsConfigDirVariable: a process the
// adapter starts as the runtime identity has the engine's Workload.ConfigDirEnv set
// to <home>/<ConfigDirName>, the directory the platform mirrors the session log from.
func TestTheProgramFindsItsConfigDirectoryFromItsConfigDirVariable(t *testing.T) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	adapter := configDirProbe{Adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"}, seen: make(chan string, 1)}
	s := newStackWith(t, engineSetup{kind: scriptengine.Kind, adapter: adapter,
		mounts: []sandbox.Mount{{Source: binDir, Target: agentMount}}})
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	s.waitEnded(id, "resp-"+s.send(id, "quick"))
	require.Equal(t, "/workspace/.home/.scriptagent", <-adapter.seen)
}
