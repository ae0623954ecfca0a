package agentrun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ClaudeConfig says how to run Claude Code headless against a model server.
type ClaudeConfig struct {
	// Command starts the pinned binary (agentbin.Program.Command).
	Command []string
	// BaseURL is the model server (ANTHROPIC_BASE_URL).
	BaseURL string
	// Home, ConfigDir and Workdir are HOME, CLAUDE_CONFIG_DIR and the working
	// directory; tests give each run fresh temporary folders.
	Home, ConfigDir, Workdir string
	// PermissionMode is passed as --permission-mode when set.
	PermissionMode string
	// SessionID (--session-id) or Resume (--resume) pick the conversation.
	SessionID, Resume string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// ExtraEnv are appended to the environment.
	ExtraEnv []string
}

// PlaceholderAPIKey is the key programs are given: the scripted model server
// checks a key is sent but accepts any.
const PlaceholderAPIKey = "sk-ant-devmodel-placeholder"

// ClaudeSpec builds the headless command line the Agent SDK uses: stream-json in
// and out, partial messages, permission prompts routed to stdin/stdout as
// control requests, and accepted user messages echoed back.
func ClaudeSpec(cfg ClaudeConfig) Spec {
	args := append([]string(nil), cfg.Command...)
	args = append(args, "-p",
		"--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--include-partial-messages", "--permission-prompt-tool", "stdio", "--replay-user-messages")
	if cfg.PermissionMode != "" {
		args = append(args, "--permission-mode", cfg.PermissionMode)
	}
	if cfg.SessionID != "" {
		args = append(args, "--session-id", cfg.SessionID)
	}
	if cfg.Resume != "" {
		args = append(args, "--resume", cfg.Resume)
	}
	args = append(args, cfg.ExtraArgs...)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + cfg.Home,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"CLAUDE_CONFIG_DIR=" + cfg.ConfigDir,
		"ANTHROPIC_BASE_URL=" + cfg.BaseURL,
		"ANTHROPIC_API_KEY=" + PlaceholderAPIKey,
		// No telemetry, update or reachability traffic: the model server is the
		// only thing Claude Code may talk to.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		// Emit system/session_state_changed, as the Agent SDK asks for.
		"CLAUDE_CODE_SDK_READS_SESSION_STATE=1",
		// Tests run as root, where bypassPermissions is refused unless Claude
		// Code is told it runs in a sandbox.
		"IS_SANDBOX=1",
	}
	env = append(env, cfg.ExtraEnv...)
	return Spec{Command: args, Env: env, Dir: cfg.Workdir}
}

// ClaudeUserMessage is a stream-json user message with our uuid, which Claude
// Code reuses as the transcript line's uuid.
func ClaudeUserMessage(text, uuid string) map[string]any {
	return map[string]any{
		"type":               "user",
		"message":            map[string]any{"role": "user", "content": text},
		"parent_tool_use_id": nil,
		"session_id":         "",
		"uuid":               uuid,
	}
}

// ClaudeLine is the part of a stream-json stdout line callers match on.
type ClaudeLine struct {
	Type           string          `json:"type"`
	Subtype        string          `json:"subtype"`
	SessionID      string          `json:"session_id"`
	IsError        bool            `json:"is_error"`
	Result         string          `json:"result"`
	StopReason     string          `json:"stop_reason"`
	TerminalReason string          `json:"terminal_reason"`
	RequestID      string          `json:"request_id"`
	Request        json.RawMessage `json:"request"`
	Message        json.RawMessage `json:"message"`
	Event          json.RawMessage `json:"event"`
	UUID           string          `json:"uuid"`
	State          string          `json:"state"`
	// UserMessageUUIDs are the inputs a result answers.
	UserMessageUUIDs []string `json:"user_message_uuids"`
}

// ParseClaudeLine decodes a stdout line; ok is false for lines that are not JSON.
func ParseClaudeLine(l Line) (ClaudeLine, bool) {
	if l.Dir != DirOut {
		return ClaudeLine{}, false
	}
	var cl ClaudeLine
	if err := json.Unmarshal([]byte(l.Text), &cl); err != nil {
		return ClaudeLine{}, false
	}
	return cl, true
}

// IsClaudeType matches stdout lines of the given type (and subtype, if not empty).
func IsClaudeType(typ, subtype string) func(Line) bool {
	return func(l Line) bool {
		cl, ok := ParseClaudeLine(l)
		return ok && cl.Type == typ && (subtype == "" || cl.Subtype == subtype)
	}
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// ClaudeTranscriptPath is where Claude Code keeps a session's transcript:
// $CLAUDE_CONFIG_DIR/projects/<cwd with every non-alphanumeric byte as ->/<id>.jsonl.
func ClaudeTranscriptPath(configDir, workdir, sessionID string) string {
	return filepath.Join(configDir, "projects", nonAlnum.ReplaceAllString(workdir, "-"), sessionID+".jsonl")
}

// ClaudeAssistantText joins the text blocks of an assistant line's message.
func ClaudeAssistantText(cl ClaudeLine) string {
	var msg struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(cl.Message, &msg); err != nil {
		return ""
	}
	var parts []string
	for _, c := range msg.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "")
}
