package pi

import "encoding/json"

// Pi's rpc commands this package sends (0.73.1).
const (
	cmdPrompt              = "prompt"
	cmdAbort               = "abort"
	cmdGetState            = "get_state"
	cmdExtensionUIResponse = "extension_ui_response"
)

// Pi's rpc events this package reads.
const (
	evResponse           = "response"
	evAgentStart         = "agent_start"
	evAgentEnd           = "agent_end"
	evTurnStart          = "turn_start"
	evTurnEnd            = "turn_end"
	evMessageStart       = "message_start"
	evMessageUpdate      = "message_update"
	evMessageEnd         = "message_end"
	evToolStart          = "tool_execution_start"
	evToolUpdate         = "tool_execution_update"
	evToolEnd            = "tool_execution_end"
	evExtensionUIRequest = "extension_ui_request"
	evQueueUpdate        = "queue_update"
)

// Roles of Pi's messages.
const (
	roleUser       = "user"
	roleAssistant  = "assistant"
	roleToolResult = "toolResult"
)

// Pi's assistant stop reasons (stopReason), kept verbatim as native_reason.
const (
	stopStop    = "stop"
	stopLength  = "length"
	stopToolUse = "toolUse"
	stopAborted = "aborted"
	stopError   = "error"
)

// Request id prefixes: the rest of an input's prompt id is the input id, so Pi's
// response names the input it accepted.
const (
	requestIDPrefixInput = "input:"
	requestIDState       = "state"
)

// streamingBehaviorSteer makes a prompt sent while Pi works a steering message,
// delivered after the current assistant message or tool batch within the same run;
// while Pi is idle the prompt starts a run as usual.
const streamingBehaviorSteer = "steer"

// line is the part of an rpc line this package reads; the rest stays verbatim.
type line struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Command string          `json:"command"`
	Success *bool           `json:"success"`
	Error   string          `json:"error"`
	Data    json.RawMessage `json:"data"`
	Message json.RawMessage `json:"message"`
	// message_update
	Event *assistantEvent `json:"assistantMessageEvent"`
	// tool_execution_*
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args"`
	Result     json.RawMessage `json:"result"`
	IsError    bool            `json:"isError"`
	// extension_ui_request
	Method     string   `json:"method"`
	Title      string   `json:"title"`
	Options    []string `json:"options"`
	StatusKey  string   `json:"statusKey"`
	StatusText string   `json:"statusText"`
}

// assistantEvent is a streaming event of the assistant message.
type assistantEvent struct {
	Type         string `json:"type"`
	ContentIndex int    `json:"contentIndex"`
	Delta        string `json:"delta"`
}

// message is the part of a Pi message this package reads.
type message struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Timestamp int64           `json:"timestamp"`
	// InputID is the input a user message delivers, as the platform extension
	// recorded it (inputIDField).
	InputID      string `json:"astraboxInputId"`
	StopReason   string `json:"stopReason"`
	ErrorMessage string `json:"errorMessage"`
	Model        string `json:"model"`
	Usage        *usage `json:"usage"`
}

// usage is Pi's token usage of one assistant message.
type usage struct {
	Input       int64 `json:"input"`
	Output      int64 `json:"output"`
	CacheRead   int64 `json:"cacheRead"`
	CacheWrite  int64 `json:"cacheWrite"`
	TotalTokens int64 `json:"totalTokens"`
}

func (u *usage) add(o *usage) {
	if o == nil {
		return
	}
	u.Input += o.Input
	u.Output += o.Output
	u.CacheRead += o.CacheRead
	u.CacheWrite += o.CacheWrite
	u.TotalTokens += o.TotalTokens
}

// piState is the part of get_state's data this package reads.
type piState struct {
	SessionID   string `json:"sessionId"`
	SessionFile string `json:"sessionFile"`
	Model       struct {
		ID       string `json:"id"`
		Provider string `json:"provider"`
	} `json:"model"`
}
