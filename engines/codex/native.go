package codex

import "encoding/json"

// Codex app-server methods this package sends or reads (0.169.0).
const (
	methodInitialize    = "initialize"
	methodInitialized   = "initialized"
	methodThreadStart   = "thread/start"
	methodThreadResume  = "thread/resume"
	methodThreadNameSet = "thread/name/set"
	methodTurnStart     = "turn/start"
	methodTurnInterrupt = "turn/interrupt"

	notifyThreadStatus    = "thread/status/changed"
	notifyTurnStarted     = "turn/started"
	notifyTurnCompleted   = "turn/completed"
	notifyItemStarted     = "item/started"
	notifyItemCompleted   = "item/completed"
	notifyAgentDelta      = "item/agentMessage/delta"
	notifyReasoningDelta  = "item/reasoning/summaryTextDelta"
	notifyReasoningText   = "item/reasoning/textDelta"
	notifyTokenUsage      = "thread/tokenUsage/updated"
	notifyError           = "error"
	notifyRequestResolved = "serverRequest/resolved"

	requestCommandApproval    = "item/commandExecution/requestApproval"
	requestFileChangeApproval = "item/fileChange/requestApproval"
)

// Codex's item types this package translates.
const (
	itemUserMessage      = "userMessage"
	itemAgentMessage     = "agentMessage"
	itemReasoning        = "reasoning"
	itemCommandExecution = "commandExecution"
	itemFileChange       = "fileChange"
)

// Codex's turn statuses on turn/completed.
const (
	turnInProgress  = "inProgress"
	turnCompleted   = "completed"
	turnInterrupted = "interrupted"
	turnFailed      = "failed"
)

// requestIDPrefixInput starts the JSON-RPC id of the turn/start that carries an input:
// the rest is the input id, so Codex's reply names the input it answers.
const requestIDPrefixInput = "input:"

// rpcLine is one line the app-server prints: a response to our request (id, result or
// error), a request of its own (id and method) or a notification (method only).
type rpcLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (l rpcLine) isResponse() bool      { return len(l.ID) > 0 && l.Method == "" }
func (l rpcLine) isServerRequest() bool { return len(l.ID) > 0 && l.Method != "" }

// turnRef is the turn a turn/start reply, turn/started or turn/completed carries.
type turnRef struct {
	Turn struct {
		ID     string     `json:"id"`
		Status string     `json:"status"`
		Error  *turnError `json:"error"`
	} `json:"turn"`
}

// turnError is Codex's error of a failed turn or error notification.
type turnError struct {
	Message        string          `json:"message"`
	CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
}

// itemParams are the params of item/started and item/completed.
type itemParams struct {
	Item   json.RawMessage `json:"item"`
	TurnID string          `json:"turnId"`
}

// item is the part of a thread item this package reads; the rest stays verbatim.
type item struct {
	Type             string            `json:"type"`
	ID               string            `json:"id"`
	ClientID         string            `json:"clientId"`
	Text             string            `json:"text"`
	Command          string            `json:"command"`
	Cwd              string            `json:"cwd"`
	CommandActions   json.RawMessage   `json:"commandActions"`
	Status           string            `json:"status"`
	ExitCode         json.RawMessage   `json:"exitCode"`
	AggregatedOutput json.RawMessage   `json:"aggregatedOutput"`
	DurationMS       json.RawMessage   `json:"durationMs"`
	Changes          []fileChangeEntry `json:"changes"`
}

// fileChangeEntry is one change of a fileChange item.
type fileChangeEntry struct {
	Path string `json:"path"`
	Kind struct {
		Type     string `json:"type"`
		MovePath string `json:"move_path"`
	} `json:"kind"`
	Diff string `json:"diff"`
}

// deltaParams are the params of the streaming deltas.
type deltaParams struct {
	ItemID string `json:"itemId"`
	TurnID string `json:"turnId"`
	Delta  string `json:"delta"`
}

// threadStatus is the status of thread/status/changed.
type threadStatus struct {
	Status struct {
		Type        string   `json:"type"`
		ActiveFlags []string `json:"activeFlags"`
	} `json:"status"`
}

// approvalRequest is the part of an approval request this package reads.
type approvalRequest struct {
	TurnID             string            `json:"turnId"`
	ItemID             string            `json:"itemId"`
	Command            string            `json:"command"`
	Reason             *string           `json:"reason"`
	AvailableDecisions []json.RawMessage `json:"availableDecisions"`
}
