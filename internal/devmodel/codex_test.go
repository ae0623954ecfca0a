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

// startCodex starts the pinned `codex app-server` against srv and initializes it.
func startCodex(t *testing.T, ctx context.Context, srv *devmodel.Server) (*agentrun.Process, agentrun.CodexConfig) {
	t.Helper()
	prog := locate(t, agentbin.Codex)
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
	codexCall(t, ctx, proc, 1, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "astrabox_test", "title": "AstraBox test", "version": "0.0.1"},
		"capabilities": map[string]any{"experimentalApi": true},
	}, nil)
	require.NoError(t, proc.Send(map[string]any{"method": "initialized"}))
	return proc, cfg
}

// codexCall sends a request, waits for its response and decodes the result into out.
func codexCall(t *testing.T, ctx context.Context, proc *agentrun.Process, id int, method string, params, out any) {
	t.Helper()
	from := len(proc.Lines())
	require.NoError(t, proc.Send(agentrun.CodexRequest(id, method, params)))
	line, _, err := proc.WaitLine(ctx, from, agentrun.IsCodexResponse(id))
	require.NoError(t, err)
	m, _ := agentrun.ParseCodexLine(line)
	require.Empty(t, m.Error, "%s failed", method)
	if out != nil {
		require.NoError(t, json.Unmarshal(m.Result, out))
	}
}

// codexThread starts a thread that runs commands without approval or Codex's
// own sandbox (the platform's box is the sandbox) and returns its id.
func codexThread(t *testing.T, ctx context.Context, proc *agentrun.Process, id int, cfg agentrun.CodexConfig, model string) string {
	t.Helper()
	params := map[string]any{"cwd": cfg.Workdir, "approvalPolicy": "never", "sandbox": "danger-full-access"}
	if model != "" {
		params["model"] = model
	}
	var started struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	codexCall(t, ctx, proc, id, "thread/start", params, &started)
	require.NotEmpty(t, started.Thread.ID)
	return started.Thread.ID
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

func TestCodexTextShellToolAndRetry(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startServer(t)
	proc, cfg := startCodex(t, ctx, srv)
	thread := codexThread(t, ctx, proc, 2, cfg, "")

	status, messages := codexTurn(t, ctx, proc, 3, thread, "hello codex")
	require.Equal(t, "completed", status)
	require.Equal(t, []string{"Scripted reply to: hello codex"}, messages)

	marker := filepath.Join(cfg.Workdir, "codex-marker.txt")
	status, messages = codexTurn(t, ctx, proc, 4, thread, `[[script:bash cmd="echo codex-ran > `+marker+` && echo finished"]]`)
	require.Equal(t, "completed", status)
	require.Equal(t, []string{"Tool finished: finished"}, messages)
	data, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.Equal(t, "codex-ran\n", string(data))
	require.Equal(t, "exec_command", srv.Requests()[1].ToolCall)

	// Codex retries server errors itself, but not a 429 (observed with 0.169.0:
	// one request, then "exceeded retry limit, last status: 429" and a failed
	// turn), so its retry case uses a 500.
	status, messages = codexTurn(t, ctx, proc, 5, thread, `[[script:error status=500 times=1 text="codex retried"]]`)
	require.Equal(t, "completed", status)
	require.Equal(t, []string{"codex retried"}, messages)
	var statuses []int
	var apis []string
	for _, r := range srv.Requests() {
		statuses, apis = append(statuses, r.Status), append(apis, r.API)
	}
	require.Equal(t, []int{200, 200, 200, http.StatusInternalServerError, 200}, statuses)
	for _, api := range apis {
		require.Equal(t, devmodel.APIOpenAIResponses, api)
	}

	require.NoError(t, proc.CloseStdin())
	code, err := proc.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, code)
}

func TestCodexInterruptCancelsTheModelRequest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startServer(t)
	proc, cfg := startCodex(t, ctx, srv)
	thread := codexThread(t, ctx, proc, 2, cfg, "")

	from := len(proc.Lines())
	var turn struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	codexCall(t, ctx, proc, 3, "turn/start", map[string]any{
		"threadId": thread, "input": []any{map[string]any{"type": "text", "text": "[[script:slow chunks=500]]", "text_elements": []any{}}},
	}, &turn)
	_, _, err := proc.WaitLine(ctx, from, agentrun.IsCodexNotification("item/agentMessage/delta"))
	require.NoError(t, err)
	require.NoError(t, proc.Send(agentrun.CodexRequest(4, "turn/interrupt", map[string]any{"threadId": thread, "turnId": turn.Turn.ID})))
	line, _, err := proc.WaitLine(ctx, from, agentrun.IsCodexNotification("turn/completed"))
	require.NoError(t, err)
	require.Contains(t, line.Text, `"status":"interrupted"`)
	slow, err := srv.WaitFor(ctx, func(r devmodel.Request) bool {
		return r.Script == devmodel.ScriptSlow && r.Outcome != devmodel.OutcomeActive
	})
	require.NoError(t, err)
	require.Equal(t, devmodel.OutcomeCancelled, slow.Outcome)
}

func TestCodexReasoningAndApplyPatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startServer(t)
	proc, cfg := startCodex(t, ctx, srv)
	// A bundled model slug makes Codex offer apply_patch as a freeform tool.
	thread := codexThread(t, ctx, proc, 2, cfg, "gpt-5.5")

	status, messages := codexTurn(t, ctx, proc, 3, thread,
		`[[script:write path=patched.txt content="from a patch\n" think="Write the file." final="Patched."]]`)
	require.Equal(t, "completed", status)
	require.Equal(t, []string{"Patched."}, messages)
	data, err := os.ReadFile(filepath.Join(cfg.Workdir, "patched.txt"))
	require.NoError(t, err)
	require.Equal(t, "from a patch\n", string(data))
	require.Equal(t, "apply_patch", srv.Requests()[0].ToolCall)
	require.True(t, completedItem(proc, "reasoning"), "the thinking block reaches Codex as a reasoning item")
	require.True(t, completedItem(proc, "fileChange"), "the patch shows as a fileChange item")
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
