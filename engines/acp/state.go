package acp

import (
	"encoding/json"
	"slices"

	"github.com/astrabox/astrabox/engines"
)

// maxClosedReceipts bounds the closure receipts the translation state keeps for
// reconciliation; maxAdmittedKept the admitted input ids it remembers.
const (
	maxClosedReceipts = 32
	maxAdmittedKept   = 16
)

// transState is the translation state a cursor carries, so a reader resuming there
// translates the following journal lines exactly as the first reader did.
type transState struct {
	// Status is the last status reported.
	Status engines.RuntimeStatus `json:"status,omitempty"`
	// Seq counts the prompts sent to this process: the prompt sequence response ids
	// are minted from.
	Seq int `json:"seq,omitempty"`
	// Prompts are the prompts sent and not yet answered, in order.
	Prompts []prompt `json:"prompts,omitempty"`
	// Resp is the response in progress.
	Resp *respState `json:"resp,omitempty"`
	// Loading is set while a session/load replays the history: its updates are the
	// past, not a response.
	Loading bool `json:"loading,omitempty"`
	// Open are the permission requests the program waits on.
	Open []openInteraction `json:"open,omitempty"`
	// Closed are the newest closure receipts.
	Closed []engines.ClosedInteraction `json:"closed,omitempty"`
	// Admitted are the newest inputs whose admission was reported.
	Admitted []string `json:"admitted,omitempty"`
	// LogClaimed are the session-log lines the newest admitted prompts were found at,
	// so a later prompt with the same text is found at its own line.
	LogClaimed []int `json:"log_claimed,omitempty"`
}

// prompt is a session/prompt the client sent.
type prompt struct {
	Input string `json:"input"`
	Seq   int    `json:"seq"`
	// Text and LogFrom locate the prompt's user record in the session log (admission
	// session_log): its text, and the lines the log held when it was sent.
	Text    string `json:"text,omitempty"`
	LogFrom int    `json:"log_from,omitempty"`
}

// respState is a response in progress: the turn of one prompt, or of several joined.
type respState struct {
	ID       string                 `json:"id"`
	Origin   engines.ResponseOrigin `json:"origin"`
	InputIDs []string               `json:"input_ids"`
	// Unanswered are the response's inputs whose prompt the program has not answered.
	Unanswered []string `json:"unanswered,omitempty"`
	// Paused is set while an interaction segment is closed: the message is reopened
	// before any further part.
	Paused bool `json:"paused,omitempty"`
	// Part is the text or reasoning part streaming, if any; Parts counts the parts.
	Part  *streamPart `json:"part,omitempty"`
	Parts int         `json:"parts,omitempty"`
	// Tools are tool calls whose output was not sent yet.
	Tools []toolCall `json:"tools,omitempty"`
	// Usage is the newest usage_update of the turn, verbatim.
	Usage json.RawMessage `json:"usage,omitempty"`
	// CallTokens sums the token usage the program reported per model call in its
	// chunks' _meta (Qwen Code), for a reply that carries none.
	CallTokens map[string]int64 `json:"call_tokens,omitempty"`
}

// streamPart is a text or reasoning part, with the program's message id it streams.
type streamPart struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"` // text or reasoning
	MessageID string `json:"message_id,omitempty"`
}

// toolCall is a tool call of the response: its input part is open until the input
// is known (InputSent), its output until the program reports it completed or failed.
type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	InputSent bool   `json:"input_sent,omitempty"`
	Approval  string `json:"approval,omitempty"`
}

// openInteraction is a permission request the program waits on, with the JSON-RPC id
// the answer must carry and the options it offered.
type openInteraction struct {
	ID         string                      `json:"id"`
	ResponseID string                      `json:"response_id"`
	RequestID  json.RawMessage             `json:"request_id"`
	Options    []permissionOption          `json:"options"`
	Contract   engines.InteractionContract `json:"contract"`
}

// permissionOption is one option of a permission request.
type permissionOption struct {
	ID   string `json:"optionId"`
	Name string `json:"name"`
	Kind string `json:"kind"`
}

