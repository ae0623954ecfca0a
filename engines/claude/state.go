package claude

import (
	"slices"

	"github.com/astrabox/astrabox/engines"
)

// maxClosedReceipts bounds the closure receipts the translation state keeps for
// reconciliation: enough for any reader to catch up, small enough for every cursor.
const maxClosedReceipts = 32

// transState is the translation state the journal alone cannot rebuild cheaply from an
// arbitrary offset: it travels in every cursor position, so a reader resuming there
// translates the following lines exactly as the first reader did.
type transState struct {
	// Status is the last status reported.
	Status engines.RuntimeStatus `json:"status,omitempty"`
	// Resp is the response in progress, if any.
	Resp *respState `json:"resp,omitempty"`
	// Pending are inputs Claude received (command_lifecycle queued) whose admission was
	// not yet reported, in order.
	Pending []string `json:"pending,omitempty"`
	// Queued are inputs Claude received and has not started, in order.
	Queued []string `json:"queued,omitempty"`
	// Open are the interactions Claude waits on.
	Open []openInteraction `json:"open,omitempty"`
	// Closed are the newest closure receipts.
	Closed []engines.ClosedInteraction `json:"closed,omitempty"`
	// Children are the running sub-agents.
	Children []childRun `json:"children,omitempty"`
}

// childRun is a running sub-agent: the tool_use id of its Agent call and what
// task_started said about it, repeated in its final report.
type childRun struct {
	ID        string `json:"id"`
	Title     string `json:"title,omitempty"`
	AgentType string `json:"agent_type,omitempty"`
}

// respState is a response in progress.
type respState struct {
	ID       string                 `json:"id"`
	Origin   engines.ResponseOrigin `json:"origin"`
	InputIDs []string               `json:"input_ids"`
	// Paused is set while an interaction segment is closed: the message is reopened
	// before any further part.
	Paused bool `json:"paused,omitempty"`
	// Msg is the API message id being streamed, and Blocks its open content blocks.
	Msg    string        `json:"msg,omitempty"`
	Blocks map[int]block `json:"blocks,omitempty"`
	// Previews are the text and reasoning parts streamed for Msg, kept until the message
	// ends: Claude can abandon them (a broken stream it retries) and they are withdrawn.
	Previews []preview `json:"previews,omitempty"`
	// Retracted are the part ids withdrawn from this response so far; each retraction
	// part carries all of them.
	Retracted []string `json:"retracted,omitempty"`
	// Tools are tool calls whose input parts were sent and whose output was not.
	Tools []toolCall `json:"tools,omitempty"`
}

// block is an open content block of the streamed API message.
type block struct {
	Kind string `json:"kind"` // text, reasoning or tool
	ID   string `json:"id"`
	// Available is set once a tool block's complete input was sent.
	Available bool `json:"available,omitempty"`
}

// preview is a streamed text or reasoning part: its content block index in the API
// message and its part id.
type preview struct {
	Index int    `json:"index"`
	ID    string `json:"id"`
}

// toolCall is a tool call awaiting its output.
type toolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// openInteraction is a can_use_tool request Claude waits on.
type openInteraction struct {
	ID         string                      `json:"id"`
	ResponseID string                      `json:"response_id"`
	Contract   engines.InteractionContract `json:"contract"`
}

func (s *transState) clone() transState {
	out := *s
	if s.Resp != nil {
		r := *s.Resp
		r.InputIDs = slices.Clone(r.InputIDs)
		r.Tools = slices.Clone(r.Tools)
		r.Previews = slices.Clone(r.Previews)
		r.Retracted = slices.Clone(r.Retracted)
		if r.Blocks != nil {
			r.Blocks = make(map[int]block, len(s.Resp.Blocks))
			for k, v := range s.Resp.Blocks {
				r.Blocks[k] = v
			}
		}
		out.Resp = &r
	}
	out.Pending = slices.Clone(s.Pending)
	out.Queued = slices.Clone(s.Queued)
	out.Open = slices.Clone(s.Open)
	out.Closed = slices.Clone(s.Closed)
	out.Children = slices.Clone(s.Children)
	return out
}

func (s *transState) addReceipt(id string, reason engines.InteractionClosure) {
	s.Closed = append(s.Closed, engines.ClosedInteraction{InteractionID: id, Reason: reason})
	if len(s.Closed) > maxClosedReceipts {
		s.Closed = s.Closed[len(s.Closed)-maxClosedReceipts:]
	}
}

func (s *transState) openInteraction(id string) (openInteraction, bool) {
	for _, o := range s.Open {
		if o.ID == id {
			return o, true
		}
	}
	return openInteraction{}, false
}

func (s *transState) removeInteraction(id string) {
	s.Open = slices.DeleteFunc(s.Open, func(o openInteraction) bool { return o.ID == id })
}

func (r *respState) tool(id string) (toolCall, bool) {
	for _, t := range r.Tools {
		if t.ID == id {
			return t, true
		}
	}
	return toolCall{}, false
}

// runtimeState is the runtime's account of itself that the translation state holds.
func (s *transState) runtimeState() engines.RuntimeState {
	st := engines.RuntimeState{
		Status:              s.Status,
		OpenResponses:       []engines.OpenResponse{},
		PendingInteractions: []engines.PendingInteraction{},
		ClosedInteractions:  slices.Clone(s.Closed),
		QueuedInputIDs:      slices.Clone(s.Queued),
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
	if st.QueuedInputIDs == nil {
		st.QueuedInputIDs = []string{}
	}
	return st
}
