package claude_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/uicheck"
)

func TestAdapterContract(t *testing.T) {
	t.Parallel()
	enginetest.RunAdapterContract(t, claude.NewAdapter(claude.Config{}))
}

func TestRegistersInARegistry(t *testing.T) {
	t.Parallel()
	reg := engines.NewRegistry()
	require.NoError(t, reg.Register(claude.EngineKind, claude.NewAdapter(claude.Config{})))
	require.Error(t, reg.Register(claude.EngineKind, claude.NewAdapter(claude.Config{})), "a second Claude Code adapter is refused")
	caps := claude.NewAdapter(claude.Config{}).Capabilities()
	require.Equal(t, []string{"default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"}, caps.PermissionModes)
	require.Equal(t, "CLAUDE_CONFIG_DIR", caps.Workload.ConfigDirEnv)
	require.True(t, caps.RequiresProcessSessions)
	require.Equal(t, engines.PlacementPerConversationAccount, caps.ConversationPlacement)
}

func TestSettingsProtectedKeysAreRefused(t *testing.T) {
	t.Parallel()
	reg := engines.NewRegistry()
	require.NoError(t, reg.Register(claude.EngineKind, claude.NewAdapter(claude.Config{})))
	doc, ok := claude.NewAdapter(claude.Config{}).Capabilities().Extensions.ConfigDocument("settings.json")
	require.True(t, ok)
	require.Contains(t, doc.ProtectedKeys, "permissions", "the managed policy channel stays the platform's")
}

// TestRuntimeClientContract runs the structural suite and the connected checks over a
// client replaying a native recording.
func TestRuntimeClientContract(t *testing.T) {
	t.Parallel()
	caps := claude.NewAdapter(claude.Config{}).Capabilities()
	enginetest.RunRuntimeClientContract(t, reflect.TypeFor[*claude.Client](),
		enginetest.WithCapabilities(caps),
		enginetest.WithConnectedClient(func(tb testing.TB) engines.RuntimeClient {
			c, _ := replayClient(tb, loadRecording(tb, "plain_text"))
			return c
		}))
}

// TestCursorDeterminismOnRecordings reads every recording again from every cursor.
func TestCursorDeterminismOnRecordings(t *testing.T) {
	for _, name := range nativeCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, _ := replayClient(t, loadRecording(t, name))
			recording := readAll(t, c)
			enginetest.CheckCursorDeterminism(t, recording, c.Events, 0)
			enginetest.CheckClientCursorDeterminism(t, c, len(recording), 0)
		})
	}
}

// TestFramesAreValidForTheAIClient validates every recording's parts with the real `ai`
// client and checks that the browser assembles one message per response.
func TestFramesAreValidForTheAIClient(t *testing.T) {
	for _, name := range nativeCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, _ := replayClient(t, loadRecording(t, name))
			var inResponses, outside []engines.Frame
			var order []string
			for _, ev := range readAll(t, c) {
				out, ok := ev.(engines.ResponseOutput)
				switch {
				case !ok:
				case out.ResponseID == "":
					outside = append(outside, out.Frame)
				default:
					if !slices.Contains(order, out.ResponseID) {
						order = append(order, out.ResponseID)
					}
					inResponses = append(inResponses, out.Frame)
				}
			}
			// Responses never overlap, so the stream holds each as one UI message.
			report := uicheck.RequireValidChunks(t, inResponses)
			require.Len(t, report.Messages, len(order))
			for i, id := range order {
				require.Equal(t, id, report.Messages[i].ID)
			}
			if len(outside) > 0 {
				// Child-run parts outside any response (a background sub-agent) are
				// data parts that belong to no message.
				uicheck.RequireValidChunks(t, outside)
			}
		})
	}
}

