package agentrun

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CodexConfig says how to run `codex app-server` against a model server.
type CodexConfig struct {
	// Command starts the pinned binary; PathDirs go first on PATH.
	Command  []string
	PathDirs []string
	// BaseURL is the OpenAI base URL, ending in /v1.
	BaseURL string
	// Home, CodexHome, TmpDir and Workdir are HOME, CODEX_HOME, TMPDIR and the
	// working directory. CodexHome must not be inside TmpDir: Codex then refuses
	// to create its helper binaries and every sandboxed command fails.
	Home, CodexHome, TmpDir, Workdir string
	// Model is the model id sent to the server; an id Codex does not know gets
	// fallback metadata (tools: exec_command, no apply_patch).
	Model string
}

// CodexSpec builds the app-server command line with the whole provider set by -c
// flags, so an empty CODEX_HOME is enough, and with the plugin sync, update
// check and analytics off so the model server is the only thing Codex talks to.
func CodexSpec(cfg CodexConfig) Spec {
	model := cfg.Model
	if model == "" {
		model = "devmodel"
	}
	args := append([]string(nil), cfg.Command...)
	args = append(args, "app-server",
		"-c", fmt.Sprintf("model=%q", model),
		"-c", `model_provider="devmodel"`,
		"-c", `model_providers.devmodel.name="AstraBox scripted model"`,
		"-c", fmt.Sprintf("model_providers.devmodel.base_url=%q", cfg.BaseURL),
		"-c", `model_providers.devmodel.wire_api="responses"`,
		"-c", `model_providers.devmodel.env_key="DEVMODEL_API_KEY"`,
		"-c", "features.plugins=false",
		"-c", "check_for_update_on_startup=false",
		"-c", "analytics.enabled=false",
	)
	path := strings.Join(append(append([]string(nil), cfg.PathDirs...), os.Getenv("PATH")), ":")
	env := []string{
		"PATH=" + path, "HOME=" + cfg.Home, "LANG=C.UTF-8", "TERM=dumb",
		"CODEX_HOME=" + cfg.CodexHome, "TMPDIR=" + cfg.TmpDir,
		"DEVMODEL_API_KEY=" + PlaceholderAPIKey,
	}
	return Spec{Command: args, Env: env, Dir: cfg.Workdir}
}

// CodexRequest is a JSON-RPC request to the app-server (Codex leaves out the
// "jsonrpc" field).
func CodexRequest(id int, method string, params any) map[string]any {
	return map[string]any{"id": id, "method": method, "params": params}
}

