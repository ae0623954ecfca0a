package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/agentbin"
)

// TestACPConversationsEndToEnd holds a two-message conversation through the Sessions
// API with each seeded Agent Client Protocol program, one of them added by the
// configuration file alone (engines.acp_programs, seeded like the shipped ones): the API, the Session workflow, a
// real local box running the pinned program against the scripted model, and the
// stream read with the `ai` package's own parser.
func TestACPConversationsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	c, _, validator := startRoutesStackFor(t, "AGENT_ID_CLAUDE_ACP", "ASTRABOX_CONFIG="+configuredACPProgram(t))
	vars := parseEnv(c.setup.envFile)
	for _, agent := range []struct{ envKey, name string }{
		{"AGENT_ID_CLAUDE_ACP", "claude-acp-reviewer"},
		{"AGENT_ID_CODEX_ACP", "codex-acp-reviewer"},
		{"AGENT_ID_QWEN", "qwen-reviewer"},
		{"AGENT_ID_OPENCODE", "opencode-reviewer"},
		{"AGENT_ID_GEMINI", "gemini-reviewer"},
		{"AGENT_ID_CONFIGURED_CODEX_ACP", configuredACPKind + "-reviewer"},
		{"AGENT_ID_DEEPSEEK_HARNESS", "deepseek-harness-reviewer"},
	} {
		// A subtest per program, so one can be run alone (-run .../AGENT_ID_GEMINI); they
		// share the platform and run in turn.
		t.Run(agent.envKey, func(t *testing.T) {
			// The client reports failures on the test that uses it.
			parent := c.t
			c.t = t
			defer func() { c.t = parent }()
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
		})
	}
	heldInputConversation(c, validator, vars["AGENT_ID_DEEPSEEK_HARNESS"])
	c.dev.interrupt(t)
}

// configuredACPKind is the engine_kind of the program configuredACPProgram describes.
const configuredACPKind = "configured-codex-acp"

// configuredACPProgram writes a configuration file that adds an installed ACP program
// by configuration alone (engines.acp_programs): the pinned codex-acp over the pinned
// Codex CLI, described in the file, not by a profile in the code.
func configuredACPProgram(t *testing.T) string {
	t.Helper()
	root, err := agentbin.Root()
	require.NoError(t, err)
	inst, err := agentbin.LocateACP(root)
	require.NoError(t, err, "run `make deps-acp-agents`")
	codexProg, err := agentbin.Locate(root, agentbin.Codex)
	require.NoError(t, err, "run `make deps-agents`")
	codexRel, err := filepath.Rel(codexProg.Dir, codexProg.Command[0])
	require.NoError(t, err)
	program := map[string]any{
		"kind": configuredACPKind, "title": "Codex CLI over ACP, configured",
		"command": []string{inst.Node, "/opt/configured/node_modules/@agentclientprotocol/codex-acp/dist/index.js"},
		"env":     map[string]string{"CODEX_PATH": filepath.Join("/opt/configured-codex", codexRel)},
		"files": map[string]string{".codex/config.toml": "model = \"gpt-5.5\"\nmodel_provider = \"astrabox\"\ncheck_for_update_on_startup = false\n" +
			"[model_providers.astrabox]\nname = \"model forward\"\nbase_url = \"{model_base_url}\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n" +
			"[analytics]\nenabled = false\n[features]\nplugins = false\n"},
		"model_key_env": "OPENAI_API_KEY", "model_api": "openai",
		"state_dir": ".codex", "state_dir_env": "CODEX_HOME", "session_log": "sessions/*/*/*/rollout-*-{engine_session_key}.jsonl",
		"modes": []string{"read-only", "workspace-write", "agent", "agent-full-access"}, "default_mode": "agent",
		"busy": "queued", "admission": "prompt_reply", "resume": "resume",
		"mcp_transports": []string{"stdio"}, "instructions_file": "AGENTS.md",
		"mounts": []map[string]string{{"source": inst.Modules, "target": "/opt/configured/node_modules"},
			{"source": codexProg.Dir, "target": "/opt/configured-codex"}},
	}
	// JSON is YAML.
	doc, err := json.Marshal(map[string]any{"engines": map[string]any{"acp_programs": []any{program}}})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "astrabox.yaml")
	require.NoError(t, os.WriteFile(file, doc, 0o600))
	return file
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
