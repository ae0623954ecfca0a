package acp

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/astrabox/astrabox/engines"
)

// translator turns the journal's lines (what the program printed and what the client
// sent it) into runtime events. It is a pure function of its state and the line: the
// client replays the journal through it, and a cursor carries the state from before
// the line.
type translator struct {
	st transState
	// respPrefix starts every response id: the ACP session and the process, so
	// response ids minted from the prompt sequence never repeat within the Session.
	respPrefix string
	busy       BusyPrompt
	// modeText starts the agent text a program sends as its mode notification
	// (Profile.ModeUpdateText); empty when it has none.
	modeText string
	// decline answers a program request the client declared it does not serve
	// (fs/*, terminal/*, vendor requests); nil while only reading.
	decline func(id json.RawMessage, method string)
	// inLog finds a prompt's user record in the program's session log (admission
	// session_log; nil otherwise): the line it is at.
	inLog func(text string, from int, claimed []int) (int, bool)
	out   []engines.Event
}

// quietUpdates are session/update kinds the contract has no use for: they describe the
// session (commands, modes, options, title) rather than a response.
var quietUpdates = []string{
	"available_commands_update", "current_mode_update", "config_option_update", "session_info_update", "plan",
}

// quietNotifications are program notifications about the program itself.
var quietNotifications = []string{"_auth/status_update"}

// apply translates one journal line and returns its events, without cursors.
func (t *translator) apply(line engines.OutputLine) []engines.Event {
	t.out = nil
	if line.Stream == engines.Stderr {
		raw, _ := json.Marshal(string(line.Data))
		t.diag("stderr", raw)
		return t.out
	}
	jl, ok := parseJournalLine(line.Data)
	if !ok {
		raw, _ := json.Marshal(string(line.Data))
		t.diag("unparsed_stdout", raw)
		return t.out
	}
	if jl.sent {
		t.sent(jl.msg)
		t.admitFromLog()
		return t.out
	}
	raw := json.RawMessage(slices.Clone(line.Data))
	switch l := jl.msg; {
	case l.isReply():
		t.reply(l, raw)
	case l.isRequest():
		t.programRequest(l, raw)
	default:
		t.notification(l, raw)
	}
	t.admitFromLog()
	return t.out
}

// admitFromLog admits the prompts whose user record the session log now holds, in the
// order they were sent (a prompt's reply admits it in any case).
func (t *translator) admitFromLog() {
	if t.inLog == nil {
		return
	}
	for _, p := range t.st.Prompts {
		if p.Text == "" || slices.Contains(t.st.Admitted, p.Input) {
			continue
		}
		line, ok := t.inLog(p.Text, p.LogFrom, t.st.LogClaimed)
		if !ok {
			return
		}
		t.st.LogClaimed = append(t.st.LogClaimed, line)
		if len(t.st.LogClaimed) > maxAdmittedKept {
			t.st.LogClaimed = t.st.LogClaimed[len(t.st.LogClaimed)-maxAdmittedKept:]
		}
		t.admit(p.Input)
	}
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

// responseID mints a response's id from the prompt sequence of its first prompt.
func (t *translator) responseID(seq int) string { return t.respPrefix + ":" + strconv.Itoa(seq) }

// sent reads a line the client sent the program.
func (t *translator) sent(l rpcLine) {
	switch {
	case l.Method == methodSessionPrompt:
		inputID, ok := strings.CutPrefix(l.idString(), idPrefixPrompt)
		if !ok || t.st.sent(inputID) {
			return
		}
		t.st.Seq++
		t.st.Prompts = append(t.st.Prompts, promptSent(l.Params, inputID, t.st.Seq))
		if r := t.st.Resp; r != nil && t.busy == BusyJoined {
			t.join(inputID)
		}
		t.status(engines.StatusWorking)
	case l.Method == methodSessionLoad:
		t.st.Loading = true
	case l.isReply():
		t.answered(l)
	}
}

// ensureResponse returns the response the program's output belongs to, starting it
// for the oldest unanswered prompt (all of them when the program joins prompts), or
// nil for output outside any prompt.
func (t *translator) ensureResponse() *respState {
	if t.st.Resp != nil {
		return t.st.Resp
	}
	if len(t.st.Prompts) == 0 {
		return nil
	}
	first := t.st.Prompts[0]
	inputs := []string{first.Input}
	if t.busy == BusyJoined {
		inputs = inputs[:0]
		for _, p := range t.st.Prompts {
			inputs = append(inputs, p.Input)
		}
	}
	r := &respState{ID: t.responseID(first.Seq), Origin: engines.OriginInput, InputIDs: inputs, Unanswered: slices.Clone(inputs)}
	t.st.Resp = r
	t.emit(engines.ResponseStarted{ResponseID: r.ID, Origin: r.Origin, InputIDs: slices.Clone(inputs)})
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, r.ID, t.startFrame()))
	t.status(engines.StatusWorking)
	return r
}