// CodexMessage is the part of an app-server line callers match on.
type CodexMessage struct {
	ID     *int            `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// ParseCodexLine decodes a stdout line of the app-server.
func ParseCodexLine(l Line) (CodexMessage, bool) {
	if l.Dir != DirOut {
		return CodexMessage{}, false
	}
	var m CodexMessage
	if err := json.Unmarshal([]byte(l.Text), &m); err != nil {
		return CodexMessage{}, false
	}
	return m, true
}

// IsCodexResponse matches the response to request id.
func IsCodexResponse(id int) func(Line) bool {
	return func(l Line) bool {
		m, ok := ParseCodexLine(l)
		return ok && m.ID != nil && *m.ID == id && m.Method == ""
	}
}

// IsCodexNotification matches a notification by method.
func IsCodexNotification(method string) func(Line) bool {
	return func(l Line) bool {
		m, ok := ParseCodexLine(l)
		return ok && m.Method == method && m.ID == nil
	}
}

// PiConfig says how to run `pi --mode rpc` against a model server.
type PiConfig struct {
	// Command starts the pinned program (node and its entry script).
	Command []string
	// BaseURL is the OpenAI base URL, ending in /v1.
	BaseURL string
	// Home, AgentDir and Workdir are HOME, PI_CODING_AGENT_DIR and the working
	// directory; SessionFile, when set, is passed as --session.
	Home, AgentDir, Workdir, SessionFile string
	// Provider is PiProviderChat (the default) or PiProviderAnthropic.
	Provider string
	// Extensions are extension files loaded with -e; Env is added to Pi's
	// environment (KEY=VALUE).
	Extensions []string
	Env        []string
}

// Pi providers PiModelsJSON defines.
const (
	// PiProviderChat reaches the scripted server over Chat Completions.
	PiProviderChat = "devmodel"
	// PiProviderAnthropic reaches it over Anthropic Messages.
	PiProviderAnthropic = "devmodel-anthropic"
)

// PiModelsJSON is the models.json that makes the scripted server Pi's
// providers: baseURL is the OpenAI base URL (ending in /v1); the Anthropic
// provider uses it without /v1, as the Anthropic client adds that itself.
func PiModelsJSON(baseURL string) string {
	anthropicURL := strings.TrimSuffix(baseURL, "/v1")
	return `{"providers":{` +
		`"devmodel":{"baseUrl":"` + baseURL + `","api":"openai-completions","apiKey":"DEVMODEL_API_KEY",` +
		`"compat":{"supportsDeveloperRole":false,"supportsReasoningEffort":false},` +
		`"models":[{"id":"devmodel","name":"AstraBox scripted model","reasoning":false,"input":["text"],"contextWindow":128000,"maxTokens":4096}]},` +
		`"devmodel-anthropic":{"baseUrl":"` + anthropicURL + `","api":"anthropic-messages","apiKey":"DEVMODEL_API_KEY",` +
		`"models":[{"id":"devmodel","name":"AstraBox scripted model","contextWindow":200000,"maxTokens":4096}]}}}`
}

// PiSpec writes models.json into cfg.AgentDir and builds the RPC-mode command.
func PiSpec(cfg PiConfig) (Spec, error) {
	if err := os.MkdirAll(cfg.AgentDir, 0o700); err != nil {
		return Spec{}, fmt.Errorf("create pi agent dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.AgentDir, "models.json"), []byte(PiModelsJSON(cfg.BaseURL)), 0o600); err != nil {
		return Spec{}, fmt.Errorf("write pi models.json: %w", err)
	}
	args := append([]string(nil), cfg.Command...)
	provider := cfg.Provider
	if provider == "" {
		provider = PiProviderChat
	}
	args = append(args, "--mode", "rpc", "--provider", provider, "--model", "devmodel")
	if cfg.SessionFile != "" {
		args = append(args, "--session", cfg.SessionFile)
	}
	for _, ext := range cfg.Extensions {
		args = append(args, "-e", ext)
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + cfg.Home, "LANG=C.UTF-8", "TERM=dumb",
		"PI_CODING_AGENT_DIR=" + cfg.AgentDir, "DEVMODEL_API_KEY=" + PlaceholderAPIKey,
		// Only interactive mode phones home, but keep RPC mode quiet too.
		"PI_OFFLINE=1", "PI_TELEMETRY=0",
	}
	env = append(env, cfg.Env...)
	return Spec{Command: args, Env: env, Dir: cfg.Workdir}, nil
}

// PiEvent is the part of a Pi RPC line callers match on.
type PiEvent struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Command  string          `json:"command"`
	Success  *bool           `json:"success"`
	Message  json.RawMessage `json:"message"`
	Messages json.RawMessage `json:"messages"`
}

// ParsePiLine decodes a stdout line of Pi's RPC mode.
func ParsePiLine(l Line) (PiEvent, bool) {
	if l.Dir != DirOut {
		return PiEvent{}, false
	}
	var e PiEvent
	if err := json.Unmarshal([]byte(l.Text), &e); err != nil {
		return PiEvent{}, false
	}
	return e, true
}

// IsPiType matches Pi RPC lines by type.
func IsPiType(typ string) func(Line) bool {
	return func(l Line) bool {
		e, ok := ParsePiLine(l)
		return ok && e.Type == typ
	}
}
