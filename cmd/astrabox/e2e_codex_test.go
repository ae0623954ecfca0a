package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCodexConversationEndToEnd is the conversation of TestConversationEndToEnd with
// the seeded Codex Agent: the API, the Session workflow, a real local box running the
// pinned Codex app-server against the scripted model's Responses API through the box's
// OpenAI forward, and the stream read with the `ai` package's own parser.
func TestCodexConversationEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	// A model slug Codex bundles metadata for, so it offers the shell and patch tools
	// the scripted model's directives call.
	c, agentID, validator := startRoutesStackFor(t, "AGENT_ID_CODEX", "ASTRABOX_ENGINES_CODEX_MODEL=gpt-5.5")

	created := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "create-codex-e2e", http.StatusOK)
	sessionID := created["session_id"].(string)
	assert.Equal(t, "codex-reviewer", created["deployment_name"])

	receipt := c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Create a Python Flask project scaffold.","client_message_id":"codex-1"}`, "", http.StatusOK)
	first := c.stream(validator, sessionID, 0)
	require.Len(t, first.report.Messages, 1)
	assert.Contains(t, messageText(first.report.Messages[0]), "Create a Python Flask project scaffold.")
	assert.Contains(t, string(first.report.Messages[0].Metadata), receipt["input_id"].(string))

	// A command in the box reaches the browser as one dynamic tool part under Codex's
	// item type, with its output.
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Add unit tests. [[script:bash cmd=\"echo tests-ok\"]]","client_message_id":"codex-2"}`, "", http.StatusOK)
	second := c.stream(validator, sessionID, first.lastSeq)
	require.Len(t, second.report.Messages, 1)
	tools := second.report.Messages[0].PartsOfType("dynamic-tool")
	require.Len(t, tools, 1)
	assert.Equal(t, "commandExecution", tools[0]["toolName"])
	assert.Contains(t, fmt.Sprint(tools[0]["output"]), "tests-ok")

	// A slow response interrupted: Codex ends the turn, and the Session stays usable.
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Explain slowly. [[script:slow chunks=200 delay=100ms]]","client_message_id":"codex-3"}`, "", http.StatusOK)
	c.dev.waitUntil(t, time.Minute, "an open response", func() bool {
		open, _ := c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)["current_responses"].([]any)
		return len(open) > 0
	})
	interrupted := c.call(http.MethodPost, "/sessions/"+sessionID+"/interrupt", ``, "", http.StatusOK)
	assert.Equal(t, "accepted", interrupted["status"])
	third := c.stream(validator, sessionID, second.lastSeq)
	require.Len(t, third.report.Messages, 1)
	assert.Contains(t, string(third.report.Messages[0].Metadata), "cancelled")
	c.waitState(sessionID, "READY")

	history := c.call(http.MethodGet, "/sessions/"+sessionID+"/messages", ``, "", http.StatusOK)
	msgs, ok := history["messages"].([]any)
	require.True(t, ok, "messages: %v", history)
	assert.Len(t, msgs, 6)
	c.dev.interrupt(t)
}