// join adds a prompt the program folds into the running turn: the response answers it
// too, so ResponseStarted and the start part are reported again with every input id.
func (t *translator) join(inputID string) {
	r := t.st.Resp
	if slices.Contains(r.InputIDs, inputID) {
		return
	}
	r.InputIDs = append(r.InputIDs, inputID)
	r.Unanswered = append(r.Unanswered, inputID)
	t.emit(engines.ResponseStarted{ResponseID: r.ID, Origin: r.Origin, InputIDs: slices.Clone(r.InputIDs)})
	r.Paused = false
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, r.ID, t.startFrame()))
}

// reply reads the program's reply to a client request: a prompt's reply ends its
// turn; the others are read by the client call that sent them.
func (t *translator) reply(l rpcLine, raw json.RawMessage) {
	id := l.idString()
	if id == idHandshake+methodSessionLoad {
		t.st.Loading = false
	}
	inputID, ok := strings.CutPrefix(id, idPrefixPrompt)
	if !ok {
		if l.Error != nil {
			t.diag("error_reply", raw)
		}
		return
	}
	i := slices.IndexFunc(t.st.Prompts, func(p prompt) bool { return p.Input == inputID })
	if i < 0 {
		t.diag("reply_to_unknown_prompt", raw)
		return
	}
	if l.Error != nil && t.busy == BusyRefused && i > 0 {
		// A program that refuses a prompt while busy refused one sent behind the running
		// prompt: it holds nothing of it, so it is neither admitted nor a response.
		t.st.Prompts = slices.Delete(t.st.Prompts, i, i+1)
		t.diag("prompt_refused_busy", raw)
		return
	}
	// A prompt answered before any output (DeepSeek Harness sends a cancelled turn's
	// text after the reply) still has its response: started while the prompt is the
	// oldest unanswered one, then ended by this reply.
	r := t.ensureResponse()
	t.st.Prompts = slices.Delete(t.st.Prompts, i, i+1)
	// The program answered the prompt: its session record holds it.
	t.admit(inputID)
	if r == nil || !slices.Contains(r.InputIDs, inputID) {
		t.diag("reply_outside_response", raw)
		return
	}
	r.Unanswered = slices.DeleteFunc(r.Unanswered, func(s string) bool { return s == inputID })
	if len(r.Unanswered) > 0 {
		return
	}
	t.end(l, raw)
}

func (t *translator) admit(inputID string) {
	if slices.Contains(t.st.Admitted, inputID) {
		return
	}
	t.emit(engines.InputAdmitted{InputID: inputID})
	t.st.Admitted = append(t.st.Admitted, inputID)
	if len(t.st.Admitted) > maxAdmittedKept {
		t.st.Admitted = t.st.Admitted[len(t.st.Admitted)-maxAdmittedKept:]
	}
}

