package recordcodex_test

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
	"github.com/astrabox/astrabox/internal/devmodel/recordcodex"
)

// readEntries loads a recording.
func readEntries(t *testing.T, path string) []recordcodex.Entry {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []recordcodex.Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e recordcodex.Entry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		out = append(out, e)
	}
	require.NoError(t, sc.Err())
	return out
}

func containsLine(entries []recordcodex.Entry, dir, text string) bool {
	for _, e := range entries {
		if e.Dir == dir && strings.Contains(e.Line, text) {
			return true
		}
	}
	return false
}

func TestRecordsApprovalAndJoinedMessageCases(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the real Codex CLI; skipped under -short")
	}
	root, err := agentbin.Root()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := t.TempDir()
	cases := []string{"approval_decline", "message_while_streaming"}
	require.NoError(t, recordcodex.Record(ctx, recordcodex.Options{
		Root: root, OutDir: out, WorkBase: t.TempDir(), Cases: cases, Logger: zaptest.NewLogger(t),
	}))
	for _, name := range cases {
		entries := readEntries(t, filepath.Join(out, name+".jsonl"))
		last := -1.0
		sawModel := false
		for _, e := range entries {
			require.GreaterOrEqual(t, e.OffsetMS, last, "entries are in time order")
			last = e.OffsetMS
			sawModel = sawModel || e.Model != nil
		}
		require.True(t, sawModel, name)
		require.True(t, containsLine(entries, "out", `"method":"turn/completed"`), name)
		var meta recordcodex.Meta
		data, err := os.ReadFile(filepath.Join(out, name+".meta.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &meta))
		require.Equal(t, agentbin.CodexVersion, meta.CodexVersion)
		rollout, err := os.ReadFile(filepath.Join(out, name+".rollout.jsonl"))
		require.NoError(t, err)
		require.Contains(t, string(rollout), `"client_id"`, "the rollout holds our client message ids")
	}
	decline := readEntries(t, filepath.Join(out, "approval_decline.jsonl"))
	require.True(t, containsLine(decline, "out", `"method":"item/commandExecution/requestApproval"`))
	require.True(t, containsLine(decline, "in", `"decision":"decline"`))
	require.True(t, containsLine(decline, "out", `"status":"declined"`))
	joined := readEntries(t, filepath.Join(out, "message_while_streaming.jsonl"))
	require.Equal(t, 2, strings.Count(concat(joined, "out"), `"type":"userMessage","id"`)/2, "both messages are items of the one turn")
}

func concat(entries []recordcodex.Entry, dir string) string {
	var b strings.Builder
	for _, e := range entries {
		if e.Dir == dir {
			b.WriteString(e.Line)
		}
	}
	return b.String()
}
