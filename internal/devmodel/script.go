package devmodel

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Script names accepted in a directive. docs/devmodel.md describes each one.
const (
	ScriptText  = "text"
	ScriptThink = "think"
	ScriptSlow  = "slow"
	ScriptBash  = "bash"
	ScriptWrite = "write"
	ScriptError = "error"
	// ScriptTask delegates to a sub-agent through the program's Task (or Agent) tool.
	ScriptTask = "task"
	// ScriptTool calls any offered tool by name, such as an MCP server's tool.
	ScriptTool = "tool"
	// ScriptSide is not a directive: it names the short reply given to side
	// requests (title or summary calls on a small model) so they never run a
	// script meant for the main conversation.
	ScriptSide = "side"
	// ScriptInvalid is not a directive either: it names the text reply that
	// reports a malformed directive or an unknown script.
	ScriptInvalid = "invalid"
	// ScriptJSON is not a directive either: it names the reply to a request for
	// JSON of a schema (Gemini CLI's next-speaker check), the schema's smallest value.
	ScriptJSON = "json"
)

// blockKind is the kind of one content block of a scripted reply.
type blockKind int

const (
	blockText blockKind = iota
	blockThinking
	blockToolCall
)

// toolCall is a call the scripted model makes. arguments is a JSON object for a
// function tool and raw text for a freeform (custom) tool.
type toolCall struct {
	name      string
	arguments string
	freeform  bool
	// namespace is the Responses namespace the tool was offered in, if any.
	namespace string
	// search makes the call a Responses tool_search_call (a client-executed tool
	// search) instead of a function call.
	search bool
}

// block is one content block of a reply; text and thinking are split into chunks,
// each sent as one delta.
type block struct {
	kind   blockKind
	chunks []string
	call   toolCall
}

func (b block) text() string { return strings.Join(b.chunks, "") }

// scriptedError is an HTTP error the script answers with instead of a reply.
type scriptedError struct {
	status     int
	message    string
	retryAfter time.Duration
	// drop closes the connection mid-reply instead of sending the API's error
	// event, as a dying proxy or a restarted host does.
	drop bool
}

// plan is the reply decided for one request, before it is put on a wire format.
type plan struct {
	script string
	step   int
	err    *scriptedError
	// streamErr ends a streamed reply with an error event after its blocks
	// instead of a normal stop (a non-streaming request gets it as HTTP error).
	streamErr *scriptedError
	blocks    []block
	// toolUse is true when the reply ends by asking for tool calls.
	toolUse bool
	// delay paces the chunks; zero sends them back to back.
	delay time.Duration
}

// scripter decides replies. It keeps one piece of state: how many scripted
// errors each conversation has had, so `error times=N` fails N times and then
// succeeds for the retry.
type scripter struct {
	slowDelay time.Duration

	mu           sync.Mutex
	errorsServed map[string]int
}

func newScripter(slowDelay time.Duration) *scripter {
	return &scripter{slowDelay: slowDelay, errorsServed: map[string]int{}}
}

// decide picks the reply for conv. It never fails: a bad directive becomes a text
// reply that says what is wrong, so a person sees it in the program's output.
func (s *scripter) decide(conv *conversation) plan {
	if isSideRequest(conv) {
		return textPlan(ScriptSide, "Scripted side reply.")
	}
	if conv.jsonReply != "" {
		return plan{script: ScriptJSON, blocks: []block{{kind: blockText, chunks: []string{conv.jsonReply}}}}
	}
	t := conv.currentTurn()
	d, _, found, err := findDirective(t.prompt)
	if err != nil {
		return textPlan(ScriptInvalid, fmt.Sprintf("Script error: %v", err))
	}
	// The newest prompt entry parsed, since t.prompt did, without error.
	_, prompt, _, _ := findDirective(t.latest)
	if !found {
		return textPlan(ScriptText, defaultReply(prompt))
	}
	p, err := s.run(d, prompt, t, conv)
	if err != nil {
		return textPlan(ScriptInvalid, fmt.Sprintf("Script error: %s: %v", d.name, err))
	}
	p.script = d.name
	p.step = t.toolResults
	return p
}

// isSideRequest recognises Claude Code's calls on its small fast model (titles,
// summaries): they offer no tools and name a haiku model.
func isSideRequest(conv *conversation) bool {
	return len(conv.tools) == 0 && strings.Contains(strings.ToLower(conv.model), "haiku")
}

// defaultReply is the plain reply to a prompt without a directive.
func defaultReply(prompt string) string {
	return "Scripted reply to: " + cut(strings.Join(strings.Fields(prompt), " "), 200)
}

func (s *scripter) run(d directive, prompt string, t turn, conv *conversation) (plan, error) {
	delay, err := d.duration("delay", 0)
	if err != nil {
		return plan{}, err
	}
	var p plan
	switch d.name {
	case ScriptText:
		p = textPlan(d.name, d.str("text", defaultReply(prompt)))
	case ScriptThink:
		p = textPlan(d.name, d.str("text", defaultReply(prompt)))
		p.blocks = append([]block{{kind: blockThinking, chunks: words(d.str("thought", "Thinking about: "+prompt))}}, p.blocks...)
	case ScriptSlow:
		if p, err = s.slowPlan(d); err != nil {
			return plan{}, err
		}
		return p, nil
	case ScriptBash, "shell":
		calls, cerr := bashCall(d, conv)
		p, err = toolPlan(d, t, conv, calls, cerr)
	case ScriptWrite:
		calls, cerr := writeCall(d, conv)
		p, err = toolPlan(d, t, conv, calls, cerr)
	case ScriptTask:
		calls, cerr := taskCall(d, conv)
		p, err = toolPlan(d, t, conv, calls, cerr)
	case ScriptTool:
		p, err = namedToolPlan(d, t, conv)
	case ScriptError:
		p, err = s.errorPlan(d, prompt, t)
	default:
		return plan{}, fmt.Errorf("unknown script %q", d.name)
	}
	if err != nil {
		return plan{}, err
	}
	if thought := d.str("think", ""); thought != "" && d.name != ScriptThink && p.err == nil {
		p.blocks = append([]block{{kind: blockThinking, chunks: words(thought)}}, p.blocks...)
	}
	p.delay = delay
	return p, nil
}

