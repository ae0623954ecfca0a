package recordpi_test

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
	"github.com/astrabox/astrabox/internal/devmodel/recordpi"
)

func readEntries(t *testing.T, path string) []recordpi.Entry {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []recordpi.Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e recordpi.Entry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		out = append(out, e)
	}
	require.NoError(t, sc.Err())
	return out
}

func containsLine(entries []recordpi.Entry, dir, text string) bool {
	for _, e := range entries {
		if e.Dir == dir && strings.Contains(e.Line, text) {
			return true
		}
	}
	return false
}

// TestRecordsApprovalAndSteeringCases records two cases with the real Pi and checks
// what the recordings hold: the extension's question and its status line, a steering
// message, the model requests, and the session file at the chosen path.
func TestRecordsApprovalAndSteeringCases(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the real Pi; skipped under -short")
	}
	root, err := agentbin.Root()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := t.TempDir()
	cases := []string{"approval_deny", "message_while_streaming"}
	require.NoError(t, recordpi.Record(ctx, recordpi.Options{
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
		require.True(t, containsLine(entries, "out", `"type":"agent_end"`), name)
		var meta recordpi.Meta
		data, err := os.ReadFile(filepath.Join(out, name+".meta.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &meta))
		require.Equal(t, agentbin.PiVersion, meta.PiVersion)
		require.Equal(t, name+".jsonl", filepath.Base(meta.SessionFile), "Pi wrote the session file it was given")
		session, err := os.ReadFile(filepath.Join(out, name+".session.jsonl"))
		require.NoError(t, err)
		require.Contains(t, string(session), `"type":"session"`)
	}
	deny := readEntries(t, filepath.Join(out, "approval_deny.jsonl"))
	require.True(t, containsLine(deny, "out", `"method":"select","title":"Allow bash [`))
	require.True(t, containsLine(deny, "out", `\"decision\":\"deny\"`), "the extension reports the answer")
	require.True(t, containsLine(deny, "out", `Denied by the person`))
	steer := readEntries(t, filepath.Join(out, "message_while_streaming.jsonl"))
	require.True(t, containsLine(steer, "out", `"type":"queue_update","steering":["and one more thing"]`))
}
