package codex

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// translator turns the app-server's stdout lines into runtime events. It is a pure
// function of its state and the line (plus the admission lookup): the client replays
// the journal through it, and a cursor carries the state from before the line.
type translator struct {
	st transState
	// admitted reports whether the rollout durably holds the input.
	admitted func(inputID string) bool
	out      []engines.Event
}

// quietNotifications are notifications the contract has no use for: their facts
// reach it through other lines (turn/diff/updated repeats the fileChange items, the
// output deltas the command's aggregated output), concern the app-server rather than
// the conversation, or echo what the client set (the thread's name).
var quietNotifications = []string{
	"thread/started", "thread/settings/updated", "thread/name/updated", "remoteControl/status/changed", "account/rateLimits/updated",
	"thread/readState/changed", "turn/diff/updated", "item/commandExecution/outputDelta",
	"item/reasoning/summaryPartAdded", "item/fileChange/outputDelta", "mcpServer/startupStatus/updated",
}

// apply translates one journal line and returns its events, without cursors.
func (t *translator) apply(line engines.OutputLine) []engines.Event {
	t.out = nil
	if line.Stream == engines.Stderr {
		raw, _ := json.Marshal(string(line.Data))
		t.diag("stderr", raw)
		return t.out
	}
	var l rpcLine
	if err := json.Unmarshal(line.Data, &l); err != nil || (l.Method == "" && len(l.ID) == 0) {
		raw, _ := json.Marshal(string(line.Data))
		t.diag("unparsed_stdout", raw)
		return t.out
	}
	switch {
	case l.isResponse():
		t.response(l, line.Data)
	case l.isServerRequest():
		t.serverRequest(l, line.Data)
	default:
		t.notification(l, line.Data)
	}
	t.admit()
	return t.out
}

func (t *translator) notification(l rpcLine, raw json.RawMessage) {
	switch l.Method {
	case notifyThreadStatus:
		t.threadStatus(l.Params, raw)
	case notifyTurnStarted:
		t.turnStarted(l.Params, raw)
	case notifyTurnCompleted:
		t.turnCompleted(l.Params, raw)
	case notifyItemStarted:
		t.itemStarted(l.Params, raw)
	case notifyItemCompleted:
		t.itemCompleted(l.Params, raw)
	case notifyAgentDelta:
		t.delta(l.Params, "text")
	case notifyReasoningDelta, notifyReasoningText:
		t.delta(l.Params, "reasoning")
	case notifyTokenUsage:
		if r := t.st.Resp; r != nil {
			var p struct {
				TokenUsage json.RawMessage `json:"tokenUsage"`
			}
			if json.Unmarshal(l.Params, &p) == nil && len(p.TokenUsage) > 0 {
				r.Usage = p.TokenUsage
			}
		}
	case notifyError:
		t.errorNotification(l.Params, raw)
	case notifyRequestResolved:
		t.requestResolved(l.Params)
	default:
		if !slices.Contains(quietNotifications, l.Method) {
			t.diag(l.Method, raw)
		}
	}
}

func (t *translator) emit(ev engines.Event) { t.out = append(t.out, ev) }

func (t *translator) diag(kind string, raw json.RawMessage) {
	t.emit(engines.RuntimeDiagnostic{EventType: kind, Raw: slices.Clone(raw)})
}

// output sends one part of the response in progress, reopening its message first when
// an interaction segment closed it.
func (t *translator) output(f engines.Frame) {
	r := t.st.Resp
	if r.Paused {
		r.Paused = false
		t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, r.ID, t.startFrame()))
	}
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, r.ID, f))
}

func (t *translator) startFrame() engines.Frame {
	r := t.st.Resp
	return engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: r.ID, InputIDs: slices.Clone(r.InputIDs), Origin: r.Origin})
}

func (t *translator) status(s engines.RuntimeStatus) {
	if t.st.Status == s {
		return
	}
	t.st.Status = s
	t.emit(engines.StatusChanged{Status: s})
}

