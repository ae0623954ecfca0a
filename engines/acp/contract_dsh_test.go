package acp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines/acp"
)

// TestDeepSeekHarnessRecordingNeverRefused checks the DeepSeek Harness recording: every
// prompt was written only after the prompt before it was answered, so the bridge refused
// none (it answers a prompt while busy with -32602).
func TestDeepSeekHarnessRecordingNeverRefused(t *testing.T) {
	t.Parallel()
	rec := loadRecording(t, acp.KindDeepSeekHarness)
	running := ""
	prompts := 0
	for _, l := range rec.journal {
		var line struct {
			Sent *struct {
				ID     string `json:"id"`
				Method string `json:"method"`
			} `json:"astrabox_sent"`
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(l.Data, &line) != nil {
			continue
		}
		if line.Sent != nil && line.Sent.Method == "session/prompt" {
			require.Empty(t, running, "prompt %s written while %s ran", line.Sent.ID, running)
			running = line.Sent.ID
			prompts++
			continue
		}
		var id string
		if line.Sent == nil && json.Unmarshal(line.ID, &id) == nil && strings.HasPrefix(id, "prompt:") {
			require.Nil(t, line.Error, "prompt %s answered with an error", id)
			require.Equal(t, running, id)
			running = ""
		}
	}
	require.Equal(t, 4, prompts, "two (one submitted while busy), a cancelled one, one asking approval")
}
