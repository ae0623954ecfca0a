package acp_test

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

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/sandbox/enginebox"
)

var (
	update = flag.Bool("update", false, "rewrite testdata/<kind>.events.jsonl from the native recordings")
	record = flag.Bool("record", false, "the live tests write their program's journal to testdata/native/<kind>.jsonl")
)

// recordedKinds are the profiles with a native recording in testdata/native.
var recordedKinds = []string{acp.KindClaude, acp.KindCodex, acp.KindQwen, acp.KindOpencode, acp.KindGemini, acp.KindDeepSeekHarness}

// journalLine is one line of a native recording: the journal as the box kept it.
type journalLine struct {
	Offset int64  `json:"offset"`
	Stream string `json:"stream"`
	Data   string `json:"data"`
}

// recordingMeta names the process and session a recording comes from: the generation
// and the response ids derive from them.
type recordingMeta struct {
	Process   string `json:"process"`
	SessionID string `json:"session_id"`
}

// writeRecording writes the client's whole journal as the box holds it: the first
// lines are the meta, then one line per journal line.
func writeRecording(t *testing.T, ctx context.Context, box *enginebox.Box, c *acp.Client) {
	t.Helper()
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: c.ProcessName(), Command: []string{"/bin/false"}})
	require.NoError(t, err)
	var buf bytes.Buffer
	meta, _ := json.Marshal(recordingMeta{Process: c.ProcessName(), SessionID: c.EngineSessionKey()})
	buf.Write(append(meta, '\n'))
	for line, err := range proc.ReadOutput(ctx, 0, false) {
		require.NoError(t, err)
		raw, _ := json.Marshal(journalLine{Offset: line.Offset, Stream: string(line.Stream), Data: string(line.Data)})
		buf.Write(append(raw, '\n'))
	}
	require.NoError(t, os.MkdirAll(filepath.Join("testdata", "native"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join("testdata", "native", c.EngineKind()+".jsonl"), buf.Bytes(), 0o644))
}

// recording is a loaded native recording.
type recording struct {
	kind    string
	meta    recordingMeta
	journal []engines.OutputLine
}

func loadRecording(t testing.TB, kind string) recording {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "native", kind+".jsonl"))
	require.NoError(t, err, "run `make record-acp`")
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	rec := recording{kind: kind}
	require.True(t, sc.Scan())
	require.NoError(t, json.Unmarshal(sc.Bytes(), &rec.meta))
	for sc.Scan() {
		var l journalLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		rec.journal = append(rec.journal, engines.OutputLine{Offset: l.Offset, Stream: engines.OutputStream(l.Stream), Data: []byte(l.Data)})
	}
	require.NoError(t, sc.Err())
	return rec
}

// replayProcess is a process session holding one recorded journal: it replays it from
// an offset and then ends, as the recorded process did; writes are kept.
type replayProcess struct {
	rec recording

	mu     sync.Mutex
	writes []string
}

func (p *replayProcess) Name() string { return p.rec.meta.Process }

func (p *replayProcess) WriteStdin(_ context.Context, writeID string, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes = append(p.writes, writeID+" "+string(bytes.TrimSpace(data)))
	return nil
}

func (p *replayProcess) written() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.writes...)
}

func (p *replayProcess) ReadOutput(ctx context.Context, offset int64, _ bool) iter.Seq2[engines.OutputLine, error] {
	return func(yield func(engines.OutputLine, error) bool) {
		for _, l := range p.rec.journal {
			if l.Offset < offset {
				continue
			}
			if ctx.Err() != nil || !yield(l, nil) {
				return
			}
		}
	}
}

func (p *replayProcess) Signal(context.Context, string) error { return nil }

func (p *replayProcess) ExitStatus(context.Context) (*engines.ExitStatus, error) {
	return &engines.ExitStatus{Code: 0}, nil
}

// replayBox is a box whose one process is the recording.
type replayBox struct{ proc *replayProcess }

func (b replayBox) ID() string { return "replay-" + b.proc.rec.kind }
func (b replayBox) StartProcess(context.Context, engines.ProcessSpec) (engines.ProcessSession, error) {
	return b.proc, nil
}
func (b replayBox) ReadFile(_ context.Context, _ *engines.RuntimeIdentity, path string) ([]byte, error) {
	return nil, fmt.Errorf("open %s: %w", path, os.ErrNotExist)
}
func (b replayBox) WriteFile(context.Context, *engines.RuntimeIdentity, string, []byte, uint32) error {
	return errors.New("the replay box is read-only")
}
func (b replayBox) DialPort(context.Context, int) (net.Conn, error) {
	return nil, errors.New("the replay box publishes no port")
}

var (
	_ engines.Box            = replayBox{}
	_ engines.ProcessSession = (*replayProcess)(nil)
)

// shippedAdapter is the adapter of a shipped profile, with install paths as a box sees them.
func shippedAdapter(t testing.TB, kind string) *acp.Adapter {
	t.Helper()
	in := acp.Install{Node: "/usr/bin/node", Modules: acpMount, ClaudeCode: claudeMount + "/claude", Codex: codexMount + "/bin/codex",
		Opencode: acpMount + "/opencode-linux-x64/bin/opencode"}
	profiles := map[string]func(acp.Install) acp.Profile{acp.KindClaude: acp.ClaudeProfile, acp.KindCodex: acp.CodexProfile,
		acp.KindGemini: acp.GeminiProfile, acp.KindQwen: acp.QwenProfile, acp.KindOpencode: acp.OpencodeProfile,
		acp.KindDeepSeekHarness: func(acp.Install) acp.Profile { return acp.DeepSeekHarnessProfile(dshInBox) }}
	a, err := acp.NewAdapter(acp.Config{Profile: profiles[kind](in), ModelBaseURL: "http://127.0.0.1:18080"})
	require.NoError(t, err)
	return a
}

// replayClient connects a runtime client to a recording, as a reconnecting reader does.
func replayClient(t testing.TB, rec recording) (*acp.Client, *replayProcess) {
	t.Helper()
	proc := &replayProcess{rec: rec}
	c := acp.ConnectForTest(shippedAdapter(t, rec.kind), proc, rec.meta.SessionID)
	return c, proc
}

// readAll reads every event of a client's journal.
func readAll(t testing.TB, c engines.RuntimeClient) []engines.Event {
	t.Helper()
	var out []engines.Event
	for ev, err := range c.Events(context.Background(), nil) {
		if errors.Is(err, engines.ErrRuntimeConnectionLost) {
			break
		}
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}