// admit reports the pending inputs whose user message is now in the rollout.
func (t *translator) admit() {
	if len(t.st.Pending) == 0 || t.admitted == nil {
		return
	}
	var still []string
	for _, id := range t.st.Pending {
		if t.admitted(id) {
			t.emit(engines.InputAdmitted{InputID: id})
			t.st.Admitted = append(t.st.Admitted, id)
			if len(t.st.Admitted) > maxAdmittedKept {
				t.st.Admitted = t.st.Admitted[len(t.st.Admitted)-maxAdmittedKept:]
			}
		} else {
			still = append(still, id)
		}
	}
	t.st.Pending = still
}

func (t *translator) received(inputID string) {
	if inputID != "" && !slices.Contains(t.st.Pending, inputID) && !slices.Contains(t.st.Admitted, inputID) {
		t.st.Pending = append(t.st.Pending, inputID)
	}
}

// response reads Codex's reply to a request we sent. A turn/start reply names the turn
// the input went into: a new one (its turn/started follows) or, while a turn runs, the
// running one, which the input joins. A refused request is kept as a diagnostic.
func (t *translator) response(l rpcLine, raw json.RawMessage) {
	var id string
	if json.Unmarshal(l.ID, &id) != nil {
		t.diag("response", raw)
		return
	}
	if len(l.Error) > 0 && string(l.Error) != "null" {
		t.diag("error_response", raw)
		return
	}
	inputID, ok := strings.CutPrefix(id, requestIDPrefixInput)
	if !ok {
		// Replies to initialize, thread/start, thread/resume and turn/interrupt are
		// read by the client that sent them.
		return
	}
	var ref turnRef
	if json.Unmarshal(l.Result, &ref) != nil || ref.Turn.ID == "" {
		t.diag("response", raw)
		return
	}
	t.received(inputID)
	if ref.Turn.Status == turnInProgress {
		// Codex took the input into a running turn: it works from this reply on, so
		// the admission that may follow on this line never meets an idle runtime.
		t.status(engines.StatusWorking)
	}
	if r := t.st.Resp; r != nil && r.Turn == ref.Turn.ID {
		t.join(inputID)
		return
	}
	i := slices.IndexFunc(t.st.Starting, func(s turnInputs) bool { return s.Turn == ref.Turn.ID })
	if i < 0 {
		t.st.Starting = append(t.st.Starting, turnInputs{Turn: ref.Turn.ID})
		i = len(t.st.Starting) - 1
	}
	if !slices.Contains(t.st.Starting[i].InputIDs, inputID) {
		t.st.Starting[i].InputIDs = append(t.st.Starting[i].InputIDs, inputID)
	}
}

// responseIDFor derives a response's id from Codex's turn id (unique in the thread),
// so every reader names it the same.
func responseIDFor(turnID string) string { return "resp_" + turnID }

func (t *translator) turnStarted(params, raw json.RawMessage) {
	var ref turnRef
	if json.Unmarshal(params, &ref) != nil || ref.Turn.ID == "" {
		t.diag(notifyTurnStarted, raw)
		return
	}
	if r := t.st.Resp; r != nil && r.Turn == ref.Turn.ID {
		return
	}
	var inputs []string
	if i := slices.IndexFunc(t.st.Starting, func(s turnInputs) bool { return s.Turn == ref.Turn.ID }); i >= 0 {
		inputs = t.st.Starting[i].InputIDs
		t.st.Starting = slices.Delete(t.st.Starting, i, i+1)
	}
	origin := engines.OriginInput
	if len(inputs) == 0 {
		origin = engines.OriginEngine
	}
	id := responseIDFor(ref.Turn.ID)
	t.st.Resp = &respState{ID: id, Turn: ref.Turn.ID, Origin: origin, InputIDs: inputs}
	t.emit(engines.ResponseStarted{ResponseID: id, Origin: origin, InputIDs: slices.Clone(inputs)})
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, id, t.startFrame()))
	t.status(engines.StatusWorking)
}

