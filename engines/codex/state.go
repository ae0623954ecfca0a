package codex

import (
	"encoding/json"
	"slices"

	"github.com/astrabox/astrabox/engines"
)

// maxClosedReceipts bounds the closure receipts the translation state keeps for
// reconciliation: enough for any reader to catch up, small enough for every cursor.
const maxClosedReceipts = 32

// maxAdmittedKept bounds the admitted input ids the translation state remembers: Codex
// names an input again within the same turn, never later.
const maxAdmittedKept = 16

// transState is the translation state a cursor carries, so a reader resuming there
// translates the following journal lines exactly as the first reader did.
type transState struct {
	// Status is the last status reported.
	Status engines.RuntimeStatus `json:"status,omitempty"`
	// Resp is the response (Codex turn) in progress, if any.
	Resp *respState `json:"resp,omitempty"`
	// Pending are inputs Codex received whose admission was not yet reported, in order.
	Pending []string `json:"pending,omitempty"`
	// Admitted are the newest inputs whose admission was reported: Codex names an input
	// again after its reply (the userMessage item), which must not admit it twice.
	Admitted []string `json:"admitted,omitempty"`
	// Starting are the inputs Codex answered turn/start for with a turn whose
	// turn/started was not read yet.
	Starting []turnInputs `json:"starting,omitempty"`
	// Open are the approval requests Codex waits on.
	Open []openInteraction `json:"open,omitempty"`
	// Closed are the newest closure receipts.
	Closed []engines.ClosedInteraction `json:"closed,omitempty"`
}

// turnInputs are the inputs Codex took into one turn.
type turnInputs struct {
	Turn     string   `json:"turn"`
	InputIDs []string `json:"input_ids"`
}

// respState is a turn in progress.
type respState struct {
	ID       string                 `json:"id"`
	Turn     string                 `json:"turn"`
	Origin   engines.ResponseOrigin `json:"origin"`
	InputIDs []string               `json:"input_ids"`
	// Paused is set while an interaction segment is closed: the message is reopened
	// before any further part.
	Paused bool `json:"paused,omitempty"`
	// Parts are the text and reasoning parts streaming (item started, not completed).
	Parts []streamPart `json:"parts,omitempty"`
	// Retracted are the part ids withdrawn from this response so far.
	Retracted []string `json:"retracted,omitempty"`
	// Tools are tool calls whose input parts were sent and whose output was not.
	Tools []toolCall `json:"tools,omitempty"`
	// Usage is the newest thread/tokenUsage/updated of the turn, verbatim.
	Usage json.RawMessage `json:"usage,omitempty"`
	// Error is the newest error notification of the turn.
	Error *engines.ResponseError `json:"error,omitempty"`
}

// streamPart is an agentMessage or reasoning item being streamed.
type streamPart struct {
	Item string `json:"item"`
	ID   string `json:"id"`
	Kind string `json:"kind"` // text or reasoning
}

// toolCall is a commandExecution or fileChange item awaiting its completion; Approval
// is the interaction that was answered for it, whose decision the completion shows.
type toolCall struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Approval string `json:"approval,omitempty"`
}

// openInteraction is an approval request Codex waits on, with the JSON-RPC id the
// answer must carry.
type openInteraction struct {
	ID         string                      `json:"id"`
	ResponseID string                      `json:"response_id"`
	RequestID  json.RawMessage             `json:"request_id"`
	CallID     string                      `json:"call_id"`
	Contract   engines.InteractionContract `json:"contract"`
}

func (s *transState) clone() transState {
	out := *s
	if s.Resp != nil {
		r := *s.Resp
		r.InputIDs = slices.Clone(r.InputIDs)
		r.Parts = slices.Clone(r.Parts)
		r.Retracted = slices.Clone(r.Retracted)
		r.Tools = slices.Clone(r.Tools)
		if r.Error != nil {
			e := *r.Error
			r.Error = &e
		}
		out.Resp = &r
	}
	out.Pending = slices.Clone(s.Pending)
	out.Admitted = slices.Clone(s.Admitted)
	out.Starting = slices.Clone(s.Starting)
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

func (s *transState) interactionByRequest(requestID json.RawMessage) (openInteraction, bool) {
	for _, o := range s.Open {
		if string(o.RequestID) == string(requestID) {
			return o, true
		}
	}
	return openInteraction{}, false
}

func (s *transState) removeInteraction(id string) {
	s.Open = slices.DeleteFunc(s.Open, func(o openInteraction) bool { return o.ID == id })
}

func (r *respState) tool(id string) (int, bool) {
	i := slices.IndexFunc(r.Tools, func(t toolCall) bool { return t.ID == id })
	return i, i >= 0
}

func (r *respState) part(item string) (streamPart, bool) {
	i := slices.IndexFunc(r.Parts, func(p streamPart) bool { return p.Item == item })
	if i < 0 {
		return streamPart{}, false
	}
	return r.Parts[i], true
}

// runtimeState is the runtime's account of itself that the translation state holds.
func (s *transState) runtimeState() engines.RuntimeState {
	st := engines.RuntimeState{
		Status:              s.Status,
		OpenResponses:       []engines.OpenResponse{},
		PendingInteractions: []engines.PendingInteraction{},
		ClosedInteractions:  slices.Clone(s.Closed),
		QueuedInputIDs:      []string{},
	}
	if st.Status == "" {
		st.Status = engines.StatusIdle
	}
	if s.Resp != nil {
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
