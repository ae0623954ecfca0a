package claude

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// translator turns Claude Code's stdout lines into runtime events. It is a pure
// function of its state and the line (plus the admission lookup): the client replays
// the journal through it, and a cursor carries the state from before the line.
type translator struct {
	// sessionID is the AstraBox Session id; it namespaces child-run ids.
	sessionID string
	st        transState
	// admitted reports whether Claude's transcript durably holds the input uuid.
	admitted func(uuid string) bool
	// model receives the model each init message names.
	model func(name string)
	out   []engines.Event
}

// apply translates one journal line and returns its events, without cursors.
func (t *translator) apply(line engines.OutputLine) []engines.Event {
	t.out = nil
	if line.Stream == engines.Stderr {
		raw, _ := json.Marshal(string(line.Data))
		t.diag("stderr", raw)
		return t.out
	}
	var n nativeLine
	if err := json.Unmarshal(line.Data, &n); err != nil || n.Type == "" {
		raw, _ := json.Marshal(string(line.Data))
		t.diag("unparsed_stdout", raw)
		return t.out
	}
	switch n.Type {
	case "system":
		t.system(n, line.Data)
	case "command_lifecycle":
		t.lifecycle(n)
	case "stream_event":
		if n.ParentToolUseID == nil {
			t.stream(n)
		}
	case "assistant":
		t.assistant(n)
	case "user":
		t.user(n)
	case "result":
		t.result(line.Data)
	case "control_request":
		t.controlRequest(n, line.Data)
	case "control_cancel_request":
		t.cancelRequest(n)
	case "control_response":
		t.controlResponse(n)
	default:
		t.diag(n.Type, line.Data)
	}
	t.admit()
	return t.out
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

// admit reports the pending inputs whose record is now in Claude's transcript.
func (t *translator) admit() {
	if len(t.st.Pending) == 0 || t.admitted == nil {
		return
	}
	var still []string
	for _, id := range t.st.Pending {
		if t.admitted(id) {
			t.emit(engines.InputAdmitted{InputID: id})
		} else {
			still = append(still, id)
		}
	}
	t.st.Pending = still
}

func (t *translator) system(n nativeLine, raw json.RawMessage) {
	switch n.Subtype {
	case "session_state_changed":
		switch n.State {
		case "running":
			t.status(engines.StatusWorking)
		case "idle":
			t.status(engines.StatusIdle)
		case "requires_action":
			// Waiting is reported with the interaction it waits on (can_use_tool), after
			// the parts that close the message segment.
		default:
			t.diag("system/session_state_changed", raw)
		}
	case "status":
		var s struct {
			UserMessageUUIDs []string `json:"user_message_uuids"`
		}
		_ = json.Unmarshal(raw, &s)
		if t.st.Resp != nil && t.st.Resp.Origin == engines.OriginInput {
			for _, id := range s.UserMessageUUIDs {
				t.join(id)
			}
		}
	case "task_started", "task_notification":
		t.task(n.Subtype, raw)
	case "init":
		// init repeats the launch facts at every turn; of them the platform keeps the
		// model the turn runs on.
		if n.Model != "" && t.model != nil {
			t.model(n.Model)
		}
	case "thinking_tokens":
		// Estimates the reasoning deltas already carry.
	default:
		t.diag("system/"+n.Subtype, raw)
	}
}

func (t *translator) lifecycle(n nativeLine) {
	id := n.CommandUUID
	switch n.State {
	case "queued":
		if !slices.Contains(t.st.Queued, id) {
			t.st.Queued = append(t.st.Queued, id)
		}
		if !slices.Contains(t.st.Pending, id) {
			t.st.Pending = append(t.st.Pending, id)
		}
	case "started":
		t.st.Queued = slices.DeleteFunc(t.st.Queued, func(q string) bool { return q == id })
		if t.st.Resp == nil {
			t.openResponse(responseIDFor(id), engines.OriginInput, []string{id})
			return
		}
		t.join(id)
	case "cancelled":
		// A cancelled input that never started was dropped from Claude's queue: it is
		// not admitted and AstraBox keeps custody of it.
		if slices.Contains(t.st.Queued, id) {
			t.st.Queued = slices.DeleteFunc(t.st.Queued, func(q string) bool { return q == id })
			t.st.Pending = slices.DeleteFunc(t.st.Pending, func(q string) bool { return q == id })
		}
	}
}

// responseIDFor derives a response's id from the uuid of the first input it answers,
// so every reader names it the same.
func responseIDFor(firstInput string) string { return "resp_" + firstInput }

func (t *translator) openResponse(id string, origin engines.ResponseOrigin, inputs []string) {
	t.st.Resp = &respState{ID: id, Origin: origin, InputIDs: inputs}
	t.emit(engines.ResponseStarted{ResponseID: id, Origin: origin, InputIDs: slices.Clone(inputs)})
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, id, t.startFrame()))
}

