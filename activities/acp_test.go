package activities_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/store"
)

// Where boxes see the ACP programs (a folder named node_modules, where Node looks for
// their packages) and the programs two of them drive.
const (
	acpModulesMount = "/opt/acp/node_modules"
	acpClaudeMount  = "/opt/acp-claude"
	acpCodexMount   = "/opt/acp-codex"
	acpDSHMount     = "/opt/dsh"
)

// The model APIs the shipped ACP programs speak.
const (
	apiAnthropic = "anthropic"
	apiOpenAI    = "openai"
	apiGemini    = "gemini"
)

// installs are the pinned programs' folders as boxes see them.
type installs struct {
	acp acp.Install
	dsh acp.DSHInstall
}

// The shipped ACP profiles, each from the installs it runs.
func shipped(profile func(acp.Install) acp.Profile) func(installs) acp.Profile {
	return func(in installs) acp.Profile { return profile(in.acp) }
}

func deepSeekHarness(in installs) acp.Profile { return acp.DeepSeekHarnessProfile(in.dsh) }

// acpProgram is a shipped ACP program as the stack runs it: its profile from the
// installs, and the model API it speaks.
type acpProgram struct {
	kind    string
	profile func(installs) acp.Profile
	api     string
}

// shippedACPPrograms are the six ACP programs the platform ships.
var shippedACPPrograms = []acpProgram{
	{acp.KindClaude, shipped(acp.ClaudeProfile), apiAnthropic},
	{acp.KindCodex, shipped(acp.CodexProfile), apiOpenAI},
	{acp.KindQwen, shipped(acp.QwenProfile), apiOpenAI},
	{acp.KindOpencode, shipped(acp.OpencodeProfile), apiOpenAI},
	{acp.KindGemini, shipped(acp.GeminiProfile), apiGemini},
	{acp.KindDeepSeekHarness, deepSeekHarness, apiOpenAI},
}

// newACPStack runs one shipped ACP program in local boxes, every pinned install bound
// in as the platform binds them, reaching the in-process scripted model, which speaks
// api, through the host-side credential proxy.
func newACPStack(t *testing.T, profile func(installs) acp.Profile, api string) (*stack, *devmodel.Server, acp.Profile) {
	t.Helper()
	root, err := agentbin.Root()
	require.NoError(t, err)
	inst, err := agentbin.LocateACP(root)
	require.NoError(t, err, "run `make deps-acp-agents`")
	claudeProg, err := agentbin.Locate(root, agentbin.Claude)
	require.NoError(t, err, "run `make deps-agents`")
	codexProg, err := agentbin.Locate(root, agentbin.Codex)
	require.NoError(t, err, "run `make deps-agents`")
	codexRel, err := filepath.Rel(codexProg.Dir, codexProg.Command[0])
	require.NoError(t, err)
	dsh, err := agentbin.LocateDSH(root)
	require.NoError(t, err, "run `make deps-dsh`")
	dshNode, err := filepath.Rel(dsh.Root, dsh.Node)
	require.NoError(t, err)
	model := devmodel.New(devmodel.Options{SlowDelay: 100 * time.Millisecond})
	require.NoError(t, model.Start(context.Background(), "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	p := profile(installs{
		acp: acp.Install{Node: inst.Node, Modules: acpModulesMount, Opencode: filepath.Join(acpModulesMount, inst.Opencode),
			ClaudeCode: filepath.Join(acpClaudeMount, filepath.Base(claudeProg.Command[0])), Codex: filepath.Join(acpCodexMount, codexRel)},
		dsh: acp.DSHInstall{Node: filepath.Join(acpDSHMount, dshNode), Root: acpDSHMount},
	})
	baseURL := fmt.Sprintf("http://127.0.0.1:%d", activities.ModelForwardPort)
	header := map[string]string{"x-api-key": "sk-host-side"}
	switch api {
	case apiOpenAI:
		baseURL += "/v1"
		header = map[string]string{"Authorization": "Bearer sk-host-side"}
	case apiGemini:
		// The Gemini SDK adds /v1beta to the base URL itself.
		header = map[string]string{"x-goog-api-key": "sk-host-side"}
	}
	adapter, err := acp.NewAdapter(acp.Config{Profile: p, ModelBaseURL: baseURL})
	require.NoError(t, err)
	return newStackWith(t, engineSetup{
		kind: p.Kind, adapter: adapter,
		mounts: []sandbox.Mount{{Source: inst.Modules, Target: acpModulesMount}, {Source: claudeProg.Dir, Target: acpClaudeMount},
			{Source: codexProg.Dir, Target: acpCodexMount}, {Source: dsh.Root, Target: acpDSHMount}},
		egress: map[string]egress.Route{activities.ModelForwardName: {Upstream: model.URL(), Headers: header}},
	}), model, p
}

