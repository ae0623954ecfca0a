package pi_test

import (
	"bufio"
	"bytes"
	"context"
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
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/engines/pi"
)

var update = flag.Bool("update", false, "rewrite testdata/*.events.jsonl from the native recordings")

// recording is one native recording of Pi in rpc mode (testdata/native/<case>.*).
type recording struct {
	name    string
	meta    recordingMeta
	journal []engines.OutputLine
	stdin   []string
	session []byte
}

type recordingMeta struct {
	SessionFile string `json:"session_file"`
	Workdir     string `json:"workdir"`
	AgentDir    string `json:"agent_dir"`
}

// loadRecording turns a native recording into what a box would hold: the stdout and
// stderr lines as a journal with offsets counted from 1, and the session file.
func loadRecording(t testing.TB, name string) recording {
	t.Helper()
	dir := filepath.Join("testdata", "native")
	rec := recording{name: name}
	metaRaw, err := os.ReadFile(filepath.Join(dir, name+".meta.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(metaRaw, &rec.meta))
	rec.session, err = os.ReadFile(filepath.Join(dir, name+".session.jsonl"))
	require.NoError(t, err)
	f, err := os.Open(filepath.Join(dir, name+".jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var e struct {
			Dir  string `json:"dir"`
			Line string `json:"line"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		switch e.Dir {
		case "out", "err":
			stream := engines.Stdout
			if e.Dir == "err" {
				stream = engines.Stderr
			}
			rec.journal = append(rec.journal, engines.OutputLine{Offset: int64(len(rec.journal) + 1), Stream: stream, Data: []byte(e.Line)})
		case "in":
			rec.stdin = append(rec.stdin, e.Line)
		}
	}
	require.NoError(t, sc.Err())
	return rec
}

// replayBox is a box holding one recorded journal and session file: the fake ProcessSession
// replays the journal from an offset and then ends, as the recorded process did.
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
	if path != b.rec.meta.SessionFile {
		return nil, fmt.Errorf("open %s: %w", path, os.ErrNotExist)
	}
	return b.rec.session, nil
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

func (b *replayBox) written() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.writes...)
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
func replayClient(t testing.TB, rec recording) (*pi.Client, *replayBox) {
	t.Helper()
	box := &replayBox{rec: rec}
	c, err := pi.NewClient(pi.ClientConfig{Box: box, Process: box, SessionKey: rec.name,
		SessionFile: rec.meta.SessionFile, Capabilities: pi.NewAdapter(pi.Config{}).Capabilities()})
	require.NoError(t, err)
	return c, box
}

// readAll reads every event the recording translates to, until the recorded process ends.
func readAll(t testing.TB, c *pi.Client) []engines.Event {
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
	"plain_text", "two_turns", "reasoning", "tool_call", "approval_allow", "approval_deny", "interrupt_streaming",
	"interrupt_during_tool", "interrupt_while_approval_pending", "interrupt_with_queued_message", "message_while_streaming",
	"message_during_tool", "model_error_400",
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
