package pi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// translator turns Pi's stdout lines into runtime events. It is a pure function of its
// state and the line (plus the admission lookup): the client replays the journal
// through it, and a cursor carries the state from before the line.
type translator struct {
	st transState
	// process names the process session: run ids are unique per launch.
	process string
	// admitted reports whether the session file holds the input's user message.
	admitted func(inputID string) bool
	out      []engines.Event
}

// quietEvents are events the contract has no use for: their facts reach it through
// other lines (a turn's messages, the tool's final result, the queue Pi reports the
// platform already knows from its responses).
var quietEvents = []string{evTurnStart, evTurnEnd, evToolUpdate, evQueueUpdate}

// apply translates one journal line and returns its events, without cursors.
func (t *translator) apply(ol engines.OutputLine) []engines.Event {
	t.out = nil
	if ol.Stream == engines.Stderr {
		raw, _ := json.Marshal(string(ol.Data))
		t.diag("stderr", raw)
		return t.out
	}
	var l line
	if err := json.Unmarshal(ol.Data, &l); err != nil || l.Type == "" {
		raw, _ := json.Marshal(string(ol.Data))
		t.diag("unparsed_stdout", raw)
		return t.out
	}
	raw := json.RawMessage(ol.Data)
	switch l.Type {
	case evResponse:
		t.response(l, raw)
	case evAgentStart:
		t.agentStart(ol.Offset)
	case evAgentEnd:
		t.agentEnd()
	case evMessageStart:
		t.messageStart(l, raw)
	case evMessageUpdate:
		t.messageUpdate(l)
	case evMessageEnd:
		t.messageEnd(l, raw)
	case evToolStart:
		t.toolStart(l, raw)
	case evToolEnd:
		t.toolEnd(l, raw)
	case evExtensionUIRequest:
		t.extensionRequest(l, raw)
	default:
		if !slices.Contains(quietEvents, l.Type) {
			t.diag(l.Type, raw)
		}
	}
	t.admit()
	return t.out
}

func (t *translator) emit(ev engines.Event) { t.out = append(t.out, ev) }

func (t *translator) diag(kind string, raw json.RawMessage) {
	t.emit(engines.RuntimeDiagnostic{EventType: kind, Raw: slices.Clone(raw)})
}

func (t *translator) status(s engines.RuntimeStatus) {
	if t.st.Status == s {
		return
	}
	t.st.Status = s
	t.emit(engines.StatusChanged{Status: s})
}

// admit reports the delivered inputs whose user message the session file now holds.
func (t *translator) admit() {
	if len(t.st.Pending) == 0 || t.admitted == nil {
		return
	}
	var still []string
	for _, id := range t.st.Pending {
		if !t.admitted(id) {
			still = append(still, id)
			continue
		}
		t.emit(engines.InputAdmitted{InputID: id})
		t.st.Admitted = append(t.st.Admitted, id)
		if len(t.st.Admitted) > maxAdmittedKept {
			t.st.Admitted = t.st.Admitted[len(t.st.Admitted)-maxAdmittedKept:]
		}
	}
	t.st.Pending = still
}

// response reads Pi's response to a command we sent. An accepted prompt queues its
// input until Pi delivers it as a user message; a refused one is kept as a
// diagnostic (the input stays in the platform's custody).
func (t *translator) response(l line, raw json.RawMessage) {
	inputID, ok := strings.CutPrefix(l.ID, requestIDPrefixInput)
	if !ok {
		if l.Success != nil && !*l.Success {
			t.diag("error_response", raw)
		}
		return
	}
	if l.Success == nil || !*l.Success {
		t.diag("error_response", raw)
		return
	}
	if inputID != "" && !t.st.knows(inputID) {
		t.st.Received = append(t.st.Received, inputID)
	}
}

// agentStart opens a run. It is reported once Pi names its inputs (the user messages
// that follow) or produces output.
func (t *translator) agentStart(offset int64) {
	if t.st.Resp != nil {
		// A run that never ended (not seen in Pi): close it before the new one.
		t.agentEnd()
	}
	t.st.Resp = &respState{ID: fmt.Sprintf("%s-%d", t.process, offset), Origin: engines.OriginEngine}
	t.status(engines.StatusWorking)
}

func (t *translator) startFrame() engines.Frame {
	r := t.st.Resp
	return engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: r.ID, InputIDs: slices.Clone(r.InputIDs), Origin: r.Origin})
}

// started reports the run once.
func (t *translator) started() {
	r := t.st.Resp
	if r.Started {
		return
	}
	r.Started = true
	t.emit(engines.ResponseStarted{ResponseID: r.ID, Origin: r.Origin, InputIDs: slices.Clone(r.InputIDs)})
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, r.ID, t.startFrame()))
}

