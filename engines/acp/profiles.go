package acp

import "github.com/astrabox/astrabox/engines"

// The engine kinds of the shipped profiles.
const (
	KindClaude   = "claude-acp"
	KindCodex    = "codex-acp"
	KindGemini   = "gemini"
	KindQwen     = "qwen"
	KindOpencode = "opencode"
)

// Install says where a box sees the pinned installs the shipped profiles run from.
type Install struct {
	// Node is the Node.js binary in the box.
	Node string
	// Modules is the in-box folder of tools/acp-agents/node_modules; it must be named
	// node_modules, where Node looks for the packages the programs import.
	Modules string
	// ClaudeCode is the pinned Claude Code binary claude-agent-acp drives.
	ClaudeCode string
	// Codex is the pinned Codex CLI binary codex-acp drives (its app-server).
	Codex string
	// Opencode is opencode's native binary.
	Opencode string
}

// ClaudeProfile is Claude Code through claude-agent-acp, driving the pinned Claude Code.
// Prompt suggestions are off (each costs a model call per turn); the modes are the ones
// claude-agent-acp offers when bypassing permissions is allowed, as in a box.
func ClaudeProfile(in Install) Profile {
	return Profile{
		Kind: KindClaude, Title: "Claude Code (claude-agent-acp)",
		Command: []string{in.Node, in.Modules + "/@agentclientprotocol/claude-agent-acp/dist/index.js"},
		Env: map[string]string{
			"CLAUDE_CODE_EXECUTABLE":                   in.ClaudeCode,
			"ANTHROPIC_BASE_URL":                       "{model_base_url}",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			// Claude Code accepts only "1" as the sandbox marker.
			"IS_SANDBOX": "1",
		},
		ModelKeyEnv: "ANTHROPIC_API_KEY",
		StateDir:    ".claude", StateDirEnv: "CLAUDE_CONFIG_DIR",
		// Claude Code's user memory in its config folder.
		InstructionsFile: "CLAUDE.md",
		MCPTransports:    []engines.MCPTransport{engines.MCPTransportStdio, engines.MCPTransportHTTP},
		SessionLog:       "projects/*/{engine_session_key}.jsonl",
		Modes:            []string{"default", "acceptEdits", "plan", "auto", "bypassPermissions"},
		DefaultMode:      "default",
		Busy:             BusyQueued, Admission: AdmissionSessionLog, Resume: ResumeResume,
		NewSessionMeta: map[string]any{"claudeCode": map[string]any{"options": map[string]any{"promptSuggestions": false}}},
		ReportsUsage:   true,
		Quirks: []string{
			"a prompt sent while busy is held in claude-agent-acp's memory until the running turn ends",
			"the session title arrives after the prompt's reply (session_info_update)",
		},
	}
}

// CodexProfile is the Codex CLI through codex-acp, driving the pinned Codex app-server.
func CodexProfile(in Install) Profile {
	return Profile{
		Kind: KindCodex, Title: "Codex CLI (codex-acp)",
		Command: []string{in.Node, in.Modules + "/@agentclientprotocol/codex-acp/dist/index.js"},
		Env:     map[string]string{"CODEX_PATH": in.Codex},
		Files: map[string]string{".codex/config.toml": `model = "gpt-5.5"
model_provider = "astrabox"
check_for_update_on_startup = false

[model_providers.astrabox]
name = "AstraBox model forward"
base_url = "{model_base_url}"
wire_api = "responses"
env_key = "OPENAI_API_KEY"

[analytics]
enabled = false

[features]
plugins = false
`},
		ModelKeyEnv: "OPENAI_API_KEY",
		StateDir:    ".codex", StateDirEnv: "CODEX_HOME",
		// Codex's global instructions in CODEX_HOME.
		InstructionsFile: "AGENTS.md",
		MCPTransports:    []engines.MCPTransport{engines.MCPTransportStdio, engines.MCPTransportHTTP},
		SessionLog:       "sessions/*/*/*/rollout-*-{engine_session_key}.jsonl",
		Modes:            []string{"read-only", "workspace-write", "agent", "agent-full-access"},
		DefaultMode:      "agent",
		Busy:             BusyQueued, Admission: AdmissionSessionLog, Resume: ResumeResume,
		ReportsUsage: true,
		Quirks: []string{
			"a model error arrives as agent text and the turn ends end_turn",
			"declining a permission (reject_once) aborts the turn: it ends cancelled",
		},
	}
}

