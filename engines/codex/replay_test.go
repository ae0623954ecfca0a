package codex_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/codex"
	"github.com/astrabox/astrabox/engines/enginetest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.events.jsonl from the native recordings")

// recording is one native recording of the Codex app-server (testdata/native/<case>.*).
type recording struct {
	name    string
	meta    recordingMeta
	journal []engines.OutputLine
	stdin   []string
	rollout []byte
}

type recordingMeta struct {
	ThreadID    string `json:"thread_id"`
	RolloutPath string `json:"rollout_path"`
	Workdir     string `json:"workdir"`
	CodexHome   string `json:"codex_home"`
}

// loadRecording turns a native recording into what a box would hold: the stdout and
// stderr lines as a journal with offsets counted from 1, and the rollout file.
func loadRecording(t testing.TB, name string) recording {
	t.Helper()
	dir := filepath.Join("testdata", "native")
	rec := recording{name: name}
	metaRaw, err := os.ReadFile(filepath.Join(dir, name+".meta.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(metaRaw, &rec.meta))
	rec.rollout, err = os.ReadFile(filepath.Join(dir, name+".rollout.jsonl"))
	require.NoError(t, err)
	rec.journal, rec.stdin = enginetest.ReadNativeJournal(t, filepath.Join(dir, name+".jsonl"))
	return rec
}

// replayClient connects a runtime client to a recording.
func replayClient(t testing.TB, rec recording) (*codex.Client, *enginetest.ReplayBox) {
	t.Helper()
	box := enginetest.NewReplayBox("replay-"+rec.name, rec.journal, map[string][]byte{rec.meta.RolloutPath: rec.rollout})
	c, err := codex.NewClient(codex.ClientConfig{Box: box, Process: box, ThreadID: rec.meta.ThreadID,
		RolloutPath: rec.meta.RolloutPath, Capabilities: codex.NewAdapter(codex.Config{}).Capabilities()})
	require.NoError(t, err)
	return c, box
}

// readAll reads every event the recording translates to, until the recorded process ends.
func readAll(t testing.TB, c *codex.Client) []engines.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []engines.Event
	for ev, err := range c.Events(ctx, nil) {
		if err != nil {
			require.ErrorIs(t, err, engines.ErrRuntimeConnectionLost, "the replay ends when the recorded process ended")
			break
		}
		out = append(out, ev)
	}
	require.NoError(t, ctx.Err())
	return out
}

var nativeCases = []string{
	"plain_text", "reasoning", "command", "file_change", "approval_accept", "approval_decline", "approval_file_change",
	"interrupt_streaming", "interrupt_during_tool", "interrupt_while_approval_pending", "message_while_streaming",
	"message_during_tool", "model_error_400", "mcp_elicitation_accept", "mcp_elicitation_decline", "mcp_elicitation_disallowed", "request_user_input",
	"request_permissions",
}

// TestTranslateNativeRecordings replays each native recording through the runtime
// client and compares the events with the reviewed golden file.
func TestTranslateNativeRecordings(t *testing.T) {
	for _, name := range nativeCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := loadRecording(t, name)
			c, _ := replayClient(t, rec)
			events := readAll(t, c)
			golden := filepath.Join("testdata", name+".events.jsonl")
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
