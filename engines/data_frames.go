package engines

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ResumeCursorData is the data of a data-resume-cursor part.
type ResumeCursorData struct {
	// Seq is the Session output position; a client reconnects with after_seq=Seq.
	Seq int64 `json:"seq"`
}

// ResumeCursorFrame builds the data-resume-cursor part the Session stream sends so a
// client can save its position. It is transient (the AI SDK passes it to onData but
// does not store it in the message) and keeps the fixed id "resume-cursor", so even a
// client that stores it holds one part that updates in place.
func ResumeCursorFrame(seq int64) Frame {
	data, _ := json.Marshal(ResumeCursorData{Seq: seq})
	return MustFrame(DataChunk{Name: "resume-cursor", ID: "resume-cursor", Data: data, Transient: true})
}

// AppendResumeCursorJSON appends ResumeCursorFrame(seq)'s encoding to dst without
// building the frame: the stream sends one after every part.
func AppendResumeCursorJSON(dst []byte, seq int64) []byte {
	dst = append(dst, `{"type":"data-resume-cursor","data":{"seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	return append(dst, `},"id":"resume-cursor","transient":true}`...)
}

// InputFailedData is the data of a data-input-failed part.
type InputFailedData struct {
	InputID string `json:"input_id"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// InputFailedFrame builds the data-input-failed part for an input the Agent program or
// the deployment's preparation refused: the input starts no response and keeps its
// failure in history. Its part id is the input id.
func InputFailedFrame(inputID, code, message string) Frame {
	data, _ := json.Marshal(InputFailedData{InputID: inputID, Code: code, Message: message})
	return MustFrame(DataChunk{Name: "input-failed", ID: inputID, Data: data})
}

// FileChange is one completed native file change.
type FileChange struct {
	// Path is the changed path as the program reports it.
	Path string `json:"path"`
	// Kind is the program's own word for the change (e.g. add, update, delete), if any.
	Kind string `json:"kind,omitempty"`
	// MovePath is the new path of a moved file, if any.
	MovePath string `json:"move_path,omitempty"`
	// Diff is the supplier's comparison, or nil (JSON null) when it confirms the write
	// but provides none. Never construct it from the requested tool input: a request is
	// not an applied change.
	Diff *FileDiff `json:"diff"`
}

// DiffFormat names the form a supplier gave a comparison in.
type DiffFormat string

// The diff formats.
const (
	DiffContentPair  DiffFormat = "content_pair"
	DiffUnifiedPatch DiffFormat = "unified_patch"
	DiffHunks        DiffFormat = "hunks"
	DiffExcerpt      DiffFormat = "excerpt"
)

// FileDiff is a supplier's comparison for one file, in one of the diff formats.
type FileDiff struct {
	Format DiffFormat `json:"format"`
	// Before and After are native content pairs (content_pair); nil means absent (a
	// created or deleted file).
	Before *string `json:"before,omitempty"`
	After  *string `json:"after,omitempty"`
	// Patch is a unified patch (unified_patch).
	Patch string `json:"patch,omitempty"`
	// Hunks are structured hunks (hunks).
	Hunks []DiffHunk `json:"hunks,omitempty"`
	// Excerpt is an isolated excerpt of the change (excerpt).
	Excerpt string `json:"excerpt,omitempty"`
}

// DiffHunk is one structured hunk; Lines keep their leading " ", "+" or "-".
type DiffHunk struct {
	OldStart int      `json:"old_start"`
	OldLines int      `json:"old_lines"`
	NewStart int      `json:"new_start"`
	NewLines int      `json:"new_lines"`
	Lines    []string `json:"lines"`
}

// FileChangesData is the data of a data-file-changes part.
type FileChangesData struct {
	ToolCallID string       `json:"tool_call_id"`
	Changes    []FileChange `json:"changes"`
}

// FileChangesFrame builds the data-file-changes part for completed native file changes
// made by one tool call (its part id is the tool call id, so a later report for the
// same call replaces it). AstraBox records it with the response that made it; the Diff
// panel reads it from there. The diffs must come from the supplier's confirmation of
// the write, never from the requested tool input.
func FileChangesFrame(toolCallID string, changes []FileChange) (Frame, error) {
	if toolCallID == "" {
		return Frame{}, errors.New("file changes: empty tool call id")
	}
	if len(changes) == 0 {
		return Frame{}, fmt.Errorf("file changes for %s: no changes", toolCallID)
	}
	for _, c := range changes {
		if err := c.validate(); err != nil {
			return Frame{}, fmt.Errorf("file changes for %s: %w", toolCallID, err)
		}
	}
	data, err := json.Marshal(FileChangesData{ToolCallID: toolCallID, Changes: changes})
	if err != nil {
		return Frame{}, fmt.Errorf("file changes for %s: %w", toolCallID, err)
	}
	return NewFrame(DataChunk{Name: "file-changes", ID: toolCallID, Data: data})
}

