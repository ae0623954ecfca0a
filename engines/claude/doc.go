// Package claude connects Claude Code (the pinned @anthropic-ai/claude-code release) to
// AstraBox as an Agent program. The adapter starts `claude -p` with the stream-json
// input and output formats and the control protocol as a long-lived process session in
// the conversation's box (engines.Box.StartProcess); the runtime client drives it over
// stdin and translates its stdout journal into AstraBox's runtime events.
//
// The facts the client reports come from Claude Code's own signals: an input is
// admitted when Claude's transcript file holds the user line with the input's uuid or
// naming it among the prompts merged into that line (mergedSendUuids), or the
// queued_command attachment that absorbed it into a running turn; a response starts
// at command_lifecycle "started" and ends at the result line, and every input consumed
// before that result belongs to it; approvals are can_use_tool control requests; status
// follows system/session_state_changed. The cursor is the process session's journal
// offset plus the translation state that journal cannot rebuild, so reading again from
// any cursor yields the same events. docs/engines/claude.md describes the mapping.
package claude
