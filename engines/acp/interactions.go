package acp

import (
	"encoding/json"
	"slices"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/astrabox/astrabox/engines"
)

// programRequest reads a request the program sends the client: a permission request
// opens an interaction; anything else (fs/*, terminal/*, which the client declares it
// does not serve, and vendor requests) is declined and kept as a diagnostic.
func (t *translator) programRequest(l rpcLine, raw json.RawMessage) {
	if l.Method != methodRequestPermission {
		t.diag(l.Method, raw)
		if t.decline != nil {
			t.decline(l.ID, l.Method)
		}
		return
	}
	var req acpsdk.RequestPermissionRequest
	if json.Unmarshal(l.Params, &req) != nil || req.ToolCall.ToolCallId == "" {
		t.diag(l.Method, raw)
		return
	}
	if _, ok := t.st.interactionByRequest(l.ID); ok {
		return
	}
	r := t.ensureResponse()
	if r == nil {
		t.diag("permission_outside_prompt", raw)
		return
	}
	tc := req.ToolCall
	var title string
	if tc.Title != nil {
		title = *tc.Title
	}
	t.endPart()
	t.toolUpdate(string(tc.ToolCallId), title, tc.RawInput, "", nil, nil)
	i, _ := r.tool(string(tc.ToolCallId))
	if !r.Tools[i].InputSent {
		t.toolInput(i, tc.RawInput)
	}
	call := r.Tools[i]
	options := make([]permissionOption, 0, len(req.Options))
	extra := make([]engines.DecisionOption, 0, len(req.Options))
	for _, o := range req.Options {
		options = append(options, permissionOption{ID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
		label := o.Name
		if label == "" {
			label = string(o.OptionId)
		}
		extra = append(extra, engines.DecisionOption{ID: string(o.OptionId), Label: label, Description: string(o.Kind)})
	}
	input, _ := json.Marshal(tc.RawInput)
	if !hasInput(tc.RawInput) {
		input = json.RawMessage(`{}`)
	}
	interactionID := r.ID + ":" + call.ID
	native := engines.NativeRequest{Type: l.Method, ID: string(l.ID), Payload: l.Params}
	c := engines.ToolApprovalContract(native, call.ID, call.Name, input, extra...)
	c.Title = title
	frames, err := engines.InteractionSegmentFrames(r.ID, interactionID, c)
	if err != nil {
		t.diag(l.Method, raw)
		return
	}
	r.Tools[i].Approval = interactionID
	t.st.Open = append(t.st.Open, openInteraction{ID: interactionID, ResponseID: r.ID, RequestID: slices.Clone(l.ID), Options: options, Contract: c})
	t.emit(engines.InteractionOpened{ResponseID: r.ID, InteractionID: interactionID, Contract: c})
	for _, f := range frames {
		t.output(f)
	}
	r.Paused = true
	t.status(engines.StatusWaiting)
}

// answered reads the client's reply to a permission request, as sent: the program has
// the answer from this line on.
func (t *translator) answered(l rpcLine) {
	o, ok := t.st.interactionByRequest(l.ID)
	if !ok {
		return
	}
	var res struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	_ = json.Unmarshal(l.Result, &res)
	if res.Outcome.Outcome != "selected" {
		// Cancelled: the client withdrew the question with the turn.
		t.closeInteraction(o, engines.ClosureWithdrawn)
		return
	}
	approved := false
	for _, opt := range o.Options {
		if opt.ID == res.Outcome.OptionID {
			approved = strings.HasPrefix(opt.Kind, "allow")
		}
	}
	t.closeInteraction(o, engines.ClosureAnswered)
	if r := t.st.Resp; r != nil && r.ID == o.ResponseID {
		t.output(engines.ToolApprovalResponseFrame(o.ID, approved, ""))
	}
}

func (t *translator) closeInteraction(o openInteraction, reason engines.InteractionClosure) {
	t.st.removeInteraction(o.ID)
	t.st.addReceipt(o.ID, reason)
	t.emit(engines.InteractionClosed{InteractionID: o.ID, Reason: reason})
	if len(t.st.Open) == 0 && t.st.Status == engines.StatusWaiting {
		t.status(engines.StatusWorking)
	}
}

// chooseOption picks the program's option for an answer by the options' kinds, never by
// their ids, which differ per program: approve takes allow_once (else allow_always),
// deny reject_once (else reject_always); a declared option id is taken as it is.
func chooseOption(options []permissionOption, decision string) (string, bool) {
	byKind := func(kinds ...acpsdk.PermissionOptionKind) (string, bool) {
		for _, k := range kinds {
			for _, o := range options {
				if o.Kind == string(k) {
					return o.ID, true
				}
			}
		}
		return "", false
	}
	switch decision {
	case engines.DecisionApprove:
		return byKind(acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways)
	case engines.DecisionDeny:
		return byKind(acpsdk.PermissionOptionKindRejectOnce, acpsdk.PermissionOptionKindRejectAlways)
	}
	for _, o := range options {
		if o.ID == decision {
			return o.ID, true
		}
	}
	return "", false
}
