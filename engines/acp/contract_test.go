package acp_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/uicheck"
)

var shippedKinds = []string{acp.KindClaude, acp.KindCodex, acp.KindGemini, acp.KindQwen, acp.KindOpencode}

func TestAdapterContract(t *testing.T) {
	for _, kind := range shippedKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			enginetest.RunAdapterContract(t, shippedAdapter(t, kind))
		})
	}
}

// TestShippedProfilesRegister registers every shipped profile in one registry, each
// under its own engine_kind.
func TestShippedProfilesRegister(t *testing.T) {
	t.Parallel()
	reg := engines.NewRegistry()
	for _, kind := range shippedKinds {
		require.NoError(t, reg.Register(kind, shippedAdapter(t, kind)))
	}
	require.Error(t, reg.Register(acp.KindClaude, shippedAdapter(t, acp.KindClaude)), "a kind registers once")
	caps := shippedAdapter(t, acp.KindClaude).Capabilities()
	require.Equal(t, "CLAUDE_CONFIG_DIR", caps.Workload.ConfigDirEnv)
	require.Equal(t, "projects/*/{engine_session_key}.jsonl", caps.SessionLog.PathPattern)
	require.Empty(t, shippedAdapter(t, acp.KindOpencode).Capabilities().PermissionModes, "opencode offers no session modes")

	// Agent configuration: what a profile declares is accepted, the rest refused on save.
	require.Equal(t, "CLAUDE.md", caps.Extensions.InstructionsFile)
	withServer := engines.AgentConfig{Instructions: "Be brief.", MCPServers: []engines.MCPServerConfig{
		{Name: "files", Transport: engines.MCPTransportStdio, Command: []string{"node", "server.mjs"}}}}
	require.NoError(t, engines.ValidateAgentConfigFor(caps, withServer))
	require.NoError(t, engines.ValidateAgentConfigFor(shippedAdapter(t, acp.KindCodex).Capabilities(), withServer))
	require.Error(t, engines.ValidateAgentConfigFor(shippedAdapter(t, acp.KindQwen).Capabilities(), withServer), "qwen declares neither")
	sse := engines.AgentConfig{MCPServers: []engines.MCPServerConfig{{Name: "old", Transport: engines.MCPTransportSSE, URL: "http://127.0.0.1:1/sse"}}}
	require.Error(t, engines.ValidateAgentConfigFor(caps, sse), "sse is not declared")
}

// TestProfileValidation refuses profiles the adapter cannot run, naming what is wrong.
func TestProfileValidation(t *testing.T) {
	t.Parallel()
	good := acp.Profile{Kind: "my-agent", Command: []string{"my-agent", "--acp"}, ModelKeyEnv: "OPENAI_API_KEY",
		StateDir: ".my-agent", Busy: acp.BusyQueued, Admission: acp.AdmissionPromptReply, Resume: acp.ResumeLoad}
	require.NoError(t, good.Validate())
	for name, tc := range map[string]struct {
		edit func(*acp.Profile)
		want string
	}{
		"kind":         {func(p *acp.Profile) { p.Kind = "My Agent" }, "kind"},
		"command":      {func(p *acp.Profile) { p.Command = nil }, "command"},
		"state dir":    {func(p *acp.Profile) { p.StateDir = "../etc" }, "state_dir"},
		"model key":    {func(p *acp.Profile) { p.ModelKeyEnv = "" }, "model_key_env"},
		"default mode": {func(p *acp.Profile) { p.Modes, p.DefaultMode = []string{"a"}, "b" }, "default_mode"},
		"busy":         {func(p *acp.Profile) { p.Busy = "sometimes" }, "busy"},
		"admission":    {func(p *acp.Profile) { p.Admission = "" }, "admission"},
		"resume":       {func(p *acp.Profile) { p.Resume = "restart" }, "resume"},
		"session log":  {func(p *acp.Profile) { p.SessionLog = "log.jsonl" }, "session_log"},
		"files":        {func(p *acp.Profile) { p.Files = map[string]string{"/etc/passwd": ""} }, "files"},
		"mcp":          {func(p *acp.Profile) { p.MCPTransports = []engines.MCPTransport{"websocket"} }, "mcp_transports"},
		"instructions": {func(p *acp.Profile) { p.InstructionsFile = "../AGENTS.md" }, "instructions_file"},
	} {
		p := good
		tc.edit(&p)
		err := p.Validate()
		var invalid *engines.ValidationError
		require.ErrorAs(t, err, &invalid, name)
		require.True(t, invalid.HasField(tc.want), "%s: %v", name, err)
		_, err = acp.NewAdapter(acp.Config{Profile: p})
		require.Error(t, err, "an adapter refuses the profile: %s", name)
	}
}

