package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/astrabox/astrabox/store"
)

// maxImportMessages caps one history import call.
const maxImportMessages = 500

// importRequest is the body of POST /admin/sessions/{id}/history-import.
type importRequest struct {
	Messages []json.RawMessage `json:"messages"`
}

// importMessage is one message of earlier history, in conversation order.
type importMessage struct {
	SourceID       *string           `json:"source_id"`
	Role           *string           `json:"role"`
	CreatedAt      *string           `json:"created_at"`
	Completion     *string           `json:"completion"`
	ParentSourceID *string           `json:"parent_source_id"`
	Blocks         []json.RawMessage `json:"blocks"`
}

// importBlock is one content block; which fields apply depends on Type.
type importBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	Thinking  *string         `json:"thinking"`
	URL       *string         `json:"url"`
	MediaType *string         `json:"media_type"`
	Data      *string         `json:"data"`
	ID        *string         `json:"id"`
	Name      *string         `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID *string         `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   *bool           `json:"is_error"`
}

// importResult is the data of a history import.
type importResult struct {
	SessionID string `json:"session_id"`
	Imported  int    `json:"imported"`
	Total     int    `json:"total"`
}

// importHistory records earlier messages of a conversation moved from another system,
// for reading only (platform administrators). It starts nothing and changes no state.
func (s *Server) importHistory(c *gin.Context) {
	if err := requireAdmin(c); err != nil {
		s.fail(c, err)
		return
	}
	sess, err := s.loadSession(c, readAccess)
	if err != nil {
		s.fail(c, err)
		return
	}
	var req importRequest
	if err := decodeBody(c, maxImportBodyBytes, &req, false); err != nil {
		s.fail(c, err)
		return
	}
	msgs, err := parseImport(req)
	if err != nil {
		s.fail(c, err)
		return
	}
	added, err := s.store.ImportHistory(c.Request.Context(), sess.ID, msgs)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeOK(c, importResult{SessionID: sess.ID, Imported: added, Total: len(msgs)})
}

// parseImport validates every message and block, naming the field of the first problem.
func parseImport(req importRequest) ([]store.ImportedMessage, error) {
	if len(req.Messages) == 0 {
		return nil, InvalidRequest("messages", "lists no message")
	}
	if len(req.Messages) > maxImportMessages {
		return nil, InvalidRequest("messages", "lists %d messages; at most %d per call", len(req.Messages), maxImportMessages)
	}
	seen := map[string]bool{}
	out := make([]store.ImportedMessage, 0, len(req.Messages))
	for i, raw := range req.Messages {
		field := fmt.Sprintf("messages[%d].", i)
		var m importMessage
		if err := decodeStrict(raw, &m, field); err != nil {
			return nil, err
		}
		if m.SourceID == nil || strings.TrimSpace(*m.SourceID) == "" {
			return nil, InvalidRequest(field+"source_id", "is required")
		}
		if seen[*m.SourceID] {
			return nil, InvalidRequest(field+"source_id", "%q is listed twice", *m.SourceID)
		}
		if m.Role == nil || (*m.Role != "user" && *m.Role != "assistant") {
			return nil, InvalidRequest(field+"role", "must be user or assistant")
		}
		if m.CreatedAt == nil {
			return nil, InvalidRequest(field+"created_at", "is required")
		}
		created, err := time.Parse(time.RFC3339Nano, *m.CreatedAt)
		if err != nil {
			return nil, InvalidRequest(field+"created_at", "must be an RFC 3339 time with a timezone")
		}
		switch {
		case *m.Role == "assistant" && m.Completion == nil:
			return nil, InvalidRequest(field+"completion", "is required on a reply (use unknown when the old system never recorded it)")
		case *m.Role == "user" && m.Completion != nil:
			return nil, InvalidRequest(field+"completion", "applies to replies only")
		case m.Completion != nil && !oneOf(*m.Completion, "completed", "failed", "cancelled", "unknown"):
			return nil, InvalidRequest(field+"completion", "must be completed, failed, cancelled or unknown")
		}
		if m.ParentSourceID != nil && !seen[*m.ParentSourceID] {
			return nil, InvalidRequest(field+"parent_source_id", "%q names no earlier message of this import", *m.ParentSourceID)
		}
		if err := checkBlocks(*m.Role, m.Blocks, field+"blocks"); err != nil {
			return nil, err
		}
		seen[*m.SourceID] = true
		var blocks bytes.Buffer
		encoded, _ := json.Marshal(m.Blocks)
		_ = json.Compact(&blocks, encoded)
		out = append(out, store.ImportedMessage{
			SourceID: *m.SourceID, Role: *m.Role, CreatedAt: created.UTC(), Completion: m.Completion,
			ParentSourceID: m.ParentSourceID, Blocks: blocks.Bytes(),
		})
	}
	return out, nil
}

