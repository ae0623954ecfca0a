package claude

import (
	"encoding/json"

	"github.com/astrabox/astrabox/engines"
)

// Claude's control request subtypes this package handles or sends.
const (
	subtypeCanUseTool        = "can_use_tool"
	subtypeInterrupt         = "interrupt"
	subtypeSetPermissionMode = "set_permission_mode"
	subtypeInitialize        = "initialize"
)

// controlRequest opens an interaction for can_use_tool; other requests Claude sends
// (hook callbacks, MCP messages) are kept as diagnostics.
func (t *translator) controlRequest(n nativeLine, raw json.RawMessage) {
	var req canUseTool
	if err := json.Unmarshal(n.Request, &req); err != nil || req.Subtype != subtypeCanUseTool || n.RequestID == "" {
		t.diag("control_request", raw)
		return
	}
	if _, ok := t.st.openInteraction(n.RequestID); ok {
		return
	}
	if t.st.Resp == nil {
		t.openResponse("resp_engine_"+n.RequestID, engines.OriginEngine, nil)
	}
	r := t.st.Resp
	input := req.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	callID := req.ToolUseID
	if callID == "" {
		callID = n.RequestID
	}
	if _, ok := r.tool(callID); !ok {
		t.toolInput(contentBlock{Type: "tool_use", ID: callID, Name: req.ToolName, Input: input}, false)
	}
	native := engines.NativeRequest{Type: subtypeCanUseTool, ID: n.RequestID, Payload: n.Request}
	c := engines.ToolApprovalContract(native, callID, req.ToolName, input)
	c.Title = req.DisplayName
	c.Prompt = req.Description
	frames, err := engines.InteractionSegmentFrames(r.ID, n.RequestID, c)
	if err != nil {
		t.diag("control_request", raw)
		return
	}
	t.st.Open = append(t.st.Open, openInteraction{ID: n.RequestID, ResponseID: r.ID, Contract: c})
	t.emit(engines.InteractionOpened{ResponseID: r.ID, InteractionID: n.RequestID, Contract: c})
	for _, f := range frames {
		t.output(f)
	}
	r.Paused = true
	t.status(engines.StatusWaiting)
}

// cancelRequest closes an interaction Claude withdrew (an interrupt while it waited).
func (t *translator) cancelRequest(n nativeLine) {
	if _, ok := t.st.openInteraction(n.RequestID); !ok {
		return
	}
	t.st.removeInteraction(n.RequestID)
	t.st.addReceipt(n.RequestID, engines.ClosureWithdrawn)
	t.emit(engines.InteractionClosed{InteractionID: n.RequestID, Reason: engines.ClosureWithdrawn})
}

// controlResponse reads Claude's echo of an answer we sent (--replay-user-messages):
// the journalled proof that Claude accepted it. Responses to our own control requests
// are read by the client that sent them.
func (t *translator) controlResponse(n nativeLine) {
	var resp controlResponse
	if err := json.Unmarshal(n.Response, &resp); err != nil {
		return
	}
	o, ok := t.st.openInteraction(resp.RequestID)
	if !ok || resp.Subtype != "success" {
		return
	}
	var answer permissionResult
	_ = json.Unmarshal(resp.Response, &answer)
	t.st.removeInteraction(o.ID)
	t.st.addReceipt(o.ID, engines.ClosureAnswered)
	t.emit(engines.InteractionClosed{InteractionID: o.ID, Reason: engines.ClosureAnswered})
	if r := t.st.Resp; r != nil && r.ID == o.ResponseID {
		t.output(engines.ToolApprovalResponseFrame(o.ID, answer.Behavior == "allow", answer.Message))
	}
}
