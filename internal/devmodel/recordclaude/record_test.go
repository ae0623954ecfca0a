package recordclaude_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/devmodel/recordclaude"
)

// readEntries loads a recording.
func readEntries(t *testing.T, path string) []recordclaude.Entry {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []recordclaude.Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e recordclaude.Entry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		out = append(out, e)
	}
	require.NoError(t, sc.Err())
	return out
}

func TestRecordsApprovalAndInterruptCases(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the real Claude Code; skipped under -short")
	}
	root, err := agentbin.Root()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := t.TempDir()
	cases := []string{"approval_allow", "approval_deny", "interrupt_streaming"}
	require.NoError(t, recordclaude.Record(ctx, recordclaude.Options{
		Root: root, OutDir: out, WorkBase: t.TempDir(), Cases: cases, Logger: zaptest.NewLogger(t),
	}))
	for _, name := range cases {
		entries := readEntries(t, filepath.Join(out, name+".jsonl"))
		var sawIn, sawResult, sawModel bool
		last := -1.0
		for _, e := range entries {
			require.GreaterOrEqual(t, e.OffsetMS, last, "entries are in time order")
			last = e.OffsetMS
			sawIn = sawIn || e.Dir == "in"
			sawResult = sawResult || (e.Dir == "out" && strings.Contains(e.Line, `"type":"result"`))
			sawModel = sawModel || e.Model != nil
		}
		require.True(t, sawIn && sawResult && sawModel, name)
		transcript, err := os.ReadFile(filepath.Join(out, name+".transcript.jsonl"))
		require.NoError(t, err)
		require.Contains(t, string(transcript), `"type":"user"`, name)
		var meta recordclaude.Meta
		data, err := os.ReadFile(filepath.Join(out, name+".meta.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &meta))
		require.Equal(t, agentbin.ClaudeVersion, meta.ClaudeVersion)
	}
	allow := readEntries(t, filepath.Join(out, "approval_allow.jsonl"))
	require.True(t, containsLine(allow, "out", `"subtype":"can_use_tool"`))
	require.True(t, containsLine(allow, "in", `"behavior":"allow"`))
	deny := readEntries(t, filepath.Join(out, "approval_deny.jsonl"))
	require.True(t, containsLine(deny, "out", "The person said no"))
	interrupt := readEntries(t, filepath.Join(out, "interrupt_streaming.jsonl"))
	require.True(t, containsLine(interrupt, "in", `"subtype":"interrupt"`))
	require.True(t, containsLine(interrupt, "out", `"terminal_reason":"aborted_streaming"`))
}

func containsLine(entries []recordclaude.Entry, dir, text string) bool {
	for _, e := range entries {
		if e.Dir == dir && strings.Contains(e.Line, text) {
			return true
		}
	}
	return false
}