func textPlan(script, text string) plan {
	return plan{script: script, blocks: []block{{kind: blockText, chunks: words(text)}}}
}

// slowPlan streams chunks paced by delay (default: Options.SlowDelay), so a test
// can interrupt or send a message while the reply is still coming.
func (s *scripter) slowPlan(d directive) (plan, error) {
	n, err := d.integer("chunks", 20)
	if err != nil {
		return plan{}, err
	}
	if n < 1 {
		return plan{}, fmt.Errorf("chunks must be at least 1")
	}
	delay, err := d.duration("delay", s.slowDelay)
	if err != nil {
		return plan{}, err
	}
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("Slow chunk %d of %d. ", i+1, n)
	}
	if text := d.str("text", ""); text != "" {
		chunks = splitEven(text, n)
	}
	return plan{script: d.name, blocks: []block{{kind: blockText, chunks: chunks}}, delay: delay}, nil
}

// toolPlan emits the tool call of step t.toolResults, and the final text once
// every step has a result.
func toolPlan(d directive, t turn, conv *conversation, calls []toolCall, err error) (plan, error) {
	if err != nil {
		return plan{}, err
	}
	if len(calls) == 0 {
		return textPlan(d.name, fmt.Sprintf("No suitable tool is offered for script %s (offered: %s).", d.name, strings.Join(conv.tools, ", "))), nil
	}
	if t.toolResults < len(calls) {
		return plan{blocks: []block{{kind: blockToolCall, call: calls[t.toolResults]}}, toolUse: true}, nil
	}
	final := d.str("final", "Tool finished: "+lastLine(t.lastResult))
	return textPlan(d.name, final), nil
}

// errorPlan answers with an HTTP error; with times=N only the first N requests of
// the turn fail and the next one gets a text reply, which tests a program's own
// retry. The count is keyed by the directive and the turn's place in history.
func (s *scripter) errorPlan(d directive, prompt string, t turn) (plan, error) {
	status, err := d.integer("status", 500)
	if err != nil {
		return plan{}, err
	}
	if status < 400 || status > 599 {
		return plan{}, fmt.Errorf("status %d is not an HTTP error", status)
	}
	times, err := d.integer("times", 0)
	if err != nil {
		return plan{}, err
	}
	retryAfter, err := d.duration("retry_after", 0)
	if err != nil {
		return plan{}, err
	}
	key := fmt.Sprintf("%d|%s|%s", t.promptIndex, d.raw, d.str("id", ""))
	s.mu.Lock()
	served := s.errorsServed[key]
	fail := times == 0 || served < times
	if fail {
		s.errorsServed[key] = served + 1
	}
	s.mu.Unlock()
	if !fail {
		return textPlan(d.name, d.str("text", fmt.Sprintf("Recovered after %d scripted errors.", served))), nil
	}
	msg := d.str("message", fmt.Sprintf("scripted error %d (%d of %s)", status, served+1, timesLabel(times)))
	e := &scriptedError{status: status, message: msg, retryAfter: retryAfter, drop: d.str("drop", "") == "true"}
	if d.str("midstream", "") == "true" {
		p := textPlan(d.name, d.str("partial", "Partial reply before a stream error."))
		p.streamErr = e
		return p, nil
	}
	return plan{err: e}, nil
}

func timesLabel(times int) string {
	if times == 0 {
		return "always"
	}
	return fmt.Sprint(times)
}

// words splits text into chunks of one word with its following space, so a reply
// arrives as several deltas the way a real model streams it.
func words(text string) []string {
	var chunks []string
	start := 0
	for i := 0; i < len(text); i++ {
		if text[i] == ' ' || text[i] == '\n' {
			chunks = append(chunks, text[start:i+1])
			start = i + 1
		}
	}
	if start < len(text) || len(chunks) == 0 {
		chunks = append(chunks, text[start:])
	}
	return chunks
}

// splitEven cuts text into n chunks of about the same length on byte boundaries
// that keep UTF-8 intact.
func splitEven(text string, n int) []string {
	runes := []rune(text)
	if n > len(runes) {
		n = max(len(runes), 1)
	}
	chunks := make([]string, 0, n)
	for i := range n {
		chunks = append(chunks, string(runes[i*len(runes)/n:(i+1)*len(runes)/n]))
	}
	return chunks
}

// lastLine is the last non-empty line of a tool result: the command's own
// output comes last in every program's format (Codex puts a header with the
// chunk id, wall time and exit code first).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return firstLine(lines[len(lines)-1])
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return cut(s, 200)
}

// cut shortens s to at most n bytes without splitting a character, marking the
// cut with an ellipsis.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