// join adds an input Claude consumed into the running turn: the response answers it
// too, so ResponseStarted and the start part are reported again with every input id.
func (t *translator) join(id string) {
	r := t.st.Resp
	if slices.Contains(r.InputIDs, id) {
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

func (t *translator) stream(n nativeLine) {
	var ev streamEvent
	if err := json.Unmarshal(n.Event, &ev); err != nil {
		t.diag("stream_event", n.Event)
		return
	}
	if ev.Type == "message_start" {
		if t.st.Resp == nil {
			id := ""
			if ev.Message != nil {
				id = ev.Message.ID
			}
			t.openResponse("resp_engine_"+id, engines.OriginEngine, nil)
		}
		if ev.Message != nil {
			t.st.Resp.Msg = ev.Message.ID
		}
		t.st.Resp.Blocks = map[int]block{}
		t.st.Resp.Previews = nil
		return
	}
	r := t.st.Resp
	if r == nil {
		return
	}
	if r.Blocks == nil {
		// An empty map does not survive the cursor's JSON.
		r.Blocks = map[int]block{}
	}
	partID := fmt.Sprintf("%s:%d", r.Msg, ev.Index)
	switch ev.Type {
	case "content_block_start":
		if ev.ContentBlock == nil {
			return
		}
		switch ev.ContentBlock.Type {
		case "text":
			r.Blocks[ev.Index] = block{Kind: "text", ID: partID}
			r.Previews = append(r.Previews, preview{Index: ev.Index, ID: partID})
			t.output(engines.WithPartID(engines.MustFrame(engines.TextStartChunk{ID: partID})))
		case "thinking":
			r.Blocks[ev.Index] = block{Kind: "reasoning", ID: partID}
			r.Previews = append(r.Previews, preview{Index: ev.Index, ID: partID})
			t.output(engines.WithPartID(engines.MustFrame(engines.ReasoningStartChunk{ID: partID})))
		case "tool_use", "server_tool_use", "mcp_tool_use":
			r.Blocks[ev.Index] = block{Kind: "tool", ID: ev.ContentBlock.ID}
			t.output(engines.MustFrame(engines.ToolInputStartChunk{ToolCallID: ev.ContentBlock.ID, ToolName: ev.ContentBlock.Name}))
		}
	case "content_block_delta":
		b, ok := r.Blocks[ev.Index]
		if !ok || ev.Delta == nil {
			return
		}
		switch {
		case b.Kind == "text" && ev.Delta.Type == "text_delta":
			t.output(engines.MustFrame(engines.TextDeltaChunk{ID: b.ID, Delta: ev.Delta.Text}))
		case b.Kind == "reasoning" && ev.Delta.Type == "thinking_delta":
			t.output(engines.MustFrame(engines.ReasoningDeltaChunk{ID: b.ID, Delta: ev.Delta.Thinking}))
		case b.Kind == "tool" && ev.Delta.Type == "input_json_delta" && !b.Available:
			t.output(engines.MustFrame(engines.ToolInputDeltaChunk{ToolCallID: b.ID, InputTextDelta: ev.Delta.PartialJSON}))
		}
	case "content_block_stop":
		b, ok := r.Blocks[ev.Index]
		if !ok {
			return
		}
		t.endBlock(b)
		delete(r.Blocks, ev.Index)
	case "message_stop":
		if n.AbandonedBlocks != nil {
			t.abandon(*n.AbandonedBlocks)
		}
		// What the message kept is final; the cursors need not carry it.
		r.Previews = nil
	}
}

// endBlock ends a text or reasoning part; a tool block has no end part.
func (t *translator) endBlock(b block) {
	switch b.Kind {
	case "text":
		t.output(engines.MustFrame(engines.TextEndChunk{ID: b.ID}))
	case "reasoning":
		t.output(engines.MustFrame(engines.ReasoningEndChunk{ID: b.ID}))
	}
}

func (t *translator) assistant(n nativeLine) {
	var msg apiMessage
	if err := json.Unmarshal(n.Message, &msg); err != nil {
		t.diag("assistant", n.Message)
		return
	}
	if n.ParentToolUseID != nil {
		t.childMessage(*n.ParentToolUseID, n.UUID, "assistant", msg.Content)
		return
	}
	r := t.st.Resp
	if r == nil {
		raw, _ := json.Marshal(n)
		t.diag("assistant_outside_response", raw)
		return
	}
	streamed := msg.ID != "" && msg.ID == r.Msg
	for i, b := range decodeBlocks(msg.Content) {
		switch b.Type {
		case "tool_use", "server_tool_use", "mcp_tool_use":
			t.toolInput(b, streamed)
		case "text":
			if !streamed && b.Text != "" {
				// A message Claude did not stream (a synthetic reply such as an API
				// error) arrives whole.
				id := fmt.Sprintf("%s:%d", n.UUID, i)
				t.output(engines.MustFrame(engines.TextStartChunk{ID: id}))
				t.output(engines.MustFrame(engines.TextDeltaChunk{ID: id, Delta: b.Text}))
				t.output(engines.MustFrame(engines.TextEndChunk{ID: id}))
			}
		case "thinking":
			if !streamed && b.Thinking != "" {
				id := fmt.Sprintf("%s:%d", n.UUID, i)
				t.output(engines.MustFrame(engines.ReasoningStartChunk{ID: id}))
				t.output(engines.MustFrame(engines.ReasoningDeltaChunk{ID: id, Delta: b.Thinking}))
				t.output(engines.MustFrame(engines.ReasoningEndChunk{ID: id}))
			}
		}
	}
}

func (t *translator) result(raw json.RawMessage) {
	var res resultLine
	if err := json.Unmarshal(raw, &res); err != nil {
		t.diag("result", raw)
		return
	}
	r := t.st.Resp
	if r == nil {
		t.diag("result_outside_response", raw)
		return
	}
	if r.Origin == engines.OriginInput {
		for _, id := range res.UserMessageUUIDs {
			t.join(id)
		}
	}
	// The turn is over: Claude no longer waits on any of its requests.
	for _, o := range slices.Clone(t.st.Open) {
		if o.ResponseID == r.ID {
			t.st.removeInteraction(o.ID)
			t.st.addReceipt(o.ID, engines.ClosureWithdrawn)
			t.emit(engines.InteractionClosed{InteractionID: o.ID, Reason: engines.ClosureWithdrawn})
		}
	}
	ended := engines.ResponseEnded{ResponseID: r.ID, NativeReason: res.TerminalReason, Usage: usageOf(res)}
	if ended.NativeReason == "" {
		ended.NativeReason = res.Subtype
	}
	switch {
	case strings.HasPrefix(res.TerminalReason, "aborted"):
		ended.Outcome = engines.OutcomeCancelled
	case res.IsError:
		ended.Outcome = engines.OutcomeFailed
		msg := strings.Join(res.Errors, "; ")
		if res.Result != nil && *res.Result != "" {
			msg = *res.Result
		}
		if msg == "" {
			msg = "Claude Code ended the turn with " + ended.NativeReason
		}
		ended.Error = &engines.ResponseError{Code: res.Subtype, Message: msg}
	default:
		ended.Outcome = engines.OutcomeCompleted
	}
	for _, f := range engines.ResponseEndFrames(ended) {
		t.output(f)
	}
	t.emit(ended)
	t.st.Resp = nil
}

// usageOf keeps Claude's own usage and cost fields, under Claude's names.
func usageOf(res resultLine) json.RawMessage {
	fields := map[string]json.RawMessage{}
	for k, v := range map[string]json.RawMessage{
		"usage": res.Usage, "modelUsage": res.ModelUsage, "total_cost_usd": res.TotalCostUSD,
		"num_turns": res.NumTurns, "duration_ms": res.DurationMS, "duration_api_ms": res.DurationAPIMS,
	} {
		if len(v) > 0 && string(v) != "null" {
			fields[k] = v
		}
	}
	if len(fields) == 0 {
		return nil
	}
	raw, _ := json.Marshal(fields)
	return raw
}

var _ engines.JournalTranslator[transState] = (*translator)(nil)

// State implements engines.JournalTranslator.
func (t *translator) State() transState { return t.st }

// Apply implements engines.JournalTranslator.
func (t *translator) Apply(line engines.OutputLine) []engines.Event { return t.apply(line) }

// Poll implements engines.JournalTranslator: the admissions the transcript made durable
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
