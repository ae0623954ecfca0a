package main

import (
	"net/http"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/uicheck"
)

// heldInputConversation sends DeepSeek Harness a second message while the first is
// still answered: its ACP bridge would refuse the second prompt, so the platform holds it
// and delivers it when the first turn ends. Both are answered, each in its own response,
// in order.
func heldInputConversation(c *apiClient, validator *uicheck.Validator, agentID string) {
	c.t.Helper()
	created := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "create-dsh-held", http.StatusOK)
	sessionID := created["session_id"].(string)
	first := c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"[[script:slow chunks=20]]","client_message_id":"dsh-held-1"}`, "", http.StatusOK)
	second := c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Sent while busy.","client_message_id":"dsh-held-2"}`, "", http.StatusOK)
	var history []any
	c.dev.waitUntil(c.t, 3*time.Minute, "both inputs answered", func() bool {
		if c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)["state"] != "READY" {
			return false
		}
		history, _ = c.call(http.MethodGet, "/sessions/"+sessionID+"/messages", ``, "", http.StatusOK)["messages"].([]any)
		answers := 0
		for _, m := range history {
			if msg, ok := m.(map[string]any); ok && msg["role"] == "assistant" {
				answers++
			}
		}
		return answers >= 2
	})
	// A stream ends with its response: the two answers are read one after the other.
	answers := c.stream(validator, sessionID, 0)
	require.Len(c.t, answers.report.Messages, 1, "the first answer; the history: %v", history)
	assert.Contains(c.t, string(answers.report.Messages[0].Metadata), first["input_id"].(string))
	held := c.stream(validator, sessionID, answers.lastSeq)
	require.Len(c.t, held.report.Messages, 1, "the held message's own answer; the history: %v", history)
	assert.Contains(c.t, string(held.report.Messages[0].Metadata), second["input_id"].(string))
	assert.Contains(c.t, messageText(held.report.Messages[0]), "Sent while busy.")
	c.waitState(sessionID, "READY")
}