// output sends one part of the run, reopening its message first when an interaction
// segment closed it.
func (t *translator) output(f engines.Frame) {
	r := t.st.Resp
	t.started()
	if r.Paused {
		r.Paused = false
		t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, r.ID, t.startFrame()))
	}
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, r.ID, f))
}

// deliver reads the input a user message delivers from the id the platform extension
// recorded on it (Pi delivers a run's prompt first, then steering messages, including
// ones an abort left queued). The run answers the input, which is admitted once the
// session file holds the message.
func (t *translator) deliver(m message, raw json.RawMessage) {
	id := m.InputID
	if id == "" {
		// A user message no input of ours sent (an extension's): nothing to admit.
		t.diag("user_message_without_input", raw)
		return
	}
	t.st.Received = slices.DeleteFunc(t.st.Received, func(r string) bool { return r == id })
	if !slices.Contains(t.st.Pending, id) && !slices.Contains(t.st.Admitted, id) {
		t.st.Pending = append(t.st.Pending, id)
	}
	r := t.st.Resp
	if r == nil || slices.Contains(r.InputIDs, id) {
		return
	}
	r.InputIDs = append(r.InputIDs, id)
	r.Origin = engines.OriginInput
	if !r.Started {
		t.started()
		return
	}
	// A steering message joins the running run: it answers this input too.
	t.emit(engines.ResponseStarted{ResponseID: r.ID, Origin: r.Origin, InputIDs: slices.Clone(r.InputIDs)})
	r.Paused = false
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, r.ID, t.startFrame()))
}

func (t *translator) messageStart(l line, raw json.RawMessage) {
	var m message
	if json.Unmarshal(l.Message, &m) != nil {
		t.diag(evMessageStart, raw)
		return
	}
	if m.Role != roleAssistant || t.st.Resp == nil {
		return
	}
	t.st.Resp.Msg++
	t.started()
}

// partID names a content block of the run's current assistant message.
func (t *translator) partID(index int) string {
	return fmt.Sprintf("%s:m%d:%d", t.st.Resp.ID, t.st.Resp.Msg, index)
}

func (t *translator) messageUpdate(l line) {
	r := t.st.Resp
	if r == nil || l.Event == nil {
		return
	}
	e := l.Event
	switch e.Type {
	case "text_start", "thinking_start":
		kind := "text"
		if e.Type == "thinking_start" {
			kind = "reasoning"
		}
		p := streamPart{Index: e.ContentIndex, ID: t.partID(e.ContentIndex), Kind: kind}
		r.Parts = append(r.Parts, p)
		if kind == "reasoning" {
			t.output(engines.WithPartID(engines.MustFrame(engines.ReasoningStartChunk{ID: p.ID})))
		} else {
			t.output(engines.WithPartID(engines.MustFrame(engines.TextStartChunk{ID: p.ID})))
		}
	case "text_delta", "thinking_delta":
		i := slices.IndexFunc(r.Parts, func(p streamPart) bool { return p.Index == e.ContentIndex })
		if i < 0 || e.Delta == "" {
			return
		}
		if r.Parts[i].Kind == "reasoning" {
			t.output(engines.MustFrame(engines.ReasoningDeltaChunk{ID: r.Parts[i].ID, Delta: e.Delta}))
		} else {
			t.output(engines.MustFrame(engines.TextDeltaChunk{ID: r.Parts[i].ID, Delta: e.Delta}))
		}
	case "text_end", "thinking_end":
		i := slices.IndexFunc(r.Parts, func(p streamPart) bool { return p.Index == e.ContentIndex })
		if i < 0 {
			return
		}
		p := r.Parts[i]
		r.Parts = slices.Delete(r.Parts, i, i+1)
		t.endPart(p)
	}
}

func (t *translator) endPart(p streamPart) {
	if p.Kind == "reasoning" {
		t.output(engines.MustFrame(engines.ReasoningEndChunk{ID: p.ID}))
		return
	}
	t.output(engines.MustFrame(engines.TextEndChunk{ID: p.ID}))
}

func (t *translator) messageEnd(l line, raw json.RawMessage) {
	var m message
	if json.Unmarshal(l.Message, &m) != nil {
		t.diag(evMessageEnd, raw)
		return
	}
	switch m.Role {
	case roleUser:
		t.deliver(m, raw)
	case roleAssistant:
		r := t.st.Resp
		if r == nil {
			t.diag("message_outside_run", raw)
			return
		}
		// Blocks Pi never ended (an abort) stay as they streamed: Pi keeps the
		// partial message in its history.
		for _, p := range r.Parts {
			t.endPart(p)
		}
		r.Parts = nil
		r.Usage.add(m.Usage)
		r.Stop, r.ErrorMessage = m.StopReason, m.ErrorMessage
		if m.Model != "" {
			t.st.Model = m.Model
		}
	}
}