// join adds an input Codex took into the running turn: the response answers it too,
// so ResponseStarted and the start part are reported again with every input id.
func (t *translator) join(id string) {
	r := t.st.Resp
	if id == "" || slices.Contains(r.InputIDs, id) {
		return
	}
	r.InputIDs = append(r.InputIDs, id)
	if r.Origin == engines.OriginEngine {
		r.Origin = engines.OriginInput
	}
	t.emit(engines.ResponseStarted{ResponseID: r.ID, Origin: r.Origin, InputIDs: slices.Clone(r.InputIDs)})
	r.Paused = false
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, r.ID, t.startFrame()))
}

// threadStatus maps Codex's thread status to the contract's. Waiting on approval is
// reported with the interaction it waits on, after the parts that close the message
// segment; systemError is a thread that stopped working (its turn fails next).
func (t *translator) threadStatus(params, raw json.RawMessage) {
	var s threadStatus
	if json.Unmarshal(params, &s) != nil {
		t.diag(notifyThreadStatus, raw)
		return
	}
	switch s.Status.Type {
	case "idle", "systemError":
		t.status(engines.StatusIdle)
	case "active":
		if len(t.st.Open) == 0 {
			t.status(engines.StatusWorking)
		}
	default:
		t.diag(notifyThreadStatus, raw)
	}
}

func (t *translator) errorNotification(params, raw json.RawMessage) {
	t.diag(notifyError, raw)
	var p struct {
		Error     turnError `json:"error"`
		WillRetry bool      `json:"willRetry"`
	}
	if json.Unmarshal(params, &p) != nil || p.WillRetry || t.st.Resp == nil {
		return
	}
	t.st.Resp.Error = responseError(p.Error)
}

func responseError(e turnError) *engines.ResponseError {
	code := "codex_error"
	var info string
	if json.Unmarshal(e.CodexErrorInfo, &info) == nil && info != "" {
		code = info
	}
	msg := e.Message
	if msg == "" {
		msg = "Codex failed the turn"
	}
	return &engines.ResponseError{Code: code, Message: msg}
}

func (t *translator) turnCompleted(params, raw json.RawMessage) {
	var ref turnRef
	if json.Unmarshal(params, &ref) != nil {
		t.diag(notifyTurnCompleted, raw)
		return
	}
	r := t.st.Resp
	if r == nil || r.Turn != ref.Turn.ID {
		t.diag("turn_completed_outside_response", raw)
		return
	}
	// Streams Codex never completed were dropped from its history (an interrupt, or a
	// message that joined the turn and re-sampled the model): withdraw them.
	t.abandonParts()
	for _, tool := range slices.Clone(r.Tools) {
		t.output(engines.MustFrame(engines.ToolOutputErrorChunk{ToolCallID: tool.ID,
			ErrorText: "Codex ended the turn (" + ref.Turn.Status + ") before the " + tool.Name + " item completed"}))
	}
	r.Tools = nil
	// The turn is over: Codex no longer waits on any of its requests.
	for _, o := range slices.Clone(t.st.Open) {
		if o.ResponseID == r.ID {
			t.st.removeInteraction(o.ID)
			t.st.addReceipt(o.ID, engines.ClosureWithdrawn)
			t.emit(engines.InteractionClosed{InteractionID: o.ID, Reason: engines.ClosureWithdrawn})
		}
	}
	ended := engines.ResponseEnded{ResponseID: r.ID, NativeReason: ref.Turn.Status, Usage: r.Usage}
	switch ref.Turn.Status {
	case turnCompleted:
		ended.Outcome = engines.OutcomeCompleted
	case turnInterrupted:
		ended.Outcome = engines.OutcomeCancelled
	default:
		ended.Outcome = engines.OutcomeFailed
		ended.Error = r.Error
		if ref.Turn.Error != nil {
			ended.Error = responseError(*ref.Turn.Error)
		}
		if ended.Error == nil {
			ended.Error = &engines.ResponseError{Code: ref.Turn.Status, Message: "Codex ended the turn " + ref.Turn.Status}
		}
	}
	for _, f := range engines.ResponseEndFrames(ended) {
		t.output(f)
	}
	t.emit(ended)
	t.st.Resp = nil
}

