package devmodel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/agentrun"
	"github.com/astrabox/astrabox/internal/devmodel"
)

// locate finds a pinned program or fails with how to install it.
func locate(t *testing.T, name string) agentbin.Program {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a real Agent program; skipped under -short")
	}
	root, err := agentbin.Root()
	require.NoError(t, err)
	prog, err := agentbin.Locate(root, name)
	require.NoError(t, err, "the pinned %s is needed: run `make deps-agents`", name)
	return prog
}

func dumpOnFailure(t *testing.T, proc *agentrun.Process) {
	t.Cleanup(func() {
		proc.Kill()
		if t.Failed() {
			for _, l := range proc.Lines() {
				t.Logf("%s %6dms %s", l.Dir, l.Offset.Milliseconds(), truncate(l.Text, 600))
			}
		}
	})
}

// piTurn sends a prompt and returns the text of the last assistant message once
// the agent run ends.
func piTurn(t *testing.T, ctx context.Context, proc *agentrun.Process, id, text string) (stopReason, reply string) {
	t.Helper()
	from := len(proc.Lines())
	require.NoError(t, proc.Send(map[string]any{"id": id, "type": "prompt", "message": text}))
	_, end, err := proc.WaitLine(ctx, from, agentrun.IsPiType("agent_end"))
	require.NoError(t, err)
	for _, l := range proc.Lines()[from:end] {
		e, ok := agentrun.ParsePiLine(l)
		if !ok || e.Type != "message_end" {
			continue
		}
		var msg struct {
			Role       string `json:"role"`
			StopReason string `json:"stopReason"`
			Content    []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		require.NoError(t, json.Unmarshal(e.Message, &msg))
		if msg.Role != "assistant" {
			continue
		}
		stopReason, reply = msg.StopReason, ""
		for _, c := range msg.Content {
			if c.Type == "text" {
				reply += c.Text
			}
		}
	}
	return stopReason, reply
}

func TestPiRPCTextAndBashTool(t *testing.T) {
	t.Parallel()
	prog := locate(t, agentbin.Pi)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startServer(t)
	base := t.TempDir()
	cfg := agentrun.PiConfig{Command: prog.Command, BaseURL: srv.URL() + "/v1",
		Home: filepath.Join(base, "home"), AgentDir: filepath.Join(base, "pi-agent"), Workdir: filepath.Join(base, "work"),
		SessionFile: filepath.Join(base, "sessions", "session.jsonl")}
	for _, dir := range []string{cfg.Home, cfg.Workdir, filepath.Dir(cfg.SessionFile)} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
	}
	spec, err := agentrun.PiSpec(cfg)
	require.NoError(t, err)
	proc, err := agentrun.Start(ctx, spec)
	require.NoError(t, err)
	dumpOnFailure(t, proc)

	stop, reply := piTurn(t, ctx, proc, "c1", "hello pi")
	require.Equal(t, "stop", stop)
	require.Equal(t, "Scripted reply to: hello pi", reply)

	marker := filepath.Join(cfg.Workdir, "pi-marker.txt")
	stop, reply = piTurn(t, ctx, proc, "c2", `[[script:bash cmd="echo pi-ran > `+marker+` && echo finished"]]`)
	require.Equal(t, "stop", stop)
	require.Equal(t, "Tool finished: finished", reply)
	data, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.Equal(t, "pi-ran\n", string(data))
	require.Equal(t, "bash", srv.Requests()[1].ToolCall)
	require.Equal(t, devmodel.APIOpenAIChat, srv.Requests()[1].API)

	stop, reply = piTurn(t, ctx, proc, "c3", `[[script:error status=429 times=1 retry_after=0 text="pi retried"]]`)
	require.Equal(t, "stop", stop)
	require.Equal(t, "pi retried", reply)
	reqs := srv.Requests()
	require.Equal(t, http.StatusTooManyRequests, reqs[len(reqs)-2].Status)

	// An abort while the reply streams cancels the model request.
	from := len(proc.Lines())
	require.NoError(t, proc.Send(map[string]any{"id": "c4", "type": "prompt", "message": "[[script:slow chunks=500]]"}))
	_, _, err = proc.WaitLine(ctx, from, func(l agentrun.Line) bool {
		e, ok := agentrun.ParsePiLine(l)
		return ok && e.Type == "message_update" && strings.Contains(l.Text, `"text_delta"`)
	})
	require.NoError(t, err)
	require.NoError(t, proc.Send(map[string]any{"id": "c5", "type": "abort"}))
	_, _, err = proc.WaitLine(ctx, from, agentrun.IsPiType("agent_end"))
	require.NoError(t, err)
	slow, err := srv.WaitFor(ctx, func(r devmodel.Request) bool {
		return r.Script == devmodel.ScriptSlow && r.Outcome != devmodel.OutcomeActive
	})
	require.NoError(t, err)
	require.Equal(t, devmodel.OutcomeCancelled, slow.Outcome)

	session, err := os.ReadFile(cfg.SessionFile)
	require.NoError(t, err, "pi writes the session file it was given")
	require.Contains(t, string(session), "Tool finished: finished")
}

func TestPiOverAnthropicMessages(t *testing.T) {
	t.Parallel()
	prog := locate(t, agentbin.Pi)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startServer(t)
	base := t.TempDir()
	cfg := agentrun.PiConfig{Command: prog.Command, BaseURL: srv.URL() + "/v1", Provider: agentrun.PiProviderAnthropic,
		Home: filepath.Join(base, "home"), AgentDir: filepath.Join(base, "pi-agent"), Workdir: filepath.Join(base, "work")}
	for _, dir := range []string{cfg.Home, cfg.Workdir} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
	}
	spec, err := agentrun.PiSpec(cfg)
	require.NoError(t, err)
	proc, err := agentrun.Start(ctx, spec)
	require.NoError(t, err)
	dumpOnFailure(t, proc)

	stop, reply := piTurn(t, ctx, proc, "c1", `[[script:bash cmd="echo over-anthropic"]]`)
	require.Equal(t, "stop", stop)
	require.Equal(t, "Tool finished: over-anthropic", reply)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, devmodel.APIAnthropicMessages, reqs[0].API)
	require.Equal(t, "bash", reqs[0].ToolCall)
}
