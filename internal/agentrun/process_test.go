package agentrun_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/agentrun"
)

func TestProcessEchoesLinesInOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := agentrun.Start(ctx, agentrun.Spec{Command: []string{"cat"}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	require.NoError(t, err)
	require.NoError(t, p.Send(map[string]string{"type": "ping"}))
	line, idx, err := p.WaitLine(ctx, 0, func(l agentrun.Line) bool { return l.Dir == agentrun.DirOut })
	require.NoError(t, err)
	require.Equal(t, `{"type":"ping"}`, line.Text)
	require.Equal(t, 1, idx, "the stdin line is recorded first")
	require.NoError(t, p.CloseStdin())
	code, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, code)
	lines := p.Lines()
	require.Equal(t, agentrun.DirIn, lines[0].Dir)
	require.LessOrEqual(t, lines[0].Offset, lines[1].Offset)
}

func TestWaitLineFailsWhenTheProgramExits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := agentrun.Start(ctx, agentrun.Spec{Command: []string{"sh", "-c", "echo bye >&2; exit 3"}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	require.NoError(t, err)
	_, _, err = p.WaitLine(ctx, 0, func(l agentrun.Line) bool { return l.Dir == agentrun.DirOut })
	require.ErrorContains(t, err, "exited")
	code, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, code)
	require.True(t, strings.Contains(p.Lines()[0].Text, "bye"))
}

func TestClaudeTranscriptPathSlug(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/cfg/projects/-tmp-research-work-claude-plain-text/abc.jsonl",
		agentrun.ClaudeTranscriptPath("/cfg", "/tmp/research/work/claude/plain_text", "abc"))
}