func (c FileChange) validate() error {
	if c.Path == "" {
		return errors.New("change has no path")
	}
	d := c.Diff
	if d == nil {
		return nil
	}
	ok := false
	switch d.Format {
	case DiffContentPair:
		ok = d.Before != nil || d.After != nil
	case DiffUnifiedPatch:
		ok = d.Patch != ""
	case DiffHunks:
		ok = len(d.Hunks) > 0
	case DiffExcerpt:
		ok = d.Excerpt != ""
	default:
		return fmt.Errorf("change of %s has unknown diff format %q", c.Path, d.Format)
	}
	if !ok {
		return fmt.Errorf("change of %s has an empty %s diff; pass a nil diff instead", c.Path, d.Format)
	}
	return nil
}

// ChildRunID mints the public id of a child run from its one stable native reference,
// namespaced by Session: the same child always gets the same id (so replays and new
// readers agree) and the native reference itself never leaves the adapter.
func ChildRunID(sessionID, nativeRef string) string {
	h := sha256.New()
	h.Write([]byte("astrabox/child-run/v1\x00"))
	h.Write([]byte(sessionID))
	h.Write([]byte{0})
	h.Write([]byte(nativeRef))
	return "cr_" + hex.EncodeToString(h.Sum(nil))[:32]
}

// ChildRun is what an adapter knows about one child run (sub-agent).
type ChildRun struct {
	// NativeRef is the one stable native reference of the child; it stays private.
	NativeRef string `json:"-"`
	// ParentNativeRef is the native reference of the parent child run, if nested.
	ParentNativeRef string `json:"-"`
	// Status is the engine-native status, unchanged.
	Status string `json:"status"`
	// Title describes the child's task.
	Title string `json:"title,omitempty"`
	// AgentType is the program's name for the kind of child agent, if any.
	AgentType string `json:"agent_type,omitempty"`
	// ParentToolCallID is the tool call that started the child, if any.
	ParentToolCallID string `json:"parent_tool_call_id,omitempty"`
	// ControlRef is what ChildRunStopper.StopChildRun takes to stop this child; empty
	// when it cannot be stopped. It must not disclose the native reference.
	ControlRef string `json:"control_ref,omitempty"`
	// Usage is the vendor's usage summary verbatim, if any.
	Usage json.RawMessage `json:"usage,omitempty"`
}

// ChildRunMessage is one message of a child run, as UI message parts.
type ChildRunMessage struct {
	// MessageID is stable for the message across replays.
	MessageID string `json:"message_id"`
	// Role is "user" or "assistant".
	Role string `json:"role"`
	// Parts are AI SDK UI message parts (e.g. {"type":"text","text":...}).
	Parts json.RawMessage `json:"parts"`
}

// SubagentData is the data of a data-subagent part.
type SubagentData struct {
	ChildRunID       string           `json:"child_run_id"`
	ParentChildRunID string           `json:"parent_child_run_id,omitempty"`
	Run              *ChildRun        `json:"run,omitempty"`
	Message          *ChildRunMessage `json:"message,omitempty"`
}

// SubagentFrame builds the data-subagent part for a child run's lifecycle facts. The
// part id is the public child run id, so each report replaces the previous one in the
// message. Report it with an empty response id when it belongs to no response.
func SubagentFrame(sessionID string, run ChildRun) (Frame, error) {
	if run.NativeRef == "" || run.Status == "" {
		return Frame{}, errors.New("subagent: child run needs a native reference and a status")
	}
	id := ChildRunID(sessionID, run.NativeRef)
	d := SubagentData{ChildRunID: id, Run: &run}
	if run.ParentNativeRef != "" {
		d.ParentChildRunID = ChildRunID(sessionID, run.ParentNativeRef)
	}
	return subagentFrame(id, d)
}

// SubagentMessageFrame builds the data-subagent part for one message of a child run;
// its part id is the child run id and the message id, so updates replace it in place.
func SubagentMessageFrame(sessionID, childNativeRef string, msg ChildRunMessage) (Frame, error) {
	if childNativeRef == "" || msg.MessageID == "" {
		return Frame{}, errors.New("subagent message: needs a child native reference and a message id")
	}
	if len(msg.Parts) == 0 || !json.Valid(msg.Parts) {
		return Frame{}, fmt.Errorf("subagent message %s: parts are not JSON", msg.MessageID)
	}
	id := ChildRunID(sessionID, childNativeRef)
	return subagentFrame(id+"/"+msg.MessageID, SubagentData{ChildRunID: id, Message: &msg})
}

func subagentFrame(partID string, d SubagentData) (Frame, error) {
	data, err := json.Marshal(d)
	if err != nil {
		return Frame{}, fmt.Errorf("subagent %s: %w", d.ChildRunID, err)
	}
	return NewFrame(DataChunk{Name: "subagent", ID: partID, Data: data})
}