// toolStart opens a tool part: the tool name is Pi's and the input its arguments,
// unchanged.
func (t *translator) toolStart(l line, raw json.RawMessage) {
	r := t.st.Resp
	if r == nil || l.ToolCallID == "" {
		t.diag(evToolStart, raw)
		return
	}
	t.openTool(l.ToolCallID, l.ToolName, l.Args)
}

func (t *translator) openTool(id, name string, args json.RawMessage) {
	r := t.st.Resp
	if _, ok := r.tool(id); ok {
		return
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	r.Tools = append(r.Tools, toolCall{ID: id, Name: name})
	t.output(engines.MustFrame(engines.ToolInputStartChunk{ToolCallID: id, ToolName: name}))
	t.output(engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: id, ToolName: name, Input: args}))
}

// toolEnd ends a tool part: denied by the person, failed (the result's text), or Pi's
// result verbatim.
func (t *translator) toolEnd(l line, raw json.RawMessage) {
	r := t.st.Resp
	if r == nil {
		t.diag(evToolEnd, raw)
		return
	}
	i, ok := r.tool(l.ToolCallID)
	if !ok {
		t.openTool(l.ToolCallID, l.ToolName, l.Args)
		i, _ = r.tool(l.ToolCallID)
	}
	call := r.Tools[i]
	r.Tools = slices.Delete(r.Tools, i, i+1)
	if call.Approval != "" {
		t.output(engines.ToolApprovalResponseFrame(call.Approval, !call.Denied, ""))
	}
	switch {
	case call.Denied:
		t.output(engines.MustFrame(engines.ToolOutputDeniedChunk{ToolCallID: call.ID}))
	case l.IsError:
		t.output(engines.MustFrame(engines.ToolOutputErrorChunk{ToolCallID: call.ID, ErrorText: resultText(l.Result, call.Name)}))
	default:
		out := l.Result
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		t.output(engines.MustFrame(engines.ToolOutputAvailableChunk{ToolCallID: call.ID, Output: out}))
	}
}

// resultText is the text of a tool result, {"content":[{"type":"text","text":…}]}.
func resultText(raw json.RawMessage, tool string) string {
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(raw, &res)
	var b strings.Builder
	for _, c := range res.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	if b.Len() == 0 {
		return "Pi reports the " + tool + " tool failed"
	}
	return b.String()
}

// approvalTitle is the first line of the platform extension's question.
var approvalTitle = regexp.MustCompile(`^Allow (\S+) \[([^\]]+)\]\?`)

// Pi extension answers: the options the platform's extension offers.
const (
	optionAllow = "Allow"
	optionDeny  = "Deny"
)

// extensionRequest reads the extension UI requests: the platform extension's
// approval question opens an interaction, its status line closes it; other requests
// (another extension's dialogs, notifications) are kept as diagnostics.
func (t *translator) extensionRequest(l line, raw json.RawMessage) {
	switch {
	case l.Method == "select" && approvalTitle.MatchString(l.Title):
		t.approvalAsked(l, raw)
	case l.Method == "setStatus" && l.StatusKey == approvalStatusKey:
		t.approvalEnded(l, raw)
	default:
		t.diag(evExtensionUIRequest, raw)
	}
}

func (t *translator) approvalAsked(l line, raw json.RawMessage) {
	r := t.st.Resp
	m := approvalTitle.FindStringSubmatch(l.Title)
	if r == nil || l.ID == "" {
		t.diag(evExtensionUIRequest, raw)
		return
	}
	name, callID := m[1], m[2]
	if slices.ContainsFunc(t.st.Open, func(o openInteraction) bool { return o.RequestID == l.ID }) {
		return
	}
	i, ok := r.tool(callID)
	if !ok {
		t.openTool(callID, name, nil)
		i, _ = r.tool(callID)
	}
	_, detail, _ := strings.Cut(l.Title, "\n")
	input, _ := json.Marshal(map[string]string{"summary": detail})
	interactionID := r.ID + ":" + callID
	native := engines.NativeRequest{Type: evExtensionUIRequest, ID: l.ID, Payload: raw}
	c := engines.ToolApprovalContract(native, callID, name, input)
	c.Prompt = l.Title
	frames, err := engines.InteractionSegmentFrames(r.ID, interactionID, c)
	if err != nil {
		t.diag(evExtensionUIRequest, raw)
		return
	}
	r.Tools[i].Approval = interactionID
	t.st.Open = append(t.st.Open, openInteraction{ID: interactionID, ResponseID: r.ID, RequestID: l.ID, CallID: callID, Contract: c})
	t.emit(engines.InteractionOpened{ResponseID: r.ID, InteractionID: interactionID, Contract: c})
	for _, f := range frames {
		t.output(f)
	}
	r.Paused = true
	t.status(engines.StatusWaiting)
}