// GeminiProfile is Gemini CLI in its ACP mode, over the Gemini API. The model is
// pinned: the default router calls the model for a JSON classification first. The
// workspace is trusted (it is the box's own), else Gemini CLI runs it restricted. Its
// chat file is named by the session's start minute and the session id's first 8
// characters; it is the session log the platform mirrors and restores.
func GeminiProfile(in Install) Profile {
	return Profile{
		Kind: KindGemini, Title: "Gemini CLI",
		Command: []string{in.Node, in.Modules + "/@google/gemini-cli/bundle/gemini.js", "--acp"},
		Env: map[string]string{
			"GOOGLE_GEMINI_BASE_URL": "{model_base_url}", "GEMINI_MODEL": "gemini-2.5-flash",
			"GEMINI_CLI_NO_RELAUNCH": "true", "GEMINI_CLI_TRUST_WORKSPACE": "true",
		},
		Files: map[string]string{".gemini/settings.json": `{"security":{"auth":{"selectedType":"gemini-api-key"}},` +
			`"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true}}`},
		ModelKeyEnv: "GEMINI_API_KEY",
		StateDir:    ".gemini",
		SessionLog:  "tmp/*/chats/session-*-{engine_session_key_8}.jsonl",
		// In a trusted workspace Gemini CLI offers every mode; default asks before tools.
		Modes:       []string{"default", "autoEdit", "yolo", "plan"},
		DefaultMode: "default",
		Busy:        BusyCancels, Admission: AdmissionPromptReply, Resume: ResumeLoad,
		LoadAfterStartMinute: true, ModeUpdateText: "[MODE_UPDATE] ",
		// In its reply's _meta.quota.token_count, not ACP's usage.
		ReportsUsage: true,
		Quirks: []string{
			"no session/resume; session/load within the same wall-clock minute as the session's start loses it (the adapter waits for a later minute)",
			"sends its mode changes as agent text [MODE_UPDATE] <mode>",
			"waits for the permission answer after session/cancel (answered cancelled by the client)",
			"no tool_call before a permission request",
		},
	}
}

// QwenProfile is Qwen Code in its ACP mode, over an OpenAI-compatible chat API.
func QwenProfile(in Install) Profile {
	return Profile{
		Kind: KindQwen, Title: "Qwen Code",
		Command: []string{in.Node, in.Modules + "/@qwen-code/qwen-code/cli.js", "--acp"},
		Env:     map[string]string{"OPENAI_BASE_URL": "{model_base_url}", "OPENAI_MODEL": "stub-model"},
		Files: map[string]string{".qwen/settings.json": `{"security":{"auth":{"selectedType":"openai"}},"model":{"name":"stub-model"},` +
			`"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true}}`},
		ModelKeyEnv: "OPENAI_API_KEY",
		StateDir:    ".qwen",
		SessionLog:  "projects/*/chats/{engine_session_key}.jsonl",
		Modes:       []string{"default"},
		DefaultMode: "default",
		Busy:        BusyCancels, Admission: AdmissionSessionLog, Resume: ResumeResume,
		ReportsUsage: true,
		Quirks: []string{
			"a prompt sent while busy fails the running turn (-32603 Internal error) and runs the new one",
			"asks the client craft/drainMidTurnQueue, which the client declines",
		},
	}
}

// OpencodeProfile is opencode in its ACP mode, with a custom OpenAI-compatible provider
// and bash and edits set to ask.
func OpencodeProfile(in Install) Profile {
	return Profile{
		Kind: KindOpencode, Title: "opencode",
		Command: []string{in.Opencode, "acp"},
		Env: map[string]string{
			"XDG_CONFIG_HOME": "{home}/.config", "XDG_DATA_HOME": "{home}/.local/share", "XDG_STATE_HOME": "{home}/.local/state",
			"XDG_CACHE_HOME": "{home}/.cache", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
		},
		Files: map[string]string{".config/opencode/opencode.json": `{"$schema":"https://opencode.ai/config.json","autoupdate":false,"share":"disabled",` +
			`"provider":{"astrabox":{"npm":"@ai-sdk/openai-compatible","name":"AstraBox model forward",` +
			`"options":{"baseURL":"{model_base_url}","apiKey":"{env:OPENAI_API_KEY}"},` +
			`"models":{"stub-model":{"name":"Model","tool_call":true}}}},` +
			`"model":"astrabox/stub-model","small_model":"astrabox/stub-model","permission":{"bash":"ask","edit":"ask"}}`},
		ModelKeyEnv: "OPENAI_API_KEY",
		StateDir:    ".local/share/opencode",
		// opencode reads global instructions from its config folder, outside its state
		// folder: not offered.
		MCPTransports: []engines.MCPTransport{engines.MCPTransportStdio, engines.MCPTransportHTTP},
		StateFiles:    []string{"opencode.db", "opencode.db-wal", "opencode.db-shm"},
		Busy:          BusyJoined, Admission: AdmissionPromptReply, Resume: ResumeResume,
		ReportsUsage: true,
		Quirks:       []string{"state is a SQLite database (with its -wal), not a JSONL transcript: no session log to mirror"},
	}
}
