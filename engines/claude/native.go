package claude

import "encoding/json"

// The native line shapes below are the fields of Claude Code 2.1.328's stream-json
// output this package reads; everything else passes through verbatim (raw JSON).

// nativeLine is any stdout line of Claude Code.
type nativeLine struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	UUID            string          `json:"uuid"`
	SessionID       string          `json:"session_id"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	IsReplay        bool            `json:"isReplay"`
	State           string          `json:"state"`
	CommandUUID     string          `json:"command_uuid"`
	RequestID       string          `json:"request_id"`
	Request         json.RawMessage `json:"request"`
	Response        json.RawMessage `json:"response"`
	Event           json.RawMessage `json:"event"`
	Message         json.RawMessage `json:"message"`
	ToolUseResult   json.RawMessage `json:"tool_use_result"`
	Model           string          `json:"model"`
	// AbandonedBlocks is set on the message_stop of a streamed message Claude gave up
	// (a broken stream it retries, an interrupt): the blocks from FromBlockIndex on are
	// not part of the conversation.
	AbandonedBlocks *abandonedBlocks `json:"abandoned_blocks"`
}

// abandonedBlocks names the blocks of a streamed message Claude discarded.
type abandonedBlocks struct {
	APIMessageID   string `json:"api_message_id"`
	FromBlockIndex int    `json:"from_block_index"`
}

// apiMessage is the message of an assistant or user line (the Anthropic message shape).
type apiMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentBlock is one Anthropic content block.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// streamEvent is the event of a stream_event line (an Anthropic SSE event).
type streamEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock *struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
	Message *struct {
		ID string `json:"id"`
	} `json:"message"`
}

// resultLine is the result line that ends a turn.
type resultLine struct {
	Subtype          string          `json:"subtype"`
	IsError          bool            `json:"is_error"`
	StopReason       *string         `json:"stop_reason"`
	TerminalReason   string          `json:"terminal_reason"`
	Result           *string         `json:"result"`
	Errors           []string        `json:"errors"`
	UserMessageUUIDs []string        `json:"user_message_uuids"`
	UserMessageUUID  string          `json:"user_message_uuid"`
	APIErrorStatus   json.RawMessage `json:"api_error_status"`
	Usage            json.RawMessage `json:"usage"`
	ModelUsage       json.RawMessage `json:"modelUsage"`
	TotalCostUSD     json.RawMessage `json:"total_cost_usd"`
	NumTurns         json.RawMessage `json:"num_turns"`
	DurationMS       json.RawMessage `json:"duration_ms"`
	DurationAPIMS    json.RawMessage `json:"duration_api_ms"`
}

// canUseTool is the request of a can_use_tool control request.
type canUseTool struct {
	Subtype     string          `json:"subtype"`
	ToolName    string          `json:"tool_name"`
	DisplayName string          `json:"display_name"`
	Input       json.RawMessage `json:"input"`
	Description string          `json:"description"`
	ToolUseID   string          `json:"tool_use_id"`
	BlockedPath string          `json:"blocked_path"`
}

// controlResponse is the response of a control_response line.
type controlResponse struct {
	Subtype   string          `json:"subtype"`
	RequestID string          `json:"request_id"`
	Response  json.RawMessage `json:"response"`
	Error     string          `json:"error,omitempty"`
	ErrorCode string          `json:"error_code,omitempty"`
}

// permissionResult is Claude's answer shape for can_use_tool.
type permissionResult struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

func decodeBlocks(raw json.RawMessage) []contentBlock {
	var blocks []contentBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil
	}
	return blocks
}
