package devmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// chatFormat is the OpenAI Chat Completions API (POST /v1/chat/completions) as
// Pi's openai-completions provider calls it: chunks with content,
// reasoning_content and tool_calls deltas, an optional usage chunk, then [DONE].
type chatFormat struct{}

var _ wireFormat = chatFormat{}

func (chatFormat) api() string { return APIOpenAIChat }

func (chatFormat) authorized(r *http.Request) bool { return bearer(r) != "" }

func (chatFormat) parse(body []byte) (*conversation, error) {
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("parse chat completions request: %w", err)
	}
	if req.Model == "" {
		return nil, fmt.Errorf("missing required parameter: 'model'")
	}
	conv := &conversation{model: req.Model, stream: req.Stream, chatUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	for _, t := range req.Tools {
		conv.tools = append(conv.tools, t.Function.Name)
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			// Part by part: a reminder part (Qwen Code's list of skills) is dropped
			// without the person's text beside it.
			for _, text := range openAITexts(m.Content) {
				conv.addPrompt(text)
			}
		case "tool":
			conv.addToolResult(openAIText(m.Content))
		case "assistant":
			said := openAIText(m.Content)
			for _, c := range m.ToolCalls {
				said += " [tool_call " + c.Function.Name + "]"
			}
			conv.addAssistant(said)
		}
	}
	return conv, nil
}

func (chatFormat) writeError(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	openAIError(w, status, message, retryAfter)
}

func chatFinishReason(p plan) string {
	if p.toolUse {
		return "tool_calls"
	}
	return "stop"
}

func (chatFormat) writeReply(ctx context.Context, w http.ResponseWriter, conv *conversation, p plan, inputTokens int) error {
	id := newID("chatcmpl-")
	created := time.Now().Unix()
	usage := map[string]any{"prompt_tokens": inputTokens, "completion_tokens": outputTokens(p), "total_tokens": inputTokens + outputTokens(p)}
	callIDs := make([]string, len(p.blocks))
	for i := range p.blocks {
		callIDs[i] = newID("call_")
	}
	if !conv.stream {
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		var text, reasoning string
		var calls []any
		for i, b := range p.blocks {
			switch b.kind {
			case blockText:
				text += b.text()
			case blockThinking:
				reasoning += b.text()
			case blockToolCall:
				calls = append(calls, map[string]any{"id": callIDs[i], "type": "function",
					"function": map[string]any{"name": b.call.name, "arguments": b.call.arguments}})
			}
		}
		if text != "" {
			msg["content"] = text
		}
		if reasoning != "" {
			msg["reasoning_content"] = reasoning
		}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": conv.model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": chatFinishReason(p), "logprobs": nil}},
			"usage":   usage,
		})
		return nil
	}
	s := startSSE(ctx, w)
	chunk := func(delta map[string]any, finish any) error {
		return s.event("", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": conv.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		})
	}
	if err := chunk(map[string]any{"role": "assistant", "content": ""}, nil); err != nil {
		return err
	}
	toolIndex := 0
	for i, b := range p.blocks {
		var deltas []map[string]any
		switch b.kind {
		case blockText:
			for _, c := range b.chunks {
				deltas = append(deltas, map[string]any{"content": c})
			}
		case blockThinking:
			for _, c := range b.chunks {
				deltas = append(deltas, map[string]any{"reasoning_content": c})
			}
		case blockToolCall:
			deltas = append(deltas, map[string]any{"tool_calls": []any{map[string]any{"index": toolIndex, "id": callIDs[i], "type": "function",
				"function": map[string]any{"name": b.call.name, "arguments": ""}}}})
			for _, piece := range jsonPieces(b.call.arguments) {
				deltas = append(deltas, map[string]any{"tool_calls": []any{map[string]any{"index": toolIndex, "function": map[string]any{"arguments": piece}}}})
			}
			toolIndex++
		}
		for _, d := range deltas {
			if err := s.pause(p.delay); err != nil {
				return err
			}
			if err := chunk(d, nil); err != nil {
				return err
			}
		}
	}
	if e := p.streamErr; e != nil {
		if e.drop {
			return errDropConnection
		}
		// OpenAI-compatible servers report a failure mid-stream as a data line
		// with an error object and no [DONE].
		return s.event("", map[string]any{"error": openAIErrorBody(e.status, e.message)})
	}
	if err := chunk(map[string]any{}, chatFinishReason(p)); err != nil {
		return err
	}
	if conv.chatUsage {
		if err := s.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": conv.model,
			"choices": []any{}, "usage": usage}); err != nil {
			return err
		}
	}
	return s.raw("", "[DONE]")
}