func (s *transState) clone() transState {
	out := *s
	if s.Resp != nil {
		r := *s.Resp
		r.InputIDs = slices.Clone(r.InputIDs)
		r.Unanswered = slices.Clone(r.Unanswered)
		r.Tools = slices.Clone(r.Tools)
		if r.Part != nil {
			p := *r.Part
			r.Part = &p
		}
		out.Resp = &r
	}
	out.Prompts = slices.Clone(s.Prompts)
	out.Open = slices.Clone(s.Open)
	out.Closed = slices.Clone(s.Closed)
	out.Admitted = slices.Clone(s.Admitted)
	out.LogClaimed = slices.Clone(s.LogClaimed)
	return out
}

func (s *transState) addReceipt(id string, reason engines.InteractionClosure) {
	s.Closed = append(s.Closed, engines.ClosedInteraction{InteractionID: id, Reason: reason})
	if len(s.Closed) > maxClosedReceipts {
		s.Closed = s.Closed[len(s.Closed)-maxClosedReceipts:]
	}
}

func (s *transState) interactionByRequest(requestID json.RawMessage) (openInteraction, bool) {
	for _, o := range s.Open {
		if string(o.RequestID) == string(requestID) {
			return o, true
		}
	}
	return openInteraction{}, false
}

func (s *transState) interaction(id string) (openInteraction, bool) {
	i := slices.IndexFunc(s.Open, func(o openInteraction) bool { return o.ID == id })
	if i < 0 {
		return openInteraction{}, false
	}
	return s.Open[i], true
}

func (s *transState) closedAs(id string) (engines.InteractionClosure, bool) {
	for _, c := range s.Closed {
		if c.InteractionID == id {
			return c.Reason, true
		}
	}
	return "", false
}

func (s *transState) removeInteraction(id string) {
	s.Open = slices.DeleteFunc(s.Open, func(o openInteraction) bool { return o.ID == id })
}

func (s *transState) sent(inputID string) bool {
	return slices.ContainsFunc(s.Prompts, func(p prompt) bool { return p.Input == inputID }) ||
		slices.Contains(s.Admitted, inputID)
}

func (r *respState) tool(id string) (int, bool) {
	i := slices.IndexFunc(r.Tools, func(t toolCall) bool { return t.ID == id })
	return i, i >= 0
}

// runtimeState is the runtime's account of itself that the translation state holds.
func (s *transState) runtimeState() engines.RuntimeState {
	st := engines.RuntimeState{
		Status:              s.Status,
		OpenResponses:       []engines.OpenResponse{},
		PendingInteractions: []engines.PendingInteraction{},
		ClosedInteractions:  slices.Clone(s.Closed),
		QueuedInputIDs:      []string{},
		AdmittedInputIDs:    slices.Clone(s.Admitted),
	}
	if st.Status == "" {
		st.Status = engines.StatusIdle
	}
	if s.Resp != nil {
		st.OpenResponses = append(st.OpenResponses, engines.OpenResponse{
			ResponseID: s.Resp.ID, Origin: s.Resp.Origin, InputIDs: slices.Clone(s.Resp.InputIDs)})
	}
	for _, p := range s.Prompts {
		if s.Resp == nil || !slices.Contains(s.Resp.InputIDs, p.Input) {
			st.QueuedInputIDs = append(st.QueuedInputIDs, p.Input)
		}
	}
	for _, o := range s.Open {
		st.PendingInteractions = append(st.PendingInteractions, engines.PendingInteraction{
			ResponseID: o.ResponseID, InteractionID: o.ID, Contract: o.Contract})
	}
	if st.ClosedInteractions == nil {
		st.ClosedInteractions = []engines.ClosedInteraction{}
	}
	if st.AdmittedInputIDs == nil {
		st.AdmittedInputIDs = []string{}
	}
	return st
}

// addCallTokens adds one model call's token usage (an object of counts, as a chunk's
// _meta carries it) to the response's sums; anything else is ignored.
func (r *respState) addCallTokens(usage any) {
	counts, ok := usage.(map[string]any)
	if !ok {
		return
	}
	for k, v := range counts {
		if n, ok := v.(float64); ok {
			if r.CallTokens == nil {
				r.CallTokens = map[string]int64{}
			}
			r.CallTokens[k] += int64(n)
		}
	}
}
