package claude

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// fileTools are the tools whose structured result reports a completed file change.
var fileTools = map[string]bool{"Write": true, "Edit": true, "MultiEdit": true}

// toolInput reports a tool call's complete input, verbatim from the assistant line.
func (t *translator) toolInput(b contentBlock, streamed bool) {
	r := t.st.Resp
	if _, ok := r.tool(b.ID); ok {
		return
	}
	started := false
	if streamed {
		for idx, blk := range r.Blocks {
			if blk.Kind == "tool" && blk.ID == b.ID {
				blk.Available = true
				r.Blocks[idx] = blk
				started = true
			}
		}
	}
	if !started {
		t.output(engines.MustFrame(engines.ToolInputStartChunk{ToolCallID: b.ID, ToolName: b.Name}))
	}
	input := b.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	t.output(engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: b.ID, ToolName: b.Name, Input: input}))
	r.Tools = append(r.Tools, toolCall{ID: b.ID, Name: b.Name})
}

// user translates a user line: tool results, or a sub-agent's messages. Replayed user
// inputs and Claude's own notes ("[Request interrupted by user]") carry no new fact.
func (t *translator) user(n nativeLine) {
	if n.IsReplay {
		return
	}
	var msg apiMessage
	if err := json.Unmarshal(n.Message, &msg); err != nil {
		return
	}
	if n.ParentToolUseID != nil {
		t.childMessage(*n.ParentToolUseID, n.UUID, "user", msg.Content)
		return
	}
	r := t.st.Resp
	if r == nil {
		return
	}
	for _, b := range decodeBlocks(msg.Content) {
		if b.Type != "tool_result" {
			continue
		}
		call, ok := r.tool(b.ToolUseID)
		if !ok {
			raw, _ := json.Marshal(b)
			t.diag("tool_result_without_call", raw)
			continue
		}
		t.toolOutput(call, b, n.ToolUseResult)
	}
}

func (t *translator) toolOutput(call toolCall, b contentBlock, structured json.RawMessage) {
	r := t.st.Resp
	for i, c := range r.Tools {
		if c.ID == call.ID {
			r.Tools = append(r.Tools[:i:i], r.Tools[i+1:]...)
			break
		}
	}
	if b.IsError {
		t.output(engines.MustFrame(engines.ToolOutputErrorChunk{ToolCallID: call.ID, ErrorText: blockText(b.Content)}))
	} else {
		out := structured
		if len(out) == 0 || string(out) == "null" {
			out = b.Content
		}
		t.output(engines.MustFrame(engines.ToolOutputAvailableChunk{ToolCallID: call.ID, Output: out}))
		if fileTools[call.Name] {
			if f, ok := fileChangesFrame(call.ID, structured); ok {
				t.output(f)
			}
		}
	}
}

// blockText is a tool result's text: a string, or the text blocks of a content list.
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []string
	for _, b := range decodeBlocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	if len(parts) == 0 {
		return string(raw)
	}
	return strings.Join(parts, "\n")
}

// nativeFileResult is the structured result (tool_use_result) of Write and Edit.
type nativeFileResult struct {
	Type            string          `json:"type"`
	FilePath        string          `json:"filePath"`
	Content         *string         `json:"content"`
	OriginalFile    *string         `json:"originalFile"`
	StructuredPatch []nativeHunk    `json:"structuredPatch"`
	Raw             json.RawMessage `json:"-"`
}

type nativeHunk struct {
	OldStart int      `json:"oldStart"`
	OldLines int      `json:"oldLines"`
	NewStart int      `json:"newStart"`
	NewLines int      `json:"newLines"`
	Lines    []string `json:"lines"`
}

// fileChangesFrame builds data-file-changes from the patch Claude reports for a
// completed write: its structured hunks, or for a created file its content. It never
// reads the requested tool input.
func fileChangesFrame(toolCallID string, structured json.RawMessage) (engines.Frame, bool) {
	var res nativeFileResult
	if err := json.Unmarshal(structured, &res); err != nil || res.FilePath == "" {
		return engines.Frame{}, false
	}
	change := engines.FileChange{Path: res.FilePath, Kind: res.Type}
	switch {
	case len(res.StructuredPatch) > 0:
		d := &engines.FileDiff{Format: engines.DiffHunks}
		for _, h := range res.StructuredPatch {
			d.Hunks = append(d.Hunks, engines.DiffHunk{OldStart: h.OldStart, OldLines: h.OldLines,
				NewStart: h.NewStart, NewLines: h.NewLines, Lines: h.Lines})
		}
		change.Diff = d
	case res.Type == "create" && res.Content != nil:
		change.Diff = &engines.FileDiff{Format: engines.DiffContentPair, Before: res.OriginalFile, After: res.Content}
	}
	f, err := engines.FileChangesFrame(toolCallID, []engines.FileChange{change})
	return f, err == nil
}

