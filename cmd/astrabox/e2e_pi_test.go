package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPiConversationEndToEnd is the conversation of TestConversationEndToEnd with the
// seeded Pi Agent: the API, the Session workflow, a real local box running the pinned
// Pi in rpc mode with the platform's approval extension against the scripted model's
// Anthropic Messages API through the box's model forward, an approval answered over
// the API, and the stream read with the `ai` package's own parser.
func TestPiConversationEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	c, agentID, validator := startRoutesStackFor(t, "AGENT_ID_PI")

	created := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "create-pi-e2e", http.StatusOK)
	sessionID := created["session_id"].(string)
	assert.Equal(t, "pi-reviewer", created["deployment_name"])

	receipt := c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Create a Python Flask project scaffold.","client_message_id":"pi-1"}`, "", http.StatusOK)
	first := c.stream(validator, sessionID, 0)
	require.Len(t, first.report.Messages, 1)
	assert.Contains(t, messageText(first.report.Messages[0]), "Create a Python Flask project scaffold.")
	assert.Contains(t, string(first.report.Messages[0].Metadata), receipt["input_id"].(string))

	// Under ask, bash asks through the extension; the approval answered over the API
	// lets the command run.
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Add unit tests. [[script:bash cmd=\"echo tests-ok\"]]","client_message_id":"pi-2"}`, "", http.StatusOK)
	var interactionID string
	c.dev.waitUntil(t, time.Minute, "a pending approval", func() bool {
		s := c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)
		if p, ok := s["pending_interaction"].(map[string]any); ok && s["state"] == "WAITING_INPUT" {
			interactionID, _ = p["interaction_id"].(string)
		}
		return interactionID != ""
	})
	asked := c.readUntil(validator, sessionID, first.lastSeq, func(types map[string]bool, finish string) bool {
		return types["tool-approval-request"] && types["data-interaction"] && finish == "tool-calls"
	})
	require.Len(t, asked.report.Messages, 1, "the paused response")
	paused := asked.report.Messages[0]
	c.call(http.MethodPost, "/sessions/"+sessionID+"/interactions/"+interactionID+"/answer", `{"answer":{"decision":"approve"}}`, "", http.StatusOK)
	rest := c.continueStream(validator, sessionID, asked.lastSeq, paused)
	require.Len(t, rest.report.Messages, 1)
	tools := rest.report.Messages[0].PartsOfType("dynamic-tool")
	require.Len(t, tools, 1)
	assert.Equal(t, "bash", tools[0]["toolName"])
	assert.Equal(t, "output-available", tools[0]["state"], "the approved command ran: %v", tools[0])
	assert.Contains(t, fmt.Sprint(tools[0]["output"]), "tests-ok")
	c.waitState(sessionID, "READY")

	// A slow response interrupted: Pi aborts the run, and the Session stays usable.
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Explain slowly. [[script:slow chunks=200 delay=100ms]]","client_message_id":"pi-3"}`, "", http.StatusOK)
	c.dev.waitUntil(t, time.Minute, "an open response", func() bool {
		open, _ := c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)["current_responses"].([]any)
		return len(open) > 0
	})
	interrupted := c.call(http.MethodPost, "/sessions/"+sessionID+"/interrupt", ``, "", http.StatusOK)
	assert.Equal(t, "accepted", interrupted["status"])
	c.waitState(sessionID, "READY")

	history := c.call(http.MethodGet, "/sessions/"+sessionID+"/messages", ``, "", http.StatusOK)
	msgs, ok := history["messages"].([]any)
	require.True(t, ok, "messages: %v", history)
	assert.Len(t, msgs, 6)
	c.dev.interrupt(t)
}
