package pi

import (
	"slices"

	"github.com/astrabox/astrabox/engines"
)

// maxClosedReceipts bounds the closure receipts the translation state keeps.
const maxClosedReceipts = 32

// maxAdmittedKept bounds the admitted input ids the translation state remembers, so a
// repeated response line for an input does not admit it again.
const maxAdmittedKept = 16

// transState is the translation state a cursor carries, so a reader resuming there
// translates the following journal lines exactly as the first reader did.
type transState struct {
	// Status is the last status reported.
	Status engines.RuntimeStatus `json:"status,omitempty"`
	// Resp is the run (agent_start … agent_end) in progress, if any.
	Resp *respState `json:"resp,omitempty"`
	// Received are inputs Pi accepted (its prompt response) whose user message it has
	// not delivered yet, in order.
	Received []string `json:"received,omitempty"`
	// Pending are delivered inputs whose user message the session file does not hold
	// yet.
	Pending []string `json:"pending,omitempty"`
	// Admitted are the newest inputs whose admission was reported.
	Admitted []string `json:"admitted,omitempty"`
	// Open are the approval questions Pi's extension waits on.
	Open []openInteraction `json:"open,omitempty"`
	// Closed are the newest closure receipts.
	Closed []engines.ClosedInteraction `json:"closed,omitempty"`
	// Model is the model of the newest assistant message.
	Model string `json:"model,omitempty"`
}

// respState is a run in progress.
type respState struct {
	ID       string                 `json:"id"`
	Origin   engines.ResponseOrigin `json:"origin"`
	InputIDs []string               `json:"input_ids"`
	// Started is set once ResponseStarted was reported: Pi names the run's inputs
	// in the user messages right after agent_start.
	Started bool `json:"started,omitempty"`
	// Paused is set while an interaction segment is closed.
	Paused bool `json:"paused,omitempty"`
	// Msg counts the run's assistant messages: part ids are namespaced by it.
	Msg int `json:"msg"`
	// Parts are the text and thinking parts streaming in the current message.
	Parts []streamPart `json:"parts,omitempty"`
	// Tools are tool executions whose input parts were sent and whose output was not.
	Tools []toolCall `json:"tools,omitempty"`
	// Usage sums the run's assistant messages' usage.
	Usage usage `json:"usage"`
	// Stop and ErrorMessage are the newest assistant message's stopReason and
	// errorMessage.
	Stop         string `json:"stop,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// streamPart is a text or thinking block being streamed.
type streamPart struct {
	Index int    `json:"index"`
	ID    string `json:"id"`
	Kind  string `json:"kind"` // text or reasoning
}

// toolCall is a tool execution awaiting its end; Approval is the interaction answered
// for it and Denied whether the person denied it.
type toolCall struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Approval string `json:"approval,omitempty"`
	Denied   bool   `json:"denied,omitempty"`
}

// openInteraction is an approval question Pi's extension waits on, with the id of the
// extension UI request the answer must carry.
type openInteraction struct {
	ID         string                      `json:"id"`
	ResponseID string                      `json:"response_id"`
	RequestID  string                      `json:"request_id"`
	CallID     string                      `json:"call_id"`
	Contract   engines.InteractionContract `json:"contract"`
}

func (s *transState) clone() transState {
	out := *s
	if s.Resp != nil {
		r := *s.Resp
		r.InputIDs = slices.Clone(r.InputIDs)
		r.Parts = slices.Clone(r.Parts)
		r.Tools = slices.Clone(r.Tools)
		out.Resp = &r
	}
	out.Received = slices.Clone(s.Received)
	out.Pending = slices.Clone(s.Pending)
	out.Admitted = slices.Clone(s.Admitted)
	out.Open = slices.Clone(s.Open)
	out.Closed = slices.Clone(s.Closed)
	return out
}

func (s *transState) addReceipt(id string, reason engines.InteractionClosure) {
	s.Closed = append(s.Closed, engines.ClosedInteraction{InteractionID: id, Reason: reason})
	if len(s.Closed) > maxClosedReceipts {
		s.Closed = s.Closed[len(s.Closed)-maxClosedReceipts:]
	}
}

func (s *transState) removeInteraction(id string) {
	s.Open = slices.DeleteFunc(s.Open, func(o openInteraction) bool { return o.ID == id })
}

func (s *transState) knows(inputID string) bool {
	return slices.Contains(s.Received, inputID) || slices.Contains(s.Admitted, inputID) || slices.Contains(s.Pending, inputID)
}

func (r *respState) tool(id string) (int, bool) {
	i := slices.IndexFunc(r.Tools, func(t toolCall) bool { return t.ID == id })
	return i, i >= 0
}

// runtimeState is the runtime's account of itself that the translation state holds.
// Inputs Pi accepted but has not delivered are queued in its memory only.
func (s *transState) runtimeState() engines.RuntimeState {
	st := engines.RuntimeState{
		Status:              s.Status,
		OpenResponses:       []engines.OpenResponse{},
		PendingInteractions: []engines.PendingInteraction{},
		ClosedInteractions:  slices.Clone(s.Closed),
		QueuedInputIDs:      slices.Clone(s.Received),
	}
	if st.Status == "" {
		st.Status = engines.StatusIdle
	}
	if st.QueuedInputIDs == nil {
		st.QueuedInputIDs = []string{}
	}
	if s.Resp != nil && s.Resp.Started {
		st.OpenResponses = append(st.OpenResponses, engines.OpenResponse{
			ResponseID: s.Resp.ID, Origin: s.Resp.Origin, InputIDs: slices.Clone(s.Resp.InputIDs)})
	}
	for _, o := range s.Open {
		st.PendingInteractions = append(st.PendingInteractions, engines.PendingInteraction{
			ResponseID: o.ResponseID, InteractionID: o.ID, Contract: o.Contract})
	}
	if st.ClosedInteractions == nil {
		st.ClosedInteractions = []engines.ClosedInteraction{}
	}
	return st
}
