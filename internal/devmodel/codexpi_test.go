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

	"github.com/google/uuid"
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

// codexTurn starts a turn and returns the agent messages of the completed turn.
func codexTurn(t *testing.T, ctx context.Context, proc *agentrun.Process, id int, threadID, text string) (status string, messages []string) {
	t.Helper()
	from := len(proc.Lines())
	require.NoError(t, proc.Send(agentrun.CodexRequest(id, "turn/start", map[string]any{
		"threadId": threadID, "clientUserMessageId": uuid.NewString(),
		"input": []any{map[string]any{"type": "text", "text": text, "text_elements": []any{}}},
	})))
	line, end, err := proc.WaitLine(ctx, from, agentrun.IsCodexNotification("turn/completed"))
	require.NoError(t, err)
	m, _ := agentrun.ParseCodexLine(line)
	var done struct {
		Turn struct {
			Status string `json:"status"`
		} `json:"turn"`
	}
	require.NoError(t, json.Unmarshal(m.Params, &done))
	for _, l := range proc.Lines()[from:end] {
		if cm, ok := agentrun.ParseCodexLine(l); ok && cm.Method == "item/completed" {
			var item struct {
				Item struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"item"`
			}
			require.NoError(t, json.Unmarshal(cm.Params, &item))
			if item.Item.Type == "agentMessage" {
				messages = append(messages, item.Item.Text)
			}
		}
	}
	return done.Turn.Status, messages
}

func TestCodexAppServerTextAndShellTool(t *testing.T) {
	t.Parallel()
	prog := locate(t, agentbin.Codex)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startServer(t)
	base := t.TempDir()
	cfg := agentrun.CodexConfig{Command: prog.Command, PathDirs: prog.PathDirs, BaseURL: srv.URL() + "/v1",
		Home: filepath.Join(base, "home"), CodexHome: filepath.Join(base, "codex-home"), TmpDir: filepath.Join(base, "tmp"),
		Workdir: filepath.Join(base, "work")}
	for _, dir := range []string{cfg.Home, cfg.CodexHome, cfg.TmpDir, cfg.Workdir} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
	}
	proc, err := agentrun.Start(ctx, agentrun.CodexSpec(cfg))
	require.NoError(t, err)
	dumpOnFailure(t, proc)

	require.NoError(t, proc.Send(agentrun.CodexRequest(1, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "astrabox_test", "title": "AstraBox test", "version": "0.0.1"},
		"capabilities": map[string]any{"experimentalApi": true},
	})))
	_, _, err = proc.WaitLine(ctx, 0, agentrun.IsCodexResponse(1))
	require.NoError(t, err)
	require.NoError(t, proc.Send(map[string]any{"method": "initialized"}))
	require.NoError(t, proc.Send(agentrun.CodexRequest(2, "thread/start", map[string]any{
		"cwd": cfg.Workdir, "approvalPolicy": "never", "sandbox": "danger-full-access",
	})))
	line, _, err := proc.WaitLine(ctx, 0, agentrun.IsCodexResponse(2))
	require.NoError(t, err)
	m, _ := agentrun.ParseCodexLine(line)
	require.Empty(t, m.Error)
	var started struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &started))

	status, messages := codexTurn(t, ctx, proc, 3, started.Thread.ID, "hello codex")
	require.Equal(t, "completed", status)
	require.Equal(t, []string{"Scripted reply to: hello codex"}, messages)

	marker := filepath.Join(cfg.Workdir, "codex-marker.txt")
	status, messages = codexTurn(t, ctx, proc, 4, started.Thread.ID, `[[script:bash cmd="echo codex-ran > `+marker+` && echo finished"]]`)
	require.Equal(t, "completed", status)
	require.Equal(t, []string{"Tool finished: finished"}, messages)
	data, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.Equal(t, "codex-ran\n", string(data))

	var apis []string
	for _, r := range srv.Requests() {
		apis = append(apis, r.API)
	}
	require.Equal(t, []string{devmodel.APIOpenAIResponses, devmodel.APIOpenAIResponses, devmodel.APIOpenAIResponses}, apis)
	require.Equal(t, "exec_command", srv.Requests()[1].ToolCall)

	// Codex retries server errors itself, but not a 429 (observed with 0.169.0:
	// one request, then "exceeded retry limit, last status: 429" and a failed
	// turn), so its retry case uses a 500.
	status, messages = codexTurn(t, ctx, proc, 5, started.Thread.ID, `[[script:error status=500 times=1 text="codex retried"]]`)
	require.Equal(t, "completed", status)
	require.Equal(t, []string{"codex retried"}, messages)
	reqs := srv.Requests()
	require.Equal(t, http.StatusInternalServerError, reqs[len(reqs)-2].Status)

	// An interrupt while the reply streams cancels the model request.
	from := len(proc.Lines())
	require.NoError(t, proc.Send(agentrun.CodexRequest(8, "turn/start", map[string]any{
		"threadId": started.Thread.ID, "input": []any{map[string]any{"type": "text", "text": "[[script:slow chunks=500]]", "text_elements": []any{}}},
	})))
	line, _, err = proc.WaitLine(ctx, from, agentrun.IsCodexResponse(8))
	require.NoError(t, err)
	m, _ = agentrun.ParseCodexLine(line)
	var turnStarted struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &turnStarted))
	_, _, err = proc.WaitLine(ctx, from, agentrun.IsCodexNotification("item/agentMessage/delta"))
	require.NoError(t, err)
	require.NoError(t, proc.Send(agentrun.CodexRequest(9, "turn/interrupt", map[string]any{"threadId": started.Thread.ID, "turnId": turnStarted.Turn.ID})))
	line, _, err = proc.WaitLine(ctx, from, agentrun.IsCodexNotification("turn/completed"))
	require.NoError(t, err)
	require.Contains(t, line.Text, `"status":"interrupted"`)
	slow, err := srv.WaitFor(ctx, func(r devmodel.Request) bool {
		return r.Script == devmodel.ScriptSlow && r.Outcome != devmodel.OutcomeActive
	})
	require.NoError(t, err)
	require.Equal(t, devmodel.OutcomeCancelled, slow.Outcome)

	// A bundled model slug makes Codex offer apply_patch as a freeform tool.
	require.NoError(t, proc.Send(agentrun.CodexRequest(6, "thread/start", map[string]any{
		"cwd": cfg.Workdir, "approvalPolicy": "never", "sandbox": "danger-full-access", "model": "gpt-5.5",
	})))
	line, _, err = proc.WaitLine(ctx, 0, agentrun.IsCodexResponse(6))
	require.NoError(t, err)
	m, _ = agentrun.ParseCodexLine(line)
	require.NoError(t, json.Unmarshal(m.Result, &started))
	status, messages = codexTurn(t, ctx, proc, 7, started.Thread.ID,
		`[[script:write path=patched.txt content="from a patch\n" think="Write the file." final="Patched."]]`)
	require.Equal(t, "completed", status)
	require.Equal(t, []string{"Patched."}, messages)
	data, err = os.ReadFile(filepath.Join(cfg.Workdir, "patched.txt"))
	require.NoError(t, err)
	require.Equal(t, "from a patch\n", string(data))
	reqs = srv.Requests()
	require.Equal(t, "apply_patch", reqs[len(reqs)-2].ToolCall)
	require.True(t, completedItem(proc, "reasoning"), "the thinking block reaches Codex as a reasoning item")
	require.True(t, completedItem(proc, "fileChange"), "the patch shows as a fileChange item")

	require.NoError(t, proc.CloseStdin())
	code, err := proc.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, code)
}

// completedItem reports whether Codex has completed an item of type typ.
func completedItem(proc *agentrun.Process, typ string) bool {
	for _, l := range proc.Lines() {
		if m, ok := agentrun.ParseCodexLine(l); ok && m.Method == "item/completed" &&
			strings.Contains(string(m.Params), `"type":"`+typ+`"`) {
			return true
		}
	}
	return false
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
