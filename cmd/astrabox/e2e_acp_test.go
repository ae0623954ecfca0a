package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestACPConversationsEndToEnd holds a two-message conversation through the Sessions
// API with each seeded Agent Client Protocol program: the API, the Session workflow, a
// real local box running the pinned program against the scripted model, and the
// stream read with the `ai` package's own parser.
func TestACPConversationsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	c, _, validator := startRoutesStackFor(t, "AGENT_ID_CLAUDE_ACP")
	vars := parseEnv(c.setup.envFile)
	for _, agent := range []struct{ envKey, name string }{
		{"AGENT_ID_CLAUDE_ACP", "claude-acp-reviewer"},
		{"AGENT_ID_CODEX_ACP", "codex-acp-reviewer"},
		{"AGENT_ID_QWEN", "qwen-reviewer"},
		{"AGENT_ID_OPENCODE", "opencode-reviewer"},
		{"AGENT_ID_DEEPSEEK_HARNESS", "deepseek-harness-reviewer"},
	} {
		agentID := vars[agent.envKey]
		require.NotEmpty(t, agentID, "dev.env names %s", agent.envKey)
		created := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "create-"+agent.envKey, http.StatusOK)
		sessionID := created["session_id"].(string)
		assert.Equal(t, agent.name, created["deployment_name"])

		receipt := c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
			`{"content":"Remember the word PINEAPPLE.","client_message_id":"acp-1"}`, "", http.StatusOK)
		// A program's first start in a new box can take longer than one stream request.
		waitAnswered(c, sessionID, 2)
		first := c.stream(validator, sessionID, 0)
		require.Len(t, first.report.Messages, 1, agent.envKey)
		assert.Contains(t, messageText(first.report.Messages[0]), "Scripted reply", agent.envKey)
		assert.Contains(t, string(first.report.Messages[0].Metadata), receipt["input_id"].(string))

		c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
			`{"content":"Which word?","client_message_id":"acp-2"}`, "", http.StatusOK)
		waitAnswered(c, sessionID, 4)
		second := c.stream(validator, sessionID, first.lastSeq)
		require.Len(t, second.report.Messages, 1, agent.envKey)
		assert.Contains(t, messageText(second.report.Messages[0]), "Which word?", agent.envKey)
		c.waitState(sessionID, "READY")

		history := c.call(http.MethodGet, "/sessions/"+sessionID+"/messages", ``, "", http.StatusOK)
		msgs, ok := history["messages"].([]any)
		require.True(t, ok, "messages: %v", history)
		assert.Len(t, msgs, 4, agent.envKey)
	}
	heldInputConversation(c, validator, vars["AGENT_ID_DEEPSEEK_HARNESS"])
	c.dev.interrupt(t)
}

// waitAnswered waits until the Session is READY with at least n messages.
func waitAnswered(c *apiClient, sessionID string, n int) {
	c.t.Helper()
	c.dev.waitUntil(c.t, 3*time.Minute, fmt.Sprintf("%d messages", n), func() bool {
		if c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)["state"] != "READY" {
			return false
		}
		msgs, _ := c.call(http.MethodGet, "/sessions/"+sessionID+"/messages", ``, "", http.StatusOK)["messages"].([]any)
		return len(msgs) >= n
	})
}