// end closes the response with the prompt's reply: its stop reason, or its error.
func (t *translator) end(l rpcLine, raw json.RawMessage) {
	r := t.st.Resp
	t.endPart()
	for _, tool := range slices.Clone(r.Tools) {
		t.output(engines.MustFrame(engines.ToolOutputErrorChunk{ToolCallID: tool.ID,
			ErrorText: "the turn ended before " + tool.Name + " reported a result"}))
	}
	r.Tools = nil
	// The turn is over: the program no longer waits on any of its requests.
	for _, o := range slices.Clone(t.st.Open) {
		if o.ResponseID == r.ID {
			t.st.removeInteraction(o.ID)
			t.st.addReceipt(o.ID, engines.ClosureWithdrawn)
			t.emit(engines.InteractionClosed{InteractionID: o.ID, Reason: engines.ClosureWithdrawn})
		}
	}
	ended := engines.ResponseEnded{ResponseID: r.ID, Usage: r.Usage}
	if l.Error != nil {
		ended.Outcome = engines.OutcomeFailed
		ended.NativeReason = "error"
		ended.Error = &engines.ResponseError{Code: strconv.Itoa(l.Error.Code), Message: errorMessage(l.Error)}
	} else {
		var res struct {
			StopReason string          `json:"stopReason"`
			Usage      json.RawMessage `json:"usage"`
			Meta       struct {
				Quota struct {
					TokenCount *quotaTokens `json:"token_count"`
				} `json:"quota"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(l.Result, &res)
		ended.NativeReason = res.StopReason
		switch {
		case len(res.Usage) > 0 && string(res.Usage) != "null":
			ended.Usage = res.Usage
		case res.Meta.Quota.TokenCount != nil:
			ended.Usage = res.Meta.Quota.TokenCount.usage()
		case len(r.CallTokens) > 0:
			ended.Usage, _ = json.Marshal(r.CallTokens)
		}
		switch acpsdk.StopReason(res.StopReason) {
		case acpsdk.StopReasonCancelled:
			ended.Outcome = engines.OutcomeCancelled
		case acpsdk.StopReasonEndTurn, acpsdk.StopReasonMaxTokens, acpsdk.StopReasonMaxTurnRequests:
			ended.Outcome = engines.OutcomeCompleted
		case acpsdk.StopReasonRefusal:
			ended.Outcome = engines.OutcomeFailed
			ended.Error = &engines.ResponseError{Code: res.StopReason, Message: "The agent refused to continue"}
		default:
			ended.Outcome = engines.OutcomeFailed
			ended.Error = &engines.ResponseError{Code: "unknown_stop_reason", Message: "The agent ended the turn with stop reason " + strconv.Quote(res.StopReason)}
			t.diag("unknown_stop_reason", raw)
		}
	}
	for _, f := range engines.ResponseEndFrames(ended) {
		t.output(f)
	}
	t.emit(ended)
	t.st.Resp = nil
	if len(t.st.Prompts) == 0 {
		t.status(engines.StatusIdle)
	}
}

// quotaTokens is the token count Gemini CLI puts in its prompt reply's _meta.quota in
// place of ACP's usage.
type quotaTokens struct {
	Input  int64 `json:"input_tokens"`
	Output int64 `json:"output_tokens"`
}

// usage is the count in ACP's usage shape, as the other programs report it.
func (q quotaTokens) usage() json.RawMessage {
	out, _ := json.Marshal(map[string]int64{"inputTokens": q.Input, "outputTokens": q.Output, "totalTokens": q.Input + q.Output})
	return out
}

// errorMessage is a JSON-RPC error's message with its details, which the programs put
// in data (Qwen Code's "Internal error" says nothing without them).
func errorMessage(e *rpcError) string {
	msg := e.Message
	var data struct {
		Details string `json:"details"`
	}
	if json.Unmarshal(e.Data, &data) == nil && data.Details != "" && !strings.Contains(msg, data.Details) {
		msg += ": " + data.Details
	}
	if msg == "" {
		msg = fmt.Sprintf("the agent failed the prompt (JSON-RPC error %d)", e.Code)
	}
	return msg
}

// notification reads a program notification.
func (t *translator) notification(l rpcLine, raw json.RawMessage) {
	switch l.Method {
	case methodSessionUpdate:
		t.update(l.Params, raw)
	case methodCancelRequest:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(l.Params, &p) != nil {
			t.diag(l.Method, raw)
			return
		}
		if o, ok := t.st.interactionByRequest(p.RequestID); ok {
			t.closeInteraction(o, engines.ClosureWithdrawn)
		}
	default:
		if !slices.Contains(quietNotifications, l.Method) {
			t.diag(l.Method, raw)
		}
	}
}

// updateKind reads the discriminator of a session/update.
func updateKind(params json.RawMessage) string {
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
		} `json:"update"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Update.SessionUpdate
}

func (t *translator) update(params, raw json.RawMessage) {
	if t.st.Loading {
		// History replayed by session/load: the platform has it already.
		return
	}
	kind := updateKind(params)
	if slices.Contains(quietUpdates, kind) {
		return
	}
	if kind == "usage_update" {
		if r := t.st.Resp; r != nil {
			var p struct {
				Update json.RawMessage `json:"update"`
			}
			_ = json.Unmarshal(params, &p)
			r.Usage = p.Update
		}
		return
	}
	var n acpsdk.SessionNotification
	if err := json.Unmarshal(params, &n); err != nil {
		t.diag("session_update_"+kind, raw)
		return
	}
	u := n.Update
	if c := u.AgentMessageChunk; c != nil && t.modeText != "" && c.Content.Text != nil && strings.HasPrefix(c.Content.Text.Text, t.modeText) {
		// The program's mode notification in the guise of text: quiet, as
		// current_mode_update is.
		return
	}
	if u.UserMessageChunk != nil {
		// Programs echo no live prompt; a user chunk outside a load is a program's own.
		t.diag("session_update_"+kind, raw)
		return
	}
	r := t.ensureResponse()
	if r == nil {
		t.diag("update_outside_prompt", raw)
		return
	}
	if c := u.AgentMessageChunk; c != nil {
		r.addCallTokens(c.Meta["usage"])
	}
	switch {
	case u.AgentMessageChunk != nil:
		t.chunk("text", u.AgentMessageChunk.Content, u.AgentMessageChunk.MessageId, raw)
	case u.AgentThoughtChunk != nil:
		t.chunk("reasoning", u.AgentThoughtChunk.Content, u.AgentThoughtChunk.MessageId, raw)
	case u.ToolCall != nil:
		tc := u.ToolCall
		t.toolUpdate(string(tc.ToolCallId), tc.Title, tc.RawInput, string(tc.Status), tc.RawOutput, tc.Content)
	case u.ToolCallUpdate != nil:
		tc := u.ToolCallUpdate
		var title, status string
		if tc.Title != nil {
			title = *tc.Title
		}
		if tc.Status != nil {
			status = string(*tc.Status)
		}
		t.toolUpdate(string(tc.ToolCallId), title, tc.RawInput, status, tc.RawOutput, tc.Content)
	default:
		t.diag("session_update_"+kind, raw)
	}
}

// chunk streams text or reasoning. A new part starts when the kind or the program's
// message id changes; part ids are minted in the response, since not every program
// gives message ids.
func (t *translator) chunk(kind string, content acpsdk.ContentBlock, messageID *string, raw json.RawMessage) {
	if content.Text == nil {
		t.diag("non_text_chunk", raw)
		return
	}
	r := t.st.Resp
	mid := ""
	if messageID != nil {
		mid = *messageID
	}
	if p := r.Part; p == nil || p.Kind != kind || (mid != "" && p.MessageID != "" && p.MessageID != mid) {
		t.endPart()
		r.Parts++
		r.Part = &streamPart{ID: fmt.Sprintf("%s:%d", r.ID, r.Parts), Kind: kind, MessageID: mid}
		if kind == "reasoning" {
			t.output(engines.WithPartID(engines.MustFrame(engines.ReasoningStartChunk{ID: r.Part.ID})))
		} else {
			t.output(engines.WithPartID(engines.MustFrame(engines.TextStartChunk{ID: r.Part.ID})))
		}
	}
	if content.Text.Text == "" {
		return
	}
	if kind == "reasoning" {
		t.output(engines.MustFrame(engines.ReasoningDeltaChunk{ID: r.Part.ID, Delta: content.Text.Text}))
		return
	}
	t.output(engines.MustFrame(engines.TextDeltaChunk{ID: r.Part.ID, Delta: content.Text.Text}))
}

// endPart ends the text or reasoning part streaming.
func (t *translator) endPart() {
	r := t.st.Resp
	if r == nil || r.Part == nil {
		return
	}
	p := r.Part
	r.Part = nil
	if p.Kind == "reasoning" {
		t.output(engines.MustFrame(engines.ReasoningEndChunk{ID: p.ID}))
		return
	}
	t.output(engines.MustFrame(engines.TextEndChunk{ID: p.ID}))
}

// toolUpdate follows a tool call: its input part opens at the first sight, its input is
// sent once the program fills it (or at the latest when the call asks permission or
// ends), and its output when the program reports it completed or failed.
func (t *translator) toolUpdate(id, title string, rawInput any, status string, rawOutput any, content []acpsdk.ToolCallContent) {
	if id == "" {
		return
	}
	r := t.st.Resp
	i, ok := r.tool(id)
	if !ok {
		t.endPart()
		name := title
		if name == "" {
			name = "tool"
		}
		r.Tools = append(r.Tools, toolCall{ID: id, Name: name})
		i = len(r.Tools) - 1
		t.output(engines.MustFrame(engines.ToolInputStartChunk{ToolCallID: id, ToolName: name}))
	}
	done := status == string(acpsdk.ToolCallStatusCompleted) || status == string(acpsdk.ToolCallStatusFailed)
	if !r.Tools[i].InputSent && (hasInput(rawInput) || done) {
		t.toolInput(i, rawInput)
	}
	if !done {
		return
	}
	call := r.Tools[i]
	r.Tools = slices.Delete(r.Tools, i, i+1)
	if status == string(acpsdk.ToolCallStatusFailed) {
		t.output(engines.MustFrame(engines.ToolOutputErrorChunk{ToolCallID: call.ID, ErrorText: failureText(rawOutput, content)}))
		return
	}
	t.output(engines.MustFrame(engines.ToolOutputAvailableChunk{ToolCallID: call.ID, Output: toolOutput(rawOutput, content)}))
}

func (t *translator) toolInput(i int, rawInput any) {
	r := t.st.Resp
	input := json.RawMessage(`{}`)
	if hasInput(rawInput) {
		input, _ = json.Marshal(rawInput)
	}
	r.Tools[i].InputSent = true
	t.output(engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: r.Tools[i].ID, ToolName: r.Tools[i].Name, Input: input}))
}

// hasInput reports whether a rawInput carries anything (Claude opens a call with {}).
func hasInput(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// toolOutput is the program's raw output, or its content when it gives none.
func toolOutput(rawOutput any, content []acpsdk.ToolCallContent) json.RawMessage {
	var v any = rawOutput
	if v == nil {
		v = content
	}
	if v == nil {
		return json.RawMessage(`null`)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return raw
}

// failureText is a failed call's reason in the program's words.
func failureText(rawOutput any, content []acpsdk.ToolCallContent) string {
	if s, ok := rawOutput.(string); ok && s != "" {
		return s
	}
	for _, c := range content {
		if c.Content != nil && c.Content.Content.Text != nil && c.Content.Content.Text.Text != "" {
			return c.Content.Content.Text.Text
		}
	}
	if rawOutput != nil {
		raw, _ := json.Marshal(rawOutput)
		return string(raw)
	}
	return "the tool call failed"
}

// promptSent reads a session/prompt the client sent: its text blocks, and the session
// log's length the client recorded in _meta when the profile admits from it.
func promptSent(params json.RawMessage, inputID string, seq int) prompt {
	p := prompt{Input: inputID, Seq: seq}
	var body struct {
		Prompt []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &body) != nil {
		return p
	}
	raw, ok := body.Meta[metaLogLines]
	if !ok || json.Unmarshal(raw, &p.LogFrom) != nil {
		return p
	}
	var text []string
	for _, b := range body.Prompt {
		if b.Type == "text" {
			text = append(text, b.Text)
		}
	}
	// A program records one text block as it is; several are matched by the first.
	if len(text) > 0 {
		p.Text = text[0]
	}
	return p
}
