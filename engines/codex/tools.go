package codex

import (
	"encoding/json"
	"fmt"

	"github.com/astrabox/astrabox/engines"
)

// toolInput opens a tool part for a commandExecution, fileChange or any other item that
// is not text: the tool name is Codex's item type and the input Codex's own fields of
// the request (the command and where it runs, or the changes), unchanged.
func (t *translator) toolInput(it item, raw json.RawMessage) {
	r := t.st.Resp
	if it.ID == "" {
		t.diag(notifyItemStarted, raw)
		return
	}
	if _, ok := r.tool(it.ID); ok {
		return
	}
	input := raw
	switch it.Type {
	case itemCommandExecution:
		input, _ = json.Marshal(map[string]any{"command": it.Command, "cwd": it.Cwd, "commandActions": it.CommandActions})
	case itemFileChange:
		input, _ = json.Marshal(map[string]any{"changes": it.Changes})
	}
	r.Tools = append(r.Tools, toolCall{ID: it.ID, Name: it.Type})
	t.output(engines.MustFrame(engines.ToolInputStartChunk{ToolCallID: it.ID, ToolName: it.Type}))
	t.output(engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: it.ID, ToolName: it.Type, Input: input}))
}

// toolOutput ends a tool part with the completed item: a declined one as denied, a
// failed one as an error, otherwise Codex's result fields verbatim; a completed
// fileChange also reports its changes as data-file-changes.
func (t *translator) toolOutput(it item, raw json.RawMessage) {
	r := t.st.Resp
	i, ok := r.tool(it.ID)
	if !ok {
		t.toolInput(it, raw)
		i, _ = r.tool(it.ID)
	}
	call := r.Tools[i]
	r.Tools = append(r.Tools[:i], r.Tools[i+1:]...)
	if call.Approval != "" {
		t.output(engines.ToolApprovalResponseFrame(call.Approval, it.Status != "declined", ""))
	}
	switch it.Status {
	case "declined":
		t.output(engines.MustFrame(engines.ToolOutputDeniedChunk{ToolCallID: it.ID}))
		return
	case "failed":
		t.output(engines.MustFrame(engines.ToolOutputErrorChunk{ToolCallID: it.ID, ErrorText: failureText(it)}))
		return
	}
	output := raw
	switch it.Type {
	case itemCommandExecution:
		output, _ = json.Marshal(map[string]json.RawMessage{"status": jsonString(it.Status), "exitCode": it.ExitCode,
			"aggregatedOutput": it.AggregatedOutput, "durationMs": it.DurationMS})
	case itemFileChange:
		output, _ = json.Marshal(map[string]any{"status": it.Status})
	}
	t.output(engines.MustFrame(engines.ToolOutputAvailableChunk{ToolCallID: it.ID, Output: output}))
	if it.Type == itemFileChange && it.Status == "completed" {
		t.fileChanges(it, raw)
	}
}

func failureText(it item) string {
	var out string
	_ = json.Unmarshal(it.AggregatedOutput, &out)
	if out == "" {
		return fmt.Sprintf("Codex reports the %s item failed", it.Type)
	}
	return out
}

func jsonString(s string) json.RawMessage {
	raw, _ := json.Marshal(s)
	return raw
}

// fileChanges reports a completed fileChange item's changes: Codex confirms each path
// with its kind and a diff (a unified patch for an update, the content for an add).
func (t *translator) fileChanges(it item, raw json.RawMessage) {
	var changes []engines.FileChange
	for _, c := range it.Changes {
		fc := engines.FileChange{Path: c.Path, Kind: c.Kind.Type, MovePath: c.Kind.MovePath}
		switch {
		case c.Diff == "":
		case c.Kind.Type == "add":
			after := c.Diff
			fc.Diff = &engines.FileDiff{Format: engines.DiffContentPair, After: &after}
		case c.Kind.Type == "delete":
			before := c.Diff
			fc.Diff = &engines.FileDiff{Format: engines.DiffContentPair, Before: &before}
		default:
			fc.Diff = &engines.FileDiff{Format: engines.DiffUnifiedPatch, Patch: c.Diff}
		}
		changes = append(changes, fc)
	}
	if len(changes) == 0 {
		return
	}
	f, err := engines.FileChangesFrame(it.ID, changes)
	if err != nil {
		t.diag("file_changes", raw)
		return
	}
	t.output(f)
}