// TestACPProgramsHoldAConversation runs a two-message conversation with each shipped
// ACP program (DeepSeek Harness included) through the Session workflow: both inputs admitted and answered, the
// second answer built on the first; for a program whose transcript the platform
// mirrors, a third message after its box was removed, in the same ACP session; for
// opencode, whose state is a database, a third message after its idle box was
// released, the database saved and restored through the runtime-state storage.
func TestACPProgramsHoldAConversation(t *testing.T) {
	for _, tc := range shippedACPPrograms {
		t.Run(tc.kind, func(t *testing.T) {
			s, model, profile := newACPStack(t, tc.profile, tc.api)
			if len(profile.StateFiles) > 0 {
				// Its box is released when idle, so its state goes through the
				// platform's runtime-state storage (below).
				s.startWorkerWith("host-a-"+uniq(), activities.Settings{HeartbeatEvery: time.Second, IdleRelease: 2 * time.Second})
			} else {
				s.startWorker("host-a-" + uniq())
			}
			id := s.newSession()
			first := s.send(id, "remember the word PINEAPPLE")
			s.eventually("the first answer", func() bool { return s.admittedAndIdle(id, first) && s.answerEnded(id, first) })
			second := s.send(id, "which word?")
			s.eventually("the second answer", func() bool { return s.admittedAndIdle(id, second) && s.answerEnded(id, second) })
			last, err := s.st.GetLastEndedResponse(s.ctx, id)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeCompleted, *last.Outcome)
			require.True(t, anyContains(model.Requests(), "which word?", "PINEAPPLE"), "the model saw the first message with the second")
			if profile.SessionLog != "" {
				// The box removed: the next message reopens the same ACP session in a
				// new box from its mirrored and restored session log.
				before := s.session(id)
				require.NoError(t, s.backend.Destroy(s.ctx, *before.SandboxID))
				third := s.send(id, "and in the new box?")
				s.eventually("the answer in a new box", func() bool { return s.admittedAndIdle(id, third) && s.answerEnded(id, third) })
				after := s.session(id)
				require.NotEqual(t, *before.SandboxID, *after.SandboxID)
				require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same ACP session")
				require.True(t, anyContains(model.Requests(), "and in the new box?", "PINEAPPLE"), "the model saw the earlier turns in the new box")
			}
			if len(profile.StateFiles) > 0 {
				// opencode keeps its sessions in a SQLite database, not a transcript:
				// before the idle box is released the client stops the program and
				// saves the database into the platform's runtime-state storage; the
				// next message starts a new box, where the adapter writes it back
				// before opencode reopens the same session.
				before := s.session(id)
				s.eventually("the idle box to be released", func() bool { return s.session(id).RuntimeUnavailable })
				blob, err := s.st.GetRuntimeStateBlob(s.ctx, "session", id, "acp-state")
				require.NoError(t, err, "the database was saved before the release")
				require.Contains(t, string(blob.Data), "opencode.db")
				third := s.send(id, "and in the new box?")
				s.eventually("the answer in a new box", func() bool { return s.admittedAndIdle(id, third) && s.answerEnded(id, third) })
				after := s.session(id)
				require.NotEqual(t, *before.SandboxID, *after.SandboxID)
				require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same opencode session")
				require.True(t, anyContains(model.Requests(), "and in the new box?", "PINEAPPLE"), "the model saw the earlier turns in the new box")
			}
			s.requireGaplessLog(id)
		})
	}
}

// anyContains reports whether one request holds both strings (programs send side
// requests, such as titles, after the conversation's own).
func anyContains(reqs []devmodel.Request, a, b string) bool {
	for _, r := range reqs {
		if bytes.Contains(r.Body, []byte(a)) && bytes.Contains(r.Body, []byte(b)) {
			return true
		}
	}
	return false
}