// approvalEnded closes the question the extension reports on: allow and deny are
// the person's answer taking effect, withdrawn is Pi's abort dismissing it.
func (t *translator) approvalEnded(l line, raw json.RawMessage) {
	var s struct {
		ToolCallID string `json:"toolCallId"`
		Decision   string `json:"decision"`
	}
	if json.Unmarshal([]byte(l.StatusText), &s) != nil {
		t.diag(evExtensionUIRequest, raw)
		return
	}
	i := slices.IndexFunc(t.st.Open, func(o openInteraction) bool { return o.CallID == s.ToolCallID })
	if i < 0 {
		return
	}
	o := t.st.Open[i]
	t.st.removeInteraction(o.ID)
	reason := engines.ClosureAnswered
	if s.Decision != "allow" && s.Decision != "deny" {
		reason = engines.ClosureWithdrawn
	}
	if r := t.st.Resp; r != nil {
		if j, ok := r.tool(o.CallID); ok {
			if reason == engines.ClosureAnswered {
				r.Tools[j].Denied = s.Decision == "deny"
			} else {
				r.Tools[j].Approval = ""
			}
		}
	}
	t.st.addReceipt(o.ID, reason)
	t.emit(engines.InteractionClosed{InteractionID: o.ID, Reason: reason})
	if len(t.st.Open) == 0 && t.st.Status == engines.StatusWaiting {
		t.status(engines.StatusWorking)
	}
}

// agentEnd ends the run with the last assistant message's stopReason, verbatim.
func (t *translator) agentEnd() {
	r := t.st.Resp
	if r == nil {
		t.status(engines.StatusIdle)
		return
	}
	t.started()
	for _, p := range r.Parts {
		t.endPart(p)
	}
	r.Parts = nil
	for _, tool := range slices.Clone(r.Tools) {
		t.output(engines.MustFrame(engines.ToolOutputErrorChunk{ToolCallID: tool.ID,
			ErrorText: "Pi ended the run before the " + tool.Name + " tool finished"}))
	}
	r.Tools = nil
	for _, o := range slices.Clone(t.st.Open) {
		if o.ResponseID == r.ID {
			t.st.removeInteraction(o.ID)
			t.st.addReceipt(o.ID, engines.ClosureWithdrawn)
			t.emit(engines.InteractionClosed{InteractionID: o.ID, Reason: engines.ClosureWithdrawn})
		}
	}
	usageJSON, _ := json.Marshal(r.Usage)
	ended := engines.ResponseEnded{ResponseID: r.ID, NativeReason: r.Stop, Usage: usageJSON}
	switch r.Stop {
	case stopStop, stopLength, stopToolUse:
		ended.Outcome = engines.OutcomeCompleted
	case stopAborted:
		ended.Outcome = engines.OutcomeCancelled
	default:
		ended.Outcome = engines.OutcomeFailed
		msg := r.ErrorMessage
		if msg == "" {
			msg = "Pi ended the run without an answer"
		}
		if ended.NativeReason == "" {
			ended.NativeReason = evAgentEnd
		}
		ended.Error = &engines.ResponseError{Code: "pi_" + ended.NativeReason, Message: msg}
	}
	for _, f := range engines.ResponseEndFrames(ended) {
		t.output(f)
	}
	t.emit(ended)
	t.st.Resp = nil
	t.status(engines.StatusIdle)
}

var _ engines.JournalTranslator[transState] = (*translator)(nil)

// State implements engines.JournalTranslator.
func (t *translator) State() transState { return t.st }

// Apply implements engines.JournalTranslator.
func (t *translator) Apply(l engines.OutputLine) []engines.Event { return t.apply(l) }

// Poll implements engines.JournalTranslator: the admissions the session file made
// durable since the last look (Pi writes a new session's first user message only
// when the first assistant message ends).
func (t *translator) Poll() []engines.Event {
	if len(t.st.Pending) == 0 {
		return nil
	}
	before := len(t.st.Pending)
	t.out = nil
	t.admit()
	if len(t.st.Pending) == before {
		return nil
	}
	return t.out
}