// Codex's approval decisions (CommandExecutionApprovalDecision and
// FileChangeApprovalDecision), in its own words.
const (
	decisionAccept           = "accept"
	decisionDecline          = "decline"
	decisionAcceptForSession = "acceptForSession"
	decisionCancel           = "cancel"
)

// extraDecisions are Codex's choices beyond accept and decline, offered as options of
// the tool approval under Codex's own values.
var extraDecisions = map[string]engines.DecisionOption{
	decisionAcceptForSession: {ID: decisionAcceptForSession, Label: "Accept for the session",
		Description: "Codex does not ask again for this kind of request in this session."},
	decisionCancel: {ID: decisionCancel, Label: "Decline and stop the turn",
		Description: "Codex declines and interrupts the turn."},
}

// serverRequest opens an interaction for a command or file-change approval; other
// requests go to otherRequest.
func (t *translator) serverRequest(l rpcLine, raw json.RawMessage) {
	if l.Method != requestCommandApproval && l.Method != requestFileChangeApproval {
		t.otherRequest(l, raw)
		return
	}
	var req approvalRequest
	r := t.st.Resp
	if json.Unmarshal(l.Params, &req) != nil || req.ItemID == "" || r == nil || (req.TurnID != "" && req.TurnID != r.Turn) {
		t.diag(l.Method, raw)
		return
	}
	if _, ok := t.st.interactionByRequest(l.ID); ok {
		return
	}
	i, ok := r.tool(req.ItemID)
	if !ok {
		name := itemCommandExecution
		if l.Method == requestFileChangeApproval {
			name = itemFileChange
		}
		t.toolInput(item{Type: name, ID: req.ItemID, Command: req.Command}, l.Params)
		i, _ = r.tool(req.ItemID)
	}
	call := r.Tools[i]
	interactionID := interactionIDFor(r.Turn, req.ItemID)
	native := engines.NativeRequest{Type: l.Method, ID: string(l.ID), Payload: l.Params}
	c := engines.ToolApprovalContract(native, call.ID, call.Name, l.Params, offeredDecisions(l.Method, req)...)
	if req.Reason != nil {
		c.Prompt = *req.Reason
	}
	frames, err := engines.InteractionSegmentFrames(r.ID, interactionID, c)
	if err != nil {
		t.diag(l.Method, raw)
		return
	}
	r.Tools[i].Approval = interactionID
	t.st.Open = append(t.st.Open, openInteraction{ID: interactionID, ResponseID: r.ID, RequestID: l.ID, CallID: call.ID, Contract: c})
	t.emit(engines.InteractionOpened{ResponseID: r.ID, InteractionID: interactionID, Contract: c})
	for _, f := range frames {
		t.output(f)
	}
	r.Paused = true
	t.status(engines.StatusWaiting)
}

// interactionIDFor names the approval of an item: Codex's request ids restart with
// every app-server, its item ids are the provider's call ids, so the turn id
// namespaces the item's.
func interactionIDFor(turnID, itemID string) string { return turnID + ":" + itemID }

// offeredDecisions are the extra choices Codex offers: a command approval lists them
// (availableDecisions; the object forms such as acceptWithExecpolicyAmendment carry
// Codex-made amendments this adapter does not offer), a file-change approval takes
// every FileChangeApprovalDecision.
func offeredDecisions(method string, req approvalRequest) []engines.DecisionOption {
	var out []engines.DecisionOption
	if method == requestFileChangeApproval || req.AvailableDecisions == nil {
		return append(out, extraDecisions[decisionAcceptForSession], extraDecisions[decisionCancel])
	}
	for _, raw := range req.AvailableDecisions {
		var d string
		if json.Unmarshal(raw, &d) != nil {
			continue
		}
		if o, ok := extraDecisions[d]; ok {
			out = append(out, o)
		}
	}
	return out
}

// requestResolved closes an interaction Codex no longer waits on. While its turn runs
// that is the answer taking effect (the item's completion then shows the decision); a
// request Codex resolves itself ends with its turn, where it is closed as withdrawn
// before this notification arrives.
func (t *translator) requestResolved(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	o, ok := t.st.interactionByRequest(p.RequestID)
	if !ok {
		return
	}
	t.st.removeInteraction(o.ID)
	t.st.addReceipt(o.ID, engines.ClosureAnswered)
	t.emit(engines.InteractionClosed{InteractionID: o.ID, Reason: engines.ClosureAnswered})
	if len(t.st.Open) == 0 && t.st.Status == engines.StatusWaiting {
		t.status(engines.StatusWorking)
	}
}
