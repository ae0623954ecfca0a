package devmodel

import "strings"

// entryKind tells what one entry of a normalized conversation is.
type entryKind int

const (
	// entryPrompt is a message the person (or the program on their behalf) wrote.
	entryPrompt entryKind = iota
	// entryToolResult is the output of a tool call the model made earlier.
	entryToolResult
	// entryAssistant is anything the model said earlier (text or tool calls).
	entryAssistant
)

// entry is one step of a conversation, independent of the wire format it came in.
type entry struct {
	kind entryKind
	text string
}

// conversation is what the scripts look at: the history of one request reduced to
// prompts, tool results and assistant turns, plus the tools the program offers.
// Every wire format (Anthropic Messages, OpenAI Responses, Chat Completions, the
// Gemini API) is parsed into this shape so one script serves them all.
type conversation struct {
	model   string
	stream  bool
	entries []entry
	// tools lists the offered tool names in the order the program sent them.
	tools []string
	// customTools holds the names of freeform (non-JSON) tools, such as Codex's
	// apply_patch in the Responses API.
	customTools map[string]bool
	// namespaced maps the name a tool offered inside a Responses namespace is listed
	// under in tools, "<namespace>__<name>" (such as the MCP tools a client tool search
	// loaded, mcp__<server>__<tool>), to the namespace and name its call carries.
	namespaced map[string]namespacedTool
	// chatUsage asks for the final usage chunk of a Chat Completions stream.
	chatUsage bool
	// jsonReply, when set, is the whole reply: the request asked for JSON of a
	// schema (Gemini's responseMimeType application/json), not for a turn.
	jsonReply string
	// dshContext is set when DeepSeek Harness sent its runtime context message: its
	// bash tool requires a description, and leaving its sandbox takes
	// sandbox_permissions and a justification.
	dshContext bool
}

// dshContextPrefix starts the user message DeepSeek Harness adds after every prompt.
const dshContextPrefix = "Current runtime context."

// namespacedTool is a tool offered inside a Responses namespace.
type namespacedTool struct {
	namespace, name string
}

// addPrompt appends prompt text, dropping the harness reminders Claude Code puts
// into user messages so a directive is found in what the person typed.
func (c *conversation) addPrompt(text string) {
	if strings.HasPrefix(strings.TrimSpace(text), "<system-reminder>") {
		return
	}
	if strings.HasPrefix(strings.TrimSpace(text), dshContextPrefix) {
		c.dshContext = true
		return
	}
	c.entries = append(c.entries, entry{kind: entryPrompt, text: text})
}

func (c *conversation) addToolResult(text string) {
	c.entries = append(c.entries, entry{kind: entryToolResult, text: text})
}

// appendToolResult adds text to the newest tool result (text a program sends beside
// the results in the same message); with no result yet it is a prompt.
func (c *conversation) appendToolResult(text string) {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if c.entries[i].kind == entryToolResult {
			c.entries[i].text = strings.TrimSpace(c.entries[i].text + "\n" + text)
			return
		}
	}
	c.addPrompt(text)
}

func (c *conversation) addAssistant(text string) {
	c.entries = append(c.entries, entry{kind: entryAssistant, text: text})
}

// lastPrompt returns the index of the newest prompt entry, or -1. A prompt is
// followed by any number of tool results, which belong to the same turn.
func (c *conversation) lastPrompt() int {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if c.entries[i].kind == entryPrompt {
			return i
		}
	}
	return -1
}

// turn describes where the newest turn stands: its prompt text (several prompt
// entries in a row are joined, since programs split one message into blocks), how
// many tool results came back since, and the newest tool result.
type turn struct {
	prompt string
	// latest is the newest prompt entry alone: programs put context (Codex's
	// environment_context, instructions) in prompt entries before the person's.
	latest      string
	promptIndex int
	toolResults int
	lastResult  string
	endsInTool  bool
}

func (c *conversation) currentTurn() turn {
	last := c.lastPrompt()
	if last < 0 {
		return turn{promptIndex: -1}
	}
	first := last
	for first > 0 && c.entries[first-1].kind == entryPrompt {
		first--
	}
	parts := make([]string, 0, last-first+1)
	for _, e := range c.entries[first : last+1] {
		parts = append(parts, e.text)
	}
	t := turn{prompt: strings.Join(parts, "\n"), latest: c.entries[last].text, promptIndex: first}
	for _, e := range c.entries[last+1:] {
		if e.kind == entryToolResult {
			t.toolResults++
			t.lastResult = e.text
		}
	}
	t.endsInTool = len(c.entries) > 0 && c.entries[len(c.entries)-1].kind == entryToolResult
	return t
}

// offers reports the first offered tool whose name is one of names, compared
// exactly first and then case-insensitively.
func (c *conversation) offers(names ...string) (string, bool) {
	for _, want := range names {
		for _, have := range c.tools {
			if have == want {
				return have, true
			}
		}
	}
	for _, want := range names {
		for _, have := range c.tools {
			if strings.EqualFold(have, want) {
				return have, true
			}
		}
	}
	return "", false
}

// calledThisTurn reports whether the model already called the tool since the newest
// prompt (assistant entries name their calls as "[tool_use NAME]" or
// "[tool_call NAME]").
func (c *conversation) calledThisTurn(name string) bool {
	for _, e := range c.entries[c.lastPrompt()+1:] {
		if e.kind == entryAssistant && (strings.Contains(e.text, "[tool_use "+name+"]") || strings.Contains(e.text, "[tool_call "+name+"]")) {
			return true
		}
	}
	return false
}
