package devmodel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/agentrun"
	"github.com/astrabox/astrabox/internal/devmodel"
)

// claudeRun is one headless Claude Code process against a fresh model server.
type claudeRun struct {
	t       *testing.T
	srv     *devmodel.Server
	proc    *agentrun.Process
	cfg     agentrun.ClaudeConfig
	session string
}

// startClaude starts the pinned Claude Code against a new in-process server.
func startClaude(t *testing.T, ctx context.Context, permissionMode string) *claudeRun {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real Claude Code; skipped under -short")
	}
	root, err := agentbin.Root()
	require.NoError(t, err)
	prog, err := agentbin.Locate(root, agentbin.Claude)
	require.NoError(t, err, "the pinned Claude Code is needed: run `make deps-agents`")

	srv := devmodel.New(devmodel.Options{Logger: zaptest.NewLogger(t), SlowDelay: 50 * time.Millisecond})
	require.NoError(t, srv.Start(ctx, "127.0.0.1:0"))
	t.Cleanup(func() { require.NoError(t, srv.Close()) })

	base := t.TempDir()
	cfg := agentrun.ClaudeConfig{
		Command: prog.Command, BaseURL: srv.URL(),
		Home: filepath.Join(base, "home"), ConfigDir: filepath.Join(base, "claude-config"), Workdir: filepath.Join(base, "work"),
		PermissionMode: permissionMode, SessionID: uuid.NewString(),
		ExtraEnv: []string{"CLAUDE_CODE_TMPDIR=" + filepath.Join(base, "tmp")},
	}
	for _, dir := range []string{cfg.Home, cfg.ConfigDir, cfg.Workdir, filepath.Join(base, "tmp")} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
	}
	proc, err := agentrun.Start(ctx, agentrun.ClaudeSpec(cfg))
	require.NoError(t, err)
	run := &claudeRun{t: t, srv: srv, proc: proc, cfg: cfg, session: cfg.SessionID}
	t.Cleanup(func() {
		proc.Kill()
		if t.Failed() {
			for _, l := range proc.Lines() {
				t.Logf("%s %6dms %s", l.Dir, l.Offset.Milliseconds(), truncate(l.Text, 600))
			}
		}
	})
	return run
}

// turn sends text and waits for its result line.
func (r *claudeRun) turn(ctx context.Context, text string) agentrun.ClaudeLine {
	r.t.Helper()
	from := len(r.proc.Lines())
	require.NoError(r.t, r.proc.Send(agentrun.ClaudeUserMessage(text, uuid.NewString())))
	line, _, err := r.proc.WaitLine(ctx, from, agentrun.IsClaudeType("result", ""))
	require.NoError(r.t, err)
	res, _ := agentrun.ParseClaudeLine(line)
	return res
}

// assistantTexts returns the text of every assistant line so far.
func (r *claudeRun) assistantTexts() []string {
	var texts []string
	for _, l := range r.proc.Lines() {
		if cl, ok := agentrun.ParseClaudeLine(l); ok && cl.Type == "assistant" {
			if text := agentrun.ClaudeAssistantText(cl); text != "" {
				texts = append(texts, text)
			}
		}
	}
	return texts
}

// finish closes stdin, expects a clean exit and returns the transcript lines.
func (r *claudeRun) finish(ctx context.Context, wantExit int) []map[string]any {
	r.t.Helper()
	require.NoError(r.t, r.proc.CloseStdin())
	code, err := r.proc.Wait(ctx)
	require.NoError(r.t, err)
	require.Equal(r.t, wantExit, code)
	path := agentrun.ClaudeTranscriptPath(r.cfg.ConfigDir, r.cfg.Workdir, r.session)
	f, err := os.Open(path)
	require.NoError(r.t, err, "transcript must be written")
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(r.t, json.Unmarshal(sc.Bytes(), &m))
		lines = append(lines, m)
	}
	require.NoError(r.t, sc.Err())
	return lines
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func TestClaudePlainText(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startClaude(t, ctx, "")
	res := r.turn(ctx, "hello there")
	require.Equal(t, "success", res.Subtype)
	require.False(t, res.IsError)
	require.Equal(t, "Scripted reply to: hello there", res.Result)
	require.Contains(t, r.assistantTexts(), "Scripted reply to: hello there")
	transcript := r.finish(ctx, 0)
	require.True(t, hasTranscriptLine(transcript, "assistant", "Scripted reply to: hello there"))
	for _, req := range r.srv.Requests() {
		t.Logf("request %d %s %s%s model=%s script=%s tools=%d status=%d outcome=%s", req.Seq, req.API, req.Path, req.RawQuery, req.Model, req.Script, len(req.Tools), req.Status, req.Outcome)
	}
}

// hasTranscriptLine reports whether a transcript line of type typ mentions text.
func hasTranscriptLine(lines []map[string]any, typ, text string) bool {
	for _, l := range lines {
		if l["type"] != typ {
			continue
		}
		data, _ := json.Marshal(l["message"])
		if strings.Contains(string(data), text) {
			return true
		}
	}
	return false
}

func TestClaudeBashToolCall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startClaude(t, ctx, "bypassPermissions")
	marker := filepath.Join(r.cfg.Workdir, "marker.txt")
	res := r.turn(ctx, "run it "+devmodel.Directive("bash", "cmd", "echo tool-ran > '"+marker+"' && echo done-"+r.session[:8]))
	require.Equal(t, "success", res.Subtype, res.Result)
	require.False(t, res.IsError)
	require.Equal(t, "Tool finished: done-"+r.session[:8], res.Result)
	data, err := os.ReadFile(marker)
	require.NoError(t, err, "the Bash tool must have run the command")
	require.Equal(t, "tool-ran\n", string(data))

	reqs := r.srv.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, "Bash", reqs[0].ToolCall)
	require.Equal(t, 1, reqs[1].Step)
	transcript := r.finish(ctx, 0)
	require.True(t, hasTranscriptLine(transcript, "assistant", `"name":"Bash"`))
	require.True(t, hasTranscriptLine(transcript, "user", "tool_result"))
}

func TestClaudeRetriesAfterRateLimit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startClaude(t, ctx, "")
	res := r.turn(ctx, `[[script:error status=429 times=1 retry_after=0 text="Back after a rate limit."]]`)
	require.Equal(t, "success", res.Subtype, res.Result)
	require.False(t, res.IsError)
	require.Equal(t, "Back after a rate limit.", res.Result)
	var statuses []int
	for _, req := range r.srv.Requests() {
		statuses = append(statuses, req.Status)
	}
	require.Equal(t, []int{429, 200}, statuses)
	_, _, err := r.proc.WaitLine(ctx, 0, agentrun.IsClaudeType("system", "api_retry"))
	require.NoError(t, err, "Claude Code reports its retry")
	r.finish(ctx, 0)
}

func TestClaudeThinkingAndWrite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startClaude(t, ctx, "bypassPermissions")
	target := filepath.Join(r.cfg.Workdir, "notes.md")
	res := r.turn(ctx, `[[script:write path="`+target+`" content="# written\n" think="Plan the file." final="Wrote it."]]`)
	require.Equal(t, "success", res.Subtype, res.Result)
	require.Equal(t, "Wrote it.", res.Result)
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "# written\n", string(data))
	_, _, err = r.proc.WaitLine(ctx, 0, func(l agentrun.Line) bool {
		return strings.Contains(l.Text, `"thinking_delta"`)
	})
	require.NoError(t, err, "the thinking block streams as thinking_delta")
	r.finish(ctx, 0)
}