// TestTranslationFacts checks the facts each recording exists to show.
func TestTranslationFacts(t *testing.T) {
	t.Parallel()
	events := func(name string) []engines.Event {
		c, _ := replayClient(t, loadRecording(t, name))
		return readAll(t, c)
	}
	ofType := func(evs []engines.Event, typ engines.EventType) []engines.Event {
		return slices.DeleteFunc(slices.Clone(evs), func(e engines.Event) bool { return e.Type() != typ })
	}

	// Two inputs consumed before one result belong to one response.
	absorbed := events("message_during_tool")
	ended := ofType(absorbed, engines.EventResponseEnded)
	require.Len(t, ended, 1)
	started := ofType(absorbed, engines.EventResponseStarted)
	require.Len(t, started[len(started)-1].(engines.ResponseStarted).InputIDs, 2)
	require.Len(t, ofType(absorbed, engines.EventInputAdmitted), 2, "the absorbed input is admitted by its queued_command record")

	// A message queued while text streams runs as its own response.
	require.Len(t, ofType(events("queued_while_streaming"), engines.EventResponseEnded), 2)

	// Endings keep Claude's own words.
	last := func(name string) engines.ResponseEnded {
		e := ofType(events(name), engines.EventResponseEnded)
		return e[0].(engines.ResponseEnded)
	}
	require.Equal(t, engines.OutcomeCancelled, last("interrupt_streaming").Outcome)
	require.Equal(t, "aborted_streaming", last("interrupt_streaming").NativeReason)
	require.Equal(t, "aborted_tools", last("interrupt_during_tool").NativeReason)
	failed := last("model_error_400")
	require.Equal(t, engines.OutcomeFailed, failed.Outcome)
	require.Equal(t, "api_error", failed.NativeReason)
	require.Contains(t, failed.Error.Message, "400")
	require.Contains(t, string(failed.Usage), "total_cost_usd")

	// Approvals open and close as Claude reports them.
	allow := events("approval_allow")
	require.Len(t, ofType(allow, engines.EventInteractionOpened), 1)
	closed := ofType(allow, engines.EventInteractionClosed)
	require.Len(t, closed, 1)
	require.Equal(t, engines.ClosureAnswered, closed[0].(engines.InteractionClosed).Reason)

	// An interrupt while Claude waits withdraws the approval (control_cancel_request).
	withdrawn := ofType(events("interrupt_while_approval_pending"), engines.EventInteractionClosed)
	require.Len(t, withdrawn, 1)
	require.Equal(t, engines.ClosureWithdrawn, withdrawn[0].(engines.InteractionClosed).Reason)

	// A Write reports the change Claude confirmed.
	var fileChanges int
	for _, ev := range events("write_file") {
		if out, ok := ev.(engines.ResponseOutput); ok && out.Frame.Type() == "data-file-changes" {
			fileChanges++
		}
	}
	require.Equal(t, 1, fileChanges)
	var formats []engines.DiffFormat
	for _, ev := range events("write_file_update") {
		if out, ok := ev.(engines.ResponseOutput); ok && out.Frame.Type() == "data-file-changes" {
			raw, _ := out.Frame.Field("data")
			var d engines.FileChangesData
			require.NoError(t, json.Unmarshal(raw, &d))
			formats = append(formats, d.Changes[0].Diff.Format)
		}
	}
	require.Equal(t, []engines.DiffFormat{engines.DiffContentPair, engines.DiffHunks}, formats,
		"a created file carries its content, an update Claude's structured patch")

	// A background sub-agent is a child run from Claude's task lines, and the turn
	// Claude starts on its own when it finishes is an engine response.
	var statuses []string
	var childMessages int
	sub := events("subagent")
	for _, ev := range sub {
		out, ok := ev.(engines.ResponseOutput)
		if !ok || out.Frame.Type() != "data-subagent" {
			continue
		}
		raw, _ := out.Frame.Field("data")
		var d engines.SubagentData
		require.NoError(t, json.Unmarshal(raw, &d))
		if d.Run != nil {
			statuses = append(statuses, d.Run.Status)
			require.Equal(t, "Look around", d.Run.Title)
		}
		if d.Message != nil {
			childMessages++
			require.Contains(t, string(d.Message.Parts), "Scripted reply to: say hello from the sub-agent")
		}
	}
	require.Equal(t, []string{"running", "completed"}, statuses)
	require.Equal(t, 1, childMessages)
	subStarts := ofType(sub, engines.EventResponseStarted)
	require.Len(t, subStarts, 2)
	require.Equal(t, engines.OriginEngine, subStarts[1].(engines.ResponseStarted).Origin)
}

// TestAbandonedAttemptIsRetracted checks that a reply Claude streams, abandons on a
// broken model stream and asks for again is displayed once: the abandoned attempt's
// preview is withdrawn (an error event, then a request without streaming; a dropped
// connection, then a streamed retry), and a confirmed block an interrupt keeps is not.
func TestAbandonedAttemptIsRetracted(t *testing.T) {
	for _, tc := range []struct {
		name, shown, withdrawn string
	}{
		{"stream_error", "Whole reply after the retry.", "Half a reply"},
		{"stream_dropped", "Whole reply after the retry.", "Half a reply"},
		{"interrupt_streaming", "Slow chunk 1 of 100. ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := replayClient(t, loadRecording(t, tc.name))
			var first []engines.Frame
			var firstID string
			for _, ev := range readAll(t, c) {
				out, ok := ev.(engines.ResponseOutput)
				if !ok || (firstID != "" && out.ResponseID != firstID) {
					continue
				}
				firstID = out.ResponseID
				first = append(first, out.Frame)
			}
			texts := func(r uicheck.Report) []string {
				require.Len(t, r.Messages, 1)
				var out []string
				for _, p := range r.Messages[0].PartsOfType("text") {
					out = append(out, p["text"].(string))
				}
				return out
			}
			logged := texts(uicheck.RequireValidChunks(t, first))
			shown := texts(uicheck.RequireValidChunks(t, engines.OmitRetracted(first)))
			require.Equal(t, []string{tc.shown}, shown, "the displayed message has the reply once")
			if tc.withdrawn == "" {
				require.Equal(t, shown, logged, "nothing Claude kept is withdrawn")
				return
			}
			require.Equal(t, []string{tc.withdrawn, tc.shown}, logged, "the log keeps the abandoned attempt for replay")
		})
	}
}

// TestStateFromTheJournal checks the runtime's account a new reader reconciles from.
func TestStateFromTheJournal(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _ := replayClient(t, loadRecording(t, "approval_allow"))
	st, err := c.State(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Validate())
	require.Equal(t, engines.StatusIdle, st.Status)
	require.Empty(t, st.OpenResponses)
	require.Empty(t, st.PendingInteractions)
	require.Equal(t, []engines.ClosedInteraction{{InteractionID: "d59e046e-e855-4ee6-a237-c77d35f97474", Reason: engines.ClosureAnswered}}, st.ClosedInteractions)
	require.Contains(t, st.AdmittedInputIDs, "2d6429a5-6e6b-4048-957f-60a360a839b5")
	require.NotNil(t, st.Cursor)
	// Reading after the state's cursor yields nothing more: the journal is translated.
	n := 0
	for ev, err := range c.Events(ctx, st.Cursor) {
		if err != nil {
			require.ErrorIs(t, err, engines.ErrRuntimeConnectionLost)
			break
		}
		n++
		_ = ev
	}
	require.Zero(t, n)

	// A cursor from another process is expired.
	other := *st.Cursor
	other.Generation = "claude-other/" + c.EngineSessionKey()
	for _, err := range c.Events(ctx, &other) {
		require.ErrorIs(t, err, engines.ErrRuntimeCursorExpired)
		break
	}
}
