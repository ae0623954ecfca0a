package devmodel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// anthropicFormat is the Anthropic Messages API (POST /v1/messages), streaming
// and not, as Claude Code and Pi's anthropic-messages provider call it.
type anthropicFormat struct{}

var _ wireFormat = anthropicFormat{}

func (anthropicFormat) api() string { return APIAnthropicMessages }

func (anthropicFormat) authorized(r *http.Request) bool {
	return strings.TrimSpace(r.Header.Get("X-Api-Key")) != "" || bearer(r) != ""
}

// anthropicRequest holds the fields of a Messages request the scripts need.
type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// anthropicBlock is one content block of a message in a request.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Name      string          `json:"name"`
	Thinking  string          `json:"thinking"`
	Content   json.RawMessage `json:"content"`
	ToolUseID string          `json:"tool_use_id"`
}

func (anthropicFormat) parse(body []byte) (*conversation, error) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("parse messages request: %w", err)
	}
	if req.Model == "" {
		return nil, fmt.Errorf("model: field required")
	}
	conv := &conversation{model: req.Model, stream: req.Stream}
	for _, t := range req.Tools {
		conv.tools = append(conv.tools, t.Name)
	}
	for i, m := range req.Messages {
		blocks, err := anthropicBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages.%d.content: %w", i, err)
		}
		switch m.Role {
		case "user":
			// Text beside a tool result belongs to that result (Claude Code's tool
			// search answers with tool references and a "Tool loaded." text block),
			// not to a new prompt that would end the scripted turn.
			results := slices.ContainsFunc(blocks, func(b anthropicBlock) bool { return b.Type == "tool_result" })
			for _, b := range blocks {
				switch {
				case b.Type == "text" && results:
					conv.appendToolResult(b.Text)
				case b.Type == "text":
					conv.addPrompt(b.Text)
				case b.Type == "tool_result":
					conv.addToolResult(anthropicResultText(b.Content))
				}
			}
		case "assistant":
			var said []string
			for _, b := range blocks {
				switch b.Type {
				case "text":
					said = append(said, b.Text)
				case "tool_use":
					said = append(said, "[tool_use "+b.Name+"]")
				}
			}
			conv.addAssistant(strings.Join(said, " "))
		default:
			// Claude Code also sends role "system" messages (notes on a message
			// sent while working); they are context, not the person's prompt.
		}
	}
	return conv, nil
}

// anthropicBlocks reads message content, which is either a string or a list of blocks.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return []anthropicBlock{{Type: "text", Text: text}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("content is neither a string nor a list of blocks: %w", err)
	}
	return blocks, nil
}

// anthropicResultText flattens a tool_result's content (a string or text blocks).
func anthropicResultText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	blocks, err := anthropicBlocks(raw)
	if err != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// anthropicErrorType maps an HTTP status to the error type the API reports.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

func (anthropicFormat) writeError(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	setRetryAfter(w, retryAfter)
	w.Header().Set("request-id", newID("req_"))
	writeJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]string{"type": anthropicErrorType(status), "message": message},
	})
}

// anthropicUsage is the usage object of message_start and non-streaming replies.
func anthropicUsage(input, output int) map[string]any {
	return map[string]any{
		"input_tokens": input, "output_tokens": output,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		"service_tier": "standard",
	}
}

// thinkingSignature is an opaque stand-in for the signature the real API puts on
// thinking blocks; programs store it and send it back unchanged.
func thinkingSignature(thought string) string {
	return base64.StdEncoding.EncodeToString([]byte("devmodel:" + firstLine(thought)))
}

// anthropicContent renders the blocks of p as the message content of a reply,
// giving each tool call its id.
func anthropicContent(p plan) []map[string]any {
	content := make([]map[string]any, 0, len(p.blocks))
	for _, b := range p.blocks {
		switch b.kind {
		case blockText:
			content = append(content, map[string]any{"type": "text", "text": b.text()})
		case blockThinking:
			content = append(content, map[string]any{"type": "thinking", "thinking": b.text(), "signature": thinkingSignature(b.text())})
		case blockToolCall:
			content = append(content, map[string]any{"type": "tool_use", "id": newID("toolu_"), "name": b.call.name, "input": json.RawMessage(b.call.arguments)})
		}
	}
	return content
}

func anthropicStopReason(p plan) string {
	if p.toolUse {
		return "tool_use"
	}
	return "end_turn"
}

func outputTokens(p plan) int {
	n := 0
	for _, b := range p.blocks {
		n += len(b.chunks) + len(b.call.arguments)/4
	}
	return max(n, 1)
}

func (anthropicFormat) writeReply(ctx context.Context, w http.ResponseWriter, conv *conversation, p plan, inputTokens int) error {
	msgID := newID("msg_")
	content := anthropicContent(p)
	if !conv.stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": conv.model, "content": content,
			"stop_reason": anthropicStopReason(p), "stop_sequence": nil, "usage": anthropicUsage(inputTokens, outputTokens(p)),
		})
		return nil
	}
	s := startSSE(ctx, w)
	if err := s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": conv.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(inputTokens, 1),
	}}); err != nil {
		return err
	}
	for i, b := range p.blocks {
		// A stream error cuts the last block off before its stop, as an
		// overloaded service does mid-reply.
		stop := p.streamErr == nil || i < len(p.blocks)-1
		if err := writeAnthropicBlock(s, i, b, content[i], p.delay, stop); err != nil {
			return err
		}
		if i == 0 {
			if err := s.event("ping", map[string]string{"type": "ping"}); err != nil {
				return err
			}
		}
	}
	if e := p.streamErr; e != nil {
		if e.drop {
			return errDropConnection
		}
		return s.event("error", map[string]any{"type": "error", "error": map[string]string{"type": anthropicErrorType(e.status), "message": e.message}})
	}
	if err := s.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStopReason(p), "stop_sequence": nil},
		"usage": map[string]any{"input_tokens": inputTokens, "output_tokens": outputTokens(p),
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}); err != nil {
		return err
	}
	return s.event("message_stop", map[string]string{"type": "message_stop"})
}

// writeAnthropicBlock streams one content block: start, deltas paced by delay, stop.
func writeAnthropicBlock(s *sseWriter, index int, b block, rendered map[string]any, delay time.Duration, stop bool) error {
	var start map[string]any
	var deltas []map[string]any
	switch b.kind {
	case blockText:
		start = map[string]any{"type": "text", "text": ""}
		for _, c := range b.chunks {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": c})
		}
	case blockThinking:
		start = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
		for _, c := range b.chunks {
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": c})
		}
		deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": rendered["signature"]})
	case blockToolCall:
		start = map[string]any{"type": "tool_use", "id": rendered["id"], "name": b.call.name, "input": map[string]any{}}
		for _, piece := range jsonPieces(b.call.arguments) {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": piece})
		}
	}
	if err := s.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": start}); err != nil {
		return err
	}
	for _, d := range deltas {
		if err := s.pause(delay); err != nil {
			return err
		}
		if err := s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d}); err != nil {
			return err
		}
	}
	if !stop {
		return nil
	}
	return s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
}
