package claude_test

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/enginetest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.events.jsonl from the native recordings")

// recording is one native recording of Claude Code (testdata/native/<case>.*).
type recording struct {
	name       string
	meta       recordingMeta
	journal    []engines.OutputLine
	stdin      []string
	transcript []byte
}

type recordingMeta struct {
	SessionID      string `json:"session_id"`
	Workdir        string `json:"workdir"`
	ConfigDir      string `json:"config_dir"`
	TranscriptPath string `json:"transcript_path"`
}

// loadRecording turns a native recording into what a box would hold: the stdout and
// stderr lines as a journal with offsets counted from 1, and the transcript file.
func loadRecording(t testing.TB, name string) recording {
	t.Helper()
	dir := filepath.Join("testdata", "native")
	rec := recording{name: name}
	metaRaw, err := os.ReadFile(filepath.Join(dir, name+".meta.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(metaRaw, &rec.meta))
	rec.transcript, err = os.ReadFile(filepath.Join(dir, name+".transcript.jsonl"))
	require.NoError(t, err)
	rec.journal, rec.stdin = enginetest.ReadNativeJournal(t, filepath.Join(dir, name+".jsonl"))
	return rec
}

// replayBox is a box holding one recorded journal and transcript: the fake
// ProcessSession replays the journal from an offset and then ends, as the recorded
// process did.
type replayBox struct {
	rec recording

	mu     sync.Mutex
	writes []string
}

func (b *replayBox) ID() string { return "replay-" + b.rec.name }

func (b *replayBox) StartProcess(context.Context, engines.ProcessSpec) (engines.ProcessSession, error) {
	return b, nil
}

func (b *replayBox) ReadFile(_ context.Context, _ *engines.RuntimeIdentity, path string) ([]byte, error) {
	if path != b.rec.meta.TranscriptPath {
		return nil, fmt.Errorf("open %s: %w", path, os.ErrNotExist)
	}
	return b.rec.transcript, nil
}

func (b *replayBox) WriteFile(context.Context, *engines.RuntimeIdentity, string, []byte, uint32) error {
	return errors.New("the replay box is read-only")
}

func (b *replayBox) DialPort(context.Context, int) (net.Conn, error) {
	return nil, errors.New("the replay box publishes no port")
}

func (b *replayBox) Name() string { return "replay-" + b.rec.name }

func (b *replayBox) WriteStdin(_ context.Context, writeID string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes = append(b.writes, writeID+" "+string(bytes.TrimSpace(data)))
	return nil
}

func (b *replayBox) ReadOutput(ctx context.Context, offset int64, _ bool) iter.Seq2[engines.OutputLine, error] {
	return func(yield func(engines.OutputLine, error) bool) {
		for _, l := range b.rec.journal {
			if l.Offset < offset {
				continue
			}
			if ctx.Err() != nil || !yield(l, nil) {
				return
			}
		}
	}
}

func (b *replayBox) Signal(context.Context, string) error { return nil }

func (b *replayBox) ExitStatus(context.Context) (*engines.ExitStatus, error) {
	return &engines.ExitStatus{Code: 0}, nil
}

var (
	_ engines.Box            = (*replayBox)(nil)
	_ engines.ProcessSession = (*replayBox)(nil)
)

// replayClient connects a runtime client to a recording.
func replayClient(t testing.TB, rec recording) (*claude.Client, *replayBox) {
	t.Helper()
	box := &replayBox{rec: rec}
	c, err := claude.NewClient(claude.ClientConfig{Box: box, Process: box, SessionID: "session-" + rec.name,
		ClaudeSession: rec.meta.SessionID, TranscriptPath: rec.meta.TranscriptPath,
		Capabilities: claude.NewAdapter(claude.Config{}).Capabilities()})
	require.NoError(t, err)
	return c, box
}

// readAll reads every event the recording translates to, until the recorded process ends.
func readAll(t testing.TB, c *claude.Client) []engines.Event {
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
	"plain_text", "tool_call", "thinking", "write_file", "approval_allow", "approval_deny",
	"interrupt_streaming", "interrupt_during_tool", "queued_while_streaming", "message_during_tool",
	"model_error_400", "rate_limit_retry", "stream_error", "stream_dropped", "subagent", "interrupt_while_approval_pending", "write_file_update",
	"parallel_prompts", "parallel_prompts_while_streaming", "parallel_prompts_during_tool",
}

// TestTranslateNativeRecordings replays each native recording through the runtime
// client and compares the events with the reviewed golden file.
func TestTranslateNativeRecordings(t *testing.T) {
	for _, name := range nativeCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := loadRecording(t, name)
			require.Equal(t, rec.meta.TranscriptPath, claude.TranscriptPath(rec.meta.ConfigDir, rec.meta.Workdir, rec.meta.SessionID),
				"the client finds Claude's transcript where Claude wrote it")
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

func claudeUUID() string {
	b := make([]byte, 16)
	_, _ = cryptorand.Read(b)
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	h := fmt.Sprintf("%x", b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
