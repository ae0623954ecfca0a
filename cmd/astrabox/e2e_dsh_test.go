package main

import (
	"net/http"

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
	waitAnswered(c, sessionID, 4)
	got := c.stream(validator, sessionID, 0)
	require.Len(c.t, got.report.Messages, 2, "one response per input")
	assert.Contains(c.t, string(got.report.Messages[0].Metadata), first["input_id"].(string))
	assert.Contains(c.t, string(got.report.Messages[1].Metadata), second["input_id"].(string))
	assert.Contains(c.t, messageText(got.report.Messages[1]), "Sent while busy.")
	c.waitState(sessionID, "READY")
}
