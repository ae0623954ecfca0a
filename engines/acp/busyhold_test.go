package acp_test

import (
	"bytes"
	"context"
	"iter"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
)

// echoProcess is a process session whose journal grows as a program's would: what the
// client writes is echoed into it (stdin-echo), and the test appends the program's lines.
type echoProcess struct {
	mu      sync.Mutex
	changed chan struct{}
	lines   []engines.OutputLine
	writes  []string
	ended   bool
}

func newEchoProcess() *echoProcess { return &echoProcess{changed: make(chan struct{})} }

func (p *echoProcess) Name() string { return acp.KindDeepSeekHarness + "-new-0a1b2c3d" }

func (p *echoProcess) appendLine(data string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, engines.OutputLine{Offset: int64(len(p.lines) + 1), Stream: engines.Stdout, Data: []byte(data)})
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *echoProcess) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *echoProcess) WriteStdin(_ context.Context, writeID string, data []byte) error {
	p.mu.Lock()
	for _, w := range p.writes {
		if w == writeID {
			p.mu.Unlock()
			return nil
		}
	}
	p.writes = append(p.writes, writeID)
	p.mu.Unlock()
	p.appendLine(`{"astrabox_sent":` + string(bytes.TrimSpace(data)) + `}`)
	return nil
}

func (p *echoProcess) written() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.writes...)
}

func (p *echoProcess) ReadOutput(ctx context.Context, offset int64, follow bool) iter.Seq2[engines.OutputLine, error] {
	return func(yield func(engines.OutputLine, error) bool) {
		next := 0
		for {
			p.mu.Lock()
			lines, changed, ended := p.lines[next:], p.changed, p.ended
			next = len(p.lines)
			p.mu.Unlock()
			for _, l := range lines {
				if l.Offset >= offset && !yield(l, nil) {
					return
				}
			}
			if !follow || ended {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}
}

func (p *echoProcess) Signal(context.Context, string) error { return nil }

func (p *echoProcess) ExitStatus(context.Context) (*engines.ExitStatus, error) { return nil, nil }

// waitWritten waits until the process received n writes.
func (p *echoProcess) waitWritten(t *testing.T, n int) []string {
	t.Helper()
	for {
		p.mu.Lock()
		got, changed := len(p.writes), p.changed
		p.mu.Unlock()
		if got >= n {
			return p.written()
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("waiting for %d writes: %v", n, p.written())
		case <-changed:
		}
	}
}

// TestRefusedBusyPromptIsHeldThenDelivered: for a program that refuses a prompt while one
// runs (DeepSeek Harness's bridge), the client writes no second prompt until the first
// is answered; the held input is reported queued, a repeated submit changes nothing, and
// the held prompt is written right after the first reply, then answered and admitted.
func TestRefusedBusyPromptIsHeldThenDelivered(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	proc := newEchoProcess()
	t.Cleanup(proc.end)
	c := acp.ConnectForTest(shippedAdapter(t, acp.KindDeepSeekHarness), proc, "sess-1")

	require.NoError(t, c.Submit(ctx, engines.TextInput("in-1", "first")))
	require.NoError(t, c.Submit(ctx, engines.TextInput("in-2", "second")))
	require.NoError(t, c.Submit(ctx, engines.TextInput("in-2", "second")), "submit is idempotent")
	require.Equal(t, []string{"prompt:in-1"}, proc.written(), "the second prompt is held while the first runs")
	st, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"in-1", "in-2"}, st.QueuedInputIDs, "the first sent and not started, the second held")

	proc.appendLine(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"one"}}}}`)
	proc.appendLine(`{"jsonrpc":"2.0","id":"prompt:in-1","result":{"stopReason":"end_turn"}}`)
	require.Equal(t, []string{"prompt:in-1", "prompt:in-2"}, proc.waitWritten(t, 2), "delivered once the first is answered")
	proc.appendLine(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"two"}}}}`)
	proc.appendLine(`{"jsonrpc":"2.0","id":"prompt:in-2","result":{"stopReason":"end_turn"}}`)

	st, err = c.State(ctx)
	require.NoError(t, err)
	require.Empty(t, st.QueuedInputIDs)
	require.Equal(t, []string{"in-1", "in-2"}, st.AdmittedInputIDs)
	var ended []string
	for ev, err := range c.Events(ctx, nil) {
		require.NoError(t, err)
		if e, ok := ev.(engines.ResponseEnded); ok {
			require.Equal(t, engines.OutcomeCompleted, e.Outcome)
			ended = append(ended, e.ResponseID)
		}
		if len(ended) == 2 {
			break
		}
	}
	require.Len(t, ended, 2, "each prompt has its own response")
	require.NotEqual(t, ended[0], ended[1])

	// A refusal the program sends anyway (a prompt written behind a running one) admits
	// nothing and starts no response.
	refused, _ := replayClient(t, syntheticRecording(acp.KindDeepSeekHarness,
		strings.ReplaceAll(sentPrompt, "in-1", "a"), strings.ReplaceAll(sentPrompt, "in-1", "b"),
		`{"jsonrpc":"2.0","id":"prompt:b","error":{"code":-32602,"message":"Invalid params: a prompt is already in flight for this session"}}`,
		`{"jsonrpc":"2.0","id":"prompt:a","result":{"stopReason":"end_turn"}}`))
	st, err = refused.State(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, st.AdmittedInputIDs, "the refused prompt is not admitted")
	var diags []string
	for _, ev := range readAll(t, refused) {
		if d, ok := ev.(engines.RuntimeDiagnostic); ok {
			diags = append(diags, d.EventType)
		}
	}
	require.Contains(t, diags, "prompt_refused_busy")
}