// TestRuntimeClientContract runs the structural suite and the connected checks over a
// client replaying each native recording.
func TestRuntimeClientContract(t *testing.T) {
	for _, kind := range recordedKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			enginetest.RunRuntimeClientContract(t, reflect.TypeFor[*acp.Client](),
				enginetest.WithCapabilities(shippedAdapter(t, kind).Capabilities()),
				enginetest.WithConnectedClient(func(tb testing.TB) engines.RuntimeClient {
					c, _ := replayClient(tb, loadRecording(tb, kind))
					return c
				}))
		})
	}
}

// TestTranslateRecordings compares each recording's translation with its golden.
func TestTranslateRecordings(t *testing.T) {
	for _, kind := range recordedKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c, _ := replayClient(t, loadRecording(t, kind))
			events := readAll(t, c)
			golden := filepath.Join("testdata", kind+".events.jsonl")
			if *update {
				var buf bytes.Buffer
				require.NoError(t, enginetest.WriteRecording(&buf, events))
				require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
			}
			want := enginetest.MustLoadRecording(t, golden)
			require.Equal(t, len(want), len(events), "event count differs from %s (run with -update and review)", golden)
			for i := range want {
				got, err := engines.MarshalEvent(events[i])
				require.NoError(t, err)
				exp, err := engines.MarshalEvent(want[i])
				require.NoError(t, err)
				require.JSONEq(t, string(exp), string(got), "event %d", i)
			}
			for i, ev := range events {
				require.NoError(t, ev.Validate(), "event %d", i)
			}
		})
	}
}

// TestCursorDeterminismOnRecordings reads every recording again from every cursor.
func TestCursorDeterminismOnRecordings(t *testing.T) {
	for _, kind := range recordedKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c, _ := replayClient(t, loadRecording(t, kind))
			events := readAll(t, c)
			enginetest.CheckCursorDeterminism(t, events, c.Events, 0)
			enginetest.CheckClientCursorDeterminism(t, c, len(events), 0)
		})
	}
}

// TestFramesAreValidForTheAIClient validates every recording's parts with the real `ai`
// client: one message per response, in order.
func TestFramesAreValidForTheAIClient(t *testing.T) {
	for _, kind := range recordedKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c, _ := replayClient(t, loadRecording(t, kind))
			var frames []engines.Frame
			var order []string
			for _, ev := range readAll(t, c) {
				out, ok := ev.(engines.ResponseOutput)
				if !ok {
					continue
				}
				require.NotEmpty(t, out.ResponseID)
				if !slices.Contains(order, out.ResponseID) {
					order = append(order, out.ResponseID)
				}
				frames = append(frames, out.Frame)
			}
			report := uicheck.RequireValidChunks(t, frames)
			require.Len(t, report.Messages, len(order))
			for i, id := range order {
				require.Equal(t, id, report.Messages[i].ID)
			}
		})
	}
}