// abandonParts ends the text and reasoning parts still streaming and withdraws them.
func (t *translator) abandonParts() {
	r := t.st.Resp
	if len(r.Parts) == 0 {
		return
	}
	for _, p := range r.Parts {
		t.endPart(p)
		r.Retracted = append(r.Retracted, p.ID)
	}
	r.Parts = nil
	t.output(engines.RetractionFrame(r.Retracted))
}

func (t *translator) endPart(p streamPart) {
	if p.Kind == "reasoning" {
		t.output(engines.MustFrame(engines.ReasoningEndChunk{ID: p.ID}))
		return
	}
	t.output(engines.MustFrame(engines.TextEndChunk{ID: p.ID}))
}

// partID names an item's part: provider item ids (msg_…, rs_…) are only as unique as
// the provider makes them, so the turn id namespaces them.
func partID(turnID, itemID string) string { return turnID + ":" + itemID }

func (t *translator) itemStarted(params, raw json.RawMessage) {
	var p itemParams
	var it item
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Item, &it) != nil {
		t.diag(notifyItemStarted, raw)
		return
	}
	r := t.st.Resp
	if r == nil || (p.TurnID != "" && p.TurnID != r.Turn) {
		t.diag("item_outside_response", raw)
		return
	}
	switch it.Type {
	case itemUserMessage:
		// A message that joins a running turn aborts the model's stream in flight;
		// Codex samples again with it and drops what streamed.
		t.abandonParts()
		t.received(it.ClientID)
		t.join(it.ClientID)
	case itemAgentMessage:
		id := partID(r.Turn, it.ID)
		r.Parts = append(r.Parts, streamPart{Item: it.ID, ID: id, Kind: "text"})
		t.output(engines.WithPartID(engines.MustFrame(engines.TextStartChunk{ID: id})))
	case itemReasoning:
		id := partID(r.Turn, it.ID)
		r.Parts = append(r.Parts, streamPart{Item: it.ID, ID: id, Kind: "reasoning"})
		t.output(engines.WithPartID(engines.MustFrame(engines.ReasoningStartChunk{ID: id})))
	default:
		t.toolInput(it, p.Item)
	}
}

func (t *translator) delta(params json.RawMessage, kind string) {
	r := t.st.Resp
	var d deltaParams
	if r == nil || json.Unmarshal(params, &d) != nil {
		return
	}
	part, ok := r.part(d.ItemID)
	if !ok || part.Kind != kind || d.Delta == "" {
		return
	}
	if kind == "reasoning" {
		t.output(engines.MustFrame(engines.ReasoningDeltaChunk{ID: part.ID, Delta: d.Delta}))
		return
	}
	t.output(engines.MustFrame(engines.TextDeltaChunk{ID: part.ID, Delta: d.Delta}))
}

func (t *translator) itemCompleted(params, raw json.RawMessage) {
	var p itemParams
	var it item
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Item, &it) != nil {
		t.diag(notifyItemCompleted, raw)
		return
	}
	r := t.st.Resp
	if r == nil || (p.TurnID != "" && p.TurnID != r.Turn) {
		t.diag("item_outside_response", raw)
		return
	}
	switch it.Type {
	case itemUserMessage:
	case itemAgentMessage, itemReasoning:
		part, ok := r.part(it.ID)
		if !ok {
			return
		}
		r.Parts = slices.DeleteFunc(r.Parts, func(q streamPart) bool { return q.Item == it.ID })
		t.endPart(part)
	default:
		t.toolOutput(it, p.Item)
	}
}

var _ engines.JournalTranslator[transState] = (*translator)(nil)

// State implements engines.JournalTranslator.
func (t *translator) State() transState { return t.st }

// Apply implements engines.JournalTranslator.
func (t *translator) Apply(line engines.OutputLine) []engines.Event { return t.apply(line) }

// Poll implements engines.JournalTranslator: the admissions the rollout made durable
// since the last look, while the program printed nothing.
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
