package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/internal/agentbin"
)

// TestACPProgramDefinedByRuntimeProfileEndToEnd adds an ACP program with no
// configuration and no restart: through the HTTP API, an administrator saves a
// RuntimeProfile whose acp_program defines Qwen Code (the pinned install the platform
// binds into image-less local boxes, described in the request alone), then an Agent on
// it; a Session's message is answered by the program in a real local box against the
// scripted model, read on the Session's stream with the `ai` package's parser. The
// platform (API and worker) started before the profile existed.
func TestACPProgramDefinedByRuntimeProfileEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	c, _, validator := startRoutesStackFor(t, "AGENT_ID")
	inst, err := agentbin.LocateACP(mustRoot(t))
	require.NoError(t, err, "run `make deps-acp-agents`")

	// Qwen Code as engines/acp.QwenProfile runs it, from the pinned install at the
	// folder image-less local boxes (and the acp image) hold it in.
	program := map[string]any{
		"title":         "Qwen Code, defined by its RuntimeProfile",
		"command":       []string{inst.Node, acpMountPoint + "/@qwen-code/qwen-code/cli.js", "--acp"},
		"env":           map[string]string{"OPENAI_BASE_URL": "{model_base_url}", "OPENAI_MODEL": "stub-model"},
		"files":         map[string]string{".qwen/settings.json": `{"security":{"auth":{"selectedType":"openai"}},"model":{"name":"stub-model"},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true}}`},
		"model_key_env": "OPENAI_API_KEY", "model_api": "openai",
		"state_dir": ".qwen", "session_log": "projects/*/chats/{engine_session_key}.jsonl",
		"modes": []string{"default"}, "default_mode": "default",
		"busy": "queued", "admission": "session_log", "resume": "resume",
	}
	body, err := json.Marshal(map[string]any{"name": "my-qwen", "engine_kind": acp.KindProgram, "sandbox_backend": "local", "acp_program": program})
	require.NoError(t, err)
	// A program that cannot be valid is refused before anything is stored.
	c.expectError(http.MethodPost, "/runtime-profiles", `{"name":"bad-qwen","engine_kind":"acp","sandbox_backend":"local","acp_program":{"command":[]}}`,
		c.token, http.StatusBadRequest, "INVALID_REQUEST")
	profile := c.call(http.MethodPost, "/runtime-profiles", string(body), "", http.StatusOK)
	assert.Equal(t, true, profile["offered"])

	agentBody, err := json.Marshal(map[string]any{"name": "my-qwen-reviewer", "runtime_profile_id": profile["runtime_profile_id"]})
	require.NoError(t, err)
	agent := c.call(http.MethodPost, "/agents", string(agentBody), "", http.StatusOK)
	assert.Equal(t, acp.KindProgram, agent["engine_kind"])

	created := c.call(http.MethodPost, "/agents/"+agent["agent_id"].(string)+"/conversations", `{}`, "create-my-qwen", http.StatusOK)
	sessionID := created["session_id"].(string)
	receipt := c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Remember the word PINEAPPLE.","client_message_id":"my-qwen-1"}`, "", http.StatusOK)
	waitAnswered(c, sessionID, 2)
	first := c.stream(validator, sessionID, 0)
	require.Len(t, first.report.Messages, 1)
	assert.Contains(t, messageText(first.report.Messages[0]), "Scripted reply")
	assert.Contains(t, string(first.report.Messages[0].Metadata), receipt["input_id"].(string))
	assert.Equal(t, "default", c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)["permission_mode"],
		"the Session starts in the program's default mode")
	c.dev.interrupt(t)
}

// mustRoot is the checkout the test runs from.
func mustRoot(t *testing.T) string {
	t.Helper()
	root, err := agentbin.Root()
	require.NoError(t, err)
	return root
}