// childMessage reports one message of a sub-agent (a line whose parent_tool_use_id is
// the Task call) as a data-subagent part.
func (t *translator) childMessage(parent, uuid, role string, content json.RawMessage) {
	if uuid == "" {
		return
	}
	var parts []map[string]any
	var s string
	if json.Unmarshal(content, &s) == nil {
		parts = append(parts, map[string]any{"type": "text", "text": s})
	}
	for _, b := range decodeBlocks(content) {
		switch b.Type {
		case "text":
			parts = append(parts, map[string]any{"type": "text", "text": b.Text})
		case "tool_use":
			parts = append(parts, map[string]any{"type": "dynamic-tool", "toolName": b.Name, "toolCallId": b.ID,
				"state": "input-available", "input": b.Input})
		case "tool_result":
			parts = append(parts, map[string]any{"type": "tool-result", "toolCallId": b.ToolUseID, "output": blockText(b.Content)})
		}
	}
	if len(parts) == 0 {
		return
	}
	raw, _ := json.Marshal(parts)
	f, err := engines.SubagentMessageFrame(t.sessionID, parent, engines.ChildRunMessage{MessageID: uuid, Role: role, Parts: raw})
	if err != nil {
		t.diag("subagent_message", json.RawMessage(fmt.Sprintf("%q", err.Error())))
		return
	}
	t.childOutput(f)
}

// childOutput sends a child-run part with the response in progress, or with no
// response when the sub-agent outlives the turn that started it (Claude runs Agent
// calls in the background).
func (t *translator) childOutput(f engines.Frame) {
	if t.st.Resp != nil {
		t.output(f)
		return
	}
	t.emit(engines.NewResponseOutput(engines.RuntimeCursor{}, "", f))
}

// nativeTask is a system task_started or task_notification line.
type nativeTask struct {
	TaskID       string          `json:"task_id"`
	TaskType     string          `json:"task_type"`
	ToolUseID    string          `json:"tool_use_id"`
	Description  string          `json:"description"`
	SubagentType string          `json:"subagent_type"`
	Status       string          `json:"status"`
	Usage        json.RawMessage `json:"usage"`
}

// task reports a sub-agent's lifecycle from Claude's own task lines: task_started
// (running) and task_notification (its final status, in Claude's words). The child's
// native reference is the Agent call's tool_use id. Other tasks (a backgrounded Bash)
// are diagnostics.
func (t *translator) task(subtype string, raw json.RawMessage) {
	var n nativeTask
	_ = json.Unmarshal(raw, &n)
	childAt := slices.IndexFunc(t.st.Children, func(c childRun) bool { return c.ID == n.ToolUseID })
	isChild := n.ToolUseID != "" && (subtype == "task_started" && (n.TaskType == "local_agent" || n.SubagentType != "") ||
		subtype == "task_notification" && childAt >= 0)
	if !isChild {
		t.diag("system/"+subtype, raw)
		return
	}
	run := engines.ChildRun{NativeRef: n.ToolUseID, ParentToolCallID: n.ToolUseID, Title: n.Description, AgentType: n.SubagentType}
	if subtype == "task_started" {
		run.Status = "running"
		if childAt < 0 {
			t.st.Children = append(t.st.Children, childRun{ID: n.ToolUseID, Title: n.Description, AgentType: n.SubagentType})
		}
	} else {
		run.Status = n.Status
		run.Title, run.AgentType = t.st.Children[childAt].Title, t.st.Children[childAt].AgentType
		if len(n.Usage) > 0 && string(n.Usage) != "null" {
			run.Usage = n.Usage
		}
		t.st.Children = slices.Delete(t.st.Children, childAt, childAt+1)
	}
	if run.Status == "" {
		run.Status = subtype
	}
	f, err := engines.SubagentFrame(t.sessionID, run)
	if err != nil {
		t.diag("system/"+subtype, raw)
		return
	}
	t.childOutput(f)
}