// TestTranslationFacts checks what each recording shows: every prompt answered and
// admitted once, response ids minted from the session and the prompt sequence, the
// cancel, the permission request answered and its option chosen by kind.
func TestTranslationFacts(t *testing.T) {
	for _, kind := range recordedKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			rec := loadRecording(t, kind)
			c, proc := replayClient(t, rec)
			events := readAll(t, c)
			var started []engines.ResponseStarted
			var ended []engines.ResponseEnded
			admitted := map[string]int{}
			var opened []engines.InteractionOpened
			var closed []engines.InteractionClosed
			for _, ev := range events {
				switch e := ev.(type) {
				case engines.ResponseStarted:
					started = append(started, e)
				case engines.ResponseEnded:
					ended = append(ended, e)
				case engines.InputAdmitted:
					admitted[e.InputID]++
				case engines.InteractionOpened:
					opened = append(opened, e)
				case engines.InteractionClosed:
					closed = append(closed, e)
				}
			}
			for id, n := range admitted {
				require.Equal(t, 1, n, "input %s admitted once", id)
			}
			require.Len(t, admitted, 4, "four prompts: two (one while busy), a cancelled one, one asking permission")
			require.Regexp(t, `^resp_`+rec.meta.SessionID+`:[0-9a-f]+:1$`, started[0].ResponseID, "the first prompt's response id")
			outcomes := map[engines.ResponseOutcome]int{}
			for _, e := range ended {
				outcomes[e.Outcome]++
			}
			require.GreaterOrEqual(t, outcomes[engines.OutcomeCancelled], 1, "the cancel ends a response cancelled")
			// A profile declaring usage reports it on every completed response (Gemini
			// CLI's from its reply's _meta.quota); one that does not, on none.
			reportsUsage := shippedAdapter(t, kind).Profile().ReportsUsage
			for _, e := range ended {
				if e.Outcome == engines.OutcomeCompleted {
					require.Equal(t, reportsUsage, len(e.Usage) > 0, "usage of %s: %s", e.ResponseID, e.Usage)
				}
			}
			require.Len(t, opened, 1)
			require.Len(t, closed, 1)
			require.Equal(t, engines.ClosureAnswered, closed[0].Reason)

			// Answering again replays the journal: the closed interaction is accepted
			// without a second write; an unknown one is not open.
			require.NoError(t, c.Answer(t.Context(), opened[0].InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}))
			require.ErrorIs(t, c.Answer(t.Context(), "nope", engines.InteractionAnswer{Decision: engines.DecisionApprove}), engines.ErrInteractionNotOpen)
			for _, w := range proc.written() {
				require.NotContains(t, w, "answer:", "nothing is written for an answer already given")
			}
		})
	}
}

// TestServerInfoFromInitialize reads each recorded program's name and version from its
// initialize reply: the pinned release.
func TestServerInfoFromInitialize(t *testing.T) {
	pinned := map[string]string{acp.KindClaude: agentbin.ClaudeACPVersion, acp.KindCodex: agentbin.CodexACPVersion,
		acp.KindQwen: agentbin.QwenVersion, acp.KindOpencode: agentbin.OpencodeVersion, acp.KindGemini: agentbin.GeminiVersion,
		// DeepSeek Harness answers initialize through the project's ACP bridge, which
		// reports its own version (tools/dsh/acp-bridge/index.js).
		acp.KindDeepSeekHarness: "0.0.1-rc.1+astrabox.1"}
	for _, kind := range recordedKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c, _ := replayClient(t, loadRecording(t, kind))
			info, err := c.ServerInfo(t.Context())
			require.NoError(t, err)
			require.NoError(t, info.Validate())
			comp := info.RuntimeVersions.Components[0]
			require.NotNil(t, comp.Version, "%+v", comp)
			require.Equal(t, pinned[kind], *comp.Version)
		})
	}
}

// TestLoadWaitsForALaterMinute: a program that loses a session loaded within its start
// minute (Gemini CLI) is loaded only in a later minute; with the start unknown, the
// wait runs to the next minute, later than any start before now.
func TestLoadWaitsForALaterMinute(t *testing.T) {
	t.Parallel()
	at := func(hhmmss string) time.Time {
		ts, err := time.Parse(time.TimeOnly, hhmmss)
		require.NoError(t, err)
		return ts
	}
	require.Equal(t, 41*time.Second, acp.LaterMinuteWait(at("12:00:20"), at("12:00:05")), "same minute: to the next one, and a second")
	require.Zero(t, acp.LaterMinuteWait(at("12:01:00"), at("12:00:59")), "already a later minute")
	require.Zero(t, acp.LaterMinuteWait(at("13:30:00"), at("12:00:05")))
	require.Equal(t, 31*time.Second, acp.LaterMinuteWait(at("12:00:30"), time.Time{}), "start unknown: to the next minute")
	require.True(t, acp.GeminiProfile(acp.Install{}).LoadAfterStartMinute)
}