// checkBlocks allows text and image blocks in a user message; a reply also carries
// thinking, tool_use, and the tool_result answering a call made earlier in it.
func checkBlocks(role string, raws []json.RawMessage, field string) error {
	if len(raws) == 0 {
		return InvalidRequest(field, "lists no block")
	}
	calls := map[string]bool{}
	for j, raw := range raws {
		f := fmt.Sprintf("%s[%d].", field, j)
		var b importBlock
		if err := decodeStrict(raw, &b, f); err != nil {
			return err
		}
		allowed := map[string][]string{"user": {"text", "image"}, "assistant": {"text", "thinking", "tool_use", "tool_result"}}[role]
		if !oneOf(b.Type, allowed...) {
			return InvalidRequest(f+"type", "%q is not a %s block (allowed: %s)", b.Type, role, strings.Join(allowed, ", "))
		}
		var problem string
		switch b.Type {
		case "text":
			if b.Text == nil {
				problem = "text"
			}
		case "thinking":
			if b.Thinking == nil {
				problem = "thinking"
			}
		case "image":
			if (b.URL == nil) == (b.Data == nil) || (b.Data != nil && b.MediaType == nil) {
				return InvalidRequest(f+"url", "an image needs a url, or data with its media_type")
			}
		case "tool_use":
			switch {
			case b.ID == nil || *b.ID == "":
				problem = "id"
			case b.Name == nil || *b.Name == "":
				problem = "name"
			}
			if problem == "" {
				calls[*b.ID] = true
			}
		case "tool_result":
			if b.ToolUseID == nil || !calls[*b.ToolUseID] {
				return InvalidRequest(f+"tool_use_id", "must answer a tool_use made earlier in the same reply")
			}
		}
		if problem != "" {
			return InvalidRequest(f+problem, "is required for a %s block", b.Type)
		}
	}
	return nil
}

func oneOf(v string, options ...string) bool {
	for _, o := range options {
		if v == o {
			return true
		}
	}
	return false
}

// importedUIMessage shows an imported message like any other, with history_import
// naming its source_id, completion and parent_source_id.
func importedUIMessage(m store.ImportedMessage) uiMessage {
	msg := uiMessage{ID: "import:" + m.SourceID, Role: m.Role, Parts: []map[string]any{}, Metadata: map[string]any{
		"created_at":     m.CreatedAt.UTC(),
		"history_import": map[string]any{"source_id": m.SourceID, "completion": m.Completion, "parent_source_id": m.ParentSourceID},
	}}
	var blocks []importBlock
	_ = json.Unmarshal(m.Blocks, &blocks)
	tools := map[string]map[string]any{}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			msg.Parts = append(msg.Parts, map[string]any{"type": "text", "text": deref(b.Text), "state": "done"})
		case "thinking":
			msg.Parts = append(msg.Parts, map[string]any{"type": "reasoning", "text": deref(b.Thinking), "state": "done"})
		case "image":
			url := deref(b.URL)
			if b.Data != nil {
				url = "data:" + deref(b.MediaType) + ";base64," + *b.Data
			}
			msg.Parts = append(msg.Parts, map[string]any{"type": "file", "mediaType": deref(b.MediaType), "url": url})
		case "tool_use":
			p := map[string]any{"type": "dynamic-tool", "toolName": deref(b.Name), "toolCallId": deref(b.ID), "state": "input-available", "input": nullJSON(b.Input, "null")}
			tools[deref(b.ID)] = p
			msg.Parts = append(msg.Parts, p)
		case "tool_result":
			if p := tools[deref(b.ToolUseID)]; p != nil {
				if b.IsError != nil && *b.IsError {
					p["state"], p["errorText"] = "output-error", string(nullJSON(b.Content, `""`))
				} else {
					p["state"], p["output"] = "output-available", nullJSON(b.Content, "null")
				}
			}
		}
	}
	return msg
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
