package devmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// responsesFormat is the OpenAI Responses API (POST /v1/responses) as Codex
// calls it: streaming output items (message, reasoning, function_call,
// custom_tool_call) and a final response.completed with usage.
type responsesFormat struct{}

var _ wireFormat = responsesFormat{}

func (responsesFormat) api() string { return APIOpenAIResponses }

func (responsesFormat) authorized(r *http.Request) bool { return bearer(r) != "" }

// responsesTool is one offered tool; a namespace tool nests more tools.
type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

// clientToolSearch names the Responses API's client-executed tool search, offered as
// {"type":"tool_search"} without a name: Codex defers MCP tools behind it.
const clientToolSearch = "tool_search"

func (responsesFormat) parse(body []byte) (*conversation, error) {
	var req struct {
		Model  string          `json:"model"`
		Stream bool            `json:"stream"`
		Input  json.RawMessage `json:"input"`
		Tools  []responsesTool `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("parse responses request: %w", err)
	}
	if req.Model == "" {
		return nil, fmt.Errorf("missing required parameter: 'model'")
	}
	conv := &conversation{model: req.Model, stream: req.Stream, customTools: map[string]bool{}, namespaced: map[string]namespacedTool{}}
	addResponsesTools(conv, req.Tools, "")
	var text string
	if err := json.Unmarshal(req.Input, &text); err == nil {
		conv.addPrompt(text)
		return conv, nil
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Name    string          `json:"name"`
		Output  json.RawMessage `json:"output"`
		Tools   []responsesTool `json:"tools"`
	}
	if len(req.Input) > 0 {
		if err := json.Unmarshal(req.Input, &items); err != nil {
			return nil, fmt.Errorf("input is neither a string nor a list of items: %w", err)
		}
	}
	for _, it := range items {
		switch {
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output" || it.Type == "local_shell_call_output":
			conv.addToolResult(openAIText(it.Output))
		case it.Type == "function_call" || it.Type == "custom_tool_call":
			conv.addAssistant("[tool_call " + it.Name + "]")
		case it.Type == "tool_search_call":
			conv.addAssistant("[tool_call " + clientToolSearch + "]")
		case it.Type == "tool_search_output":
			// The tools the search loaded are offered from now on.
			addResponsesTools(conv, it.Tools, "")
			conv.addToolResult("")
		case it.Type == "message" || it.Type == "":
			switch it.Role {
			case "user":
				conv.addPrompt(openAIText(it.Content))
			case "assistant":
				conv.addAssistant(openAIText(it.Content))
			}
		}
	}
	return conv, nil
}

func addResponsesTools(conv *conversation, tools []responsesTool, namespace string) {
	for _, t := range tools {
		switch t.Type {
		case "namespace":
			addResponsesTools(conv, t.Tools, t.Name)
		case "custom":
			conv.tools = append(conv.tools, t.Name)
			conv.customTools[t.Name] = true
		case "local_shell":
			conv.tools = append(conv.tools, "local_shell")
		case clientToolSearch:
			conv.tools = append(conv.tools, clientToolSearch)
		default:
			switch {
			case t.Name == "":
			case namespace != "":
				listed := strings.TrimSuffix(namespace, "__") + "__" + t.Name
				conv.tools = append(conv.tools, listed)
				conv.namespaced[listed] = namespacedTool{namespace: namespace, name: t.Name}
			default:
				conv.tools = append(conv.tools, t.Name)
			}
		}
	}
}

// openAIText flattens OpenAI content: a string, or parts with a text field
// (input_text, output_text, text).
func openAIText(raw json.RawMessage) string {
	return strings.Join(openAITexts(raw), "\n")
}

// openAITexts is a message content's texts: the string, or each text part of an
// array (programs put their reminders in a part before the person's text).
func openAITexts(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		texts = append(texts, p.Text)
	}
	return texts
}

// openAIErrorBody is the error object both OpenAI APIs use.
func openAIErrorBody(status int, message string) map[string]any {
	errType, code := "server_error", any(nil)
	switch {
	case status == 401:
		errType, code = "invalid_request_error", "invalid_api_key"
	case status == 429:
		errType, code = "requests", "rate_limit_exceeded"
	case status < 500:
		errType = "invalid_request_error"
	}
	return map[string]any{"message": message, "type": errType, "param": nil, "code": code}
}

// openAIErrorType names a status the way response.failed reports it.
func openAIErrorType(status int) string {
	if status == 429 {
		return "rate_limit_exceeded"
	}
	if status < 500 {
		return "invalid_request_error"
	}
	return "server_error"
}

func openAIError(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	setRetryAfter(w, retryAfter)
	w.Header().Set("x-request-id", newID("req_"))
	writeJSON(w, status, map[string]any{"error": openAIErrorBody(status, message)})
}

func (responsesFormat) writeError(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	openAIError(w, status, message, retryAfter)
}

// responsesItem is one output item with the events that stream it.
type responsesItem struct {
	done   map[string]any
	added  map[string]any
	events []responsesEvent
}

type responsesEvent struct {
	name   string
	fields map[string]any
	// paced events wait for the plan's delay before they are sent.
	paced bool
}

// responsesItems renders p's blocks as output items and their streaming events.
func responsesItems(p plan) []responsesItem {
	items := make([]responsesItem, 0, len(p.blocks))
	for _, b := range p.blocks {
		var it responsesItem
		switch b.kind {
		case blockText:
			id := newID("msg_")
			text := b.text()
			part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
			it.added = map[string]any{"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []any{}}
			it.done = map[string]any{"type": "message", "id": id, "status": "completed", "role": "assistant", "content": []any{part}}
			it.events = append(it.events, responsesEvent{name: "response.content_part.added", fields: map[string]any{"item_id": id, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}}})
			for _, c := range b.chunks {
				it.events = append(it.events, responsesEvent{name: "response.output_text.delta", paced: true,
					fields: map[string]any{"item_id": id, "content_index": 0, "delta": c, "logprobs": []any{}}})
			}
			it.events = append(it.events,
				responsesEvent{name: "response.output_text.done", fields: map[string]any{"item_id": id, "content_index": 0, "text": text, "logprobs": []any{}}},
				responsesEvent{name: "response.content_part.done", fields: map[string]any{"item_id": id, "content_index": 0, "part": part}})
		case blockThinking:
			id := newID("rs_")
			text := b.text()
			summary := map[string]any{"type": "summary_text", "text": text}
			it.added = map[string]any{"type": "reasoning", "id": id, "summary": []any{}}
			it.done = map[string]any{"type": "reasoning", "id": id, "summary": []any{summary}, "encrypted_content": thinkingSignature(text)}
			it.events = append(it.events, responsesEvent{name: "response.reasoning_summary_part.added", fields: map[string]any{"item_id": id, "summary_index": 0,
				"part": map[string]any{"type": "summary_text", "text": ""}}})
			for _, c := range b.chunks {
				it.events = append(it.events, responsesEvent{name: "response.reasoning_summary_text.delta", paced: true,
					fields: map[string]any{"item_id": id, "summary_index": 0, "delta": c}})
			}
			it.events = append(it.events,
				responsesEvent{name: "response.reasoning_summary_text.done", fields: map[string]any{"item_id": id, "summary_index": 0, "text": text}},
				responsesEvent{name: "response.reasoning_summary_part.done", fields: map[string]any{"item_id": id, "summary_index": 0, "part": summary}})
		case blockToolCall:
			it = responsesToolItem(b.call)
		}
		items = append(items, it)
	}
	return items
}

func responsesToolItem(call toolCall) responsesItem {
	var it responsesItem
	callID := newID("call_")
	if call.search {
		id := newID("tsc_")
		var args any
		_ = json.Unmarshal([]byte(call.arguments), &args)
		it.added = map[string]any{"type": "tool_search_call", "id": id, "status": "in_progress", "call_id": callID, "execution": "client", "arguments": args}
		it.done = map[string]any{"type": "tool_search_call", "id": id, "status": "completed", "call_id": callID, "execution": "client", "arguments": args}
		return it
	}
	if call.freeform {
		id := newID("ctc_")
		it.added = map[string]any{"type": "custom_tool_call", "id": id, "status": "in_progress", "call_id": callID, "name": call.name, "input": ""}
		it.done = map[string]any{"type": "custom_tool_call", "id": id, "status": "completed", "call_id": callID, "name": call.name, "input": call.arguments}
		for _, piece := range jsonPieces(call.arguments) {
			it.events = append(it.events, responsesEvent{name: "response.custom_tool_call_input.delta", paced: true, fields: map[string]any{"item_id": id, "delta": piece}})
		}
		it.events = append(it.events, responsesEvent{name: "response.custom_tool_call_input.done", fields: map[string]any{"item_id": id, "input": call.arguments}})
		return it
	}
	id := newID("fc_")
	it.added = map[string]any{"type": "function_call", "id": id, "status": "in_progress", "call_id": callID, "name": call.name, "arguments": ""}
	it.done = map[string]any{"type": "function_call", "id": id, "status": "completed", "call_id": callID, "name": call.name, "arguments": call.arguments}
	if call.namespace != "" {
		it.added["namespace"], it.done["namespace"] = call.namespace, call.namespace
	}
	for _, piece := range jsonPieces(call.arguments) {
		it.events = append(it.events, responsesEvent{name: "response.function_call_arguments.delta", paced: true, fields: map[string]any{"item_id": id, "delta": piece}})
	}
	it.events = append(it.events, responsesEvent{name: "response.function_call_arguments.done", fields: map[string]any{"item_id": id, "name": call.name, "arguments": call.arguments}})
	return it
}

// responseObject is the response resource at a given status.
func responseObject(id string, conv *conversation, status string, output []any, usage any) map[string]any {
	return map[string]any{
		"id": id, "object": "response", "created_at": time.Now().Unix(), "status": status, "model": conv.model,
		"output": output, "usage": usage, "error": nil, "incomplete_details": nil, "instructions": nil,
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "metadata": map[string]any{},
		"temperature": 1, "top_p": 1, "text": map[string]any{"format": map[string]any{"type": "text"}},
	}
}

func responsesUsage(input int, p plan) map[string]any {
	out := outputTokens(p)
	return map[string]any{
		"input_tokens": input, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": input + out,
	}
}

func (responsesFormat) writeReply(ctx context.Context, w http.ResponseWriter, conv *conversation, p plan, inputTokens int) error {
	respID := newID("resp_")
	items := responsesItems(p)
	output := make([]any, 0, len(items))
	for _, it := range items {
		output = append(output, it.done)
	}
	if !conv.stream {
		writeJSON(w, http.StatusOK, responseObject(respID, conv, "completed", output, responsesUsage(inputTokens, p)))
		return nil
	}
	s := startSSE(ctx, w)
	seq := 0
	send := func(name string, fields map[string]any) error {
		fields["type"] = name
		fields["sequence_number"] = seq
		seq++
		return s.event(name, fields)
	}
	if err := send("response.created", map[string]any{"response": responseObject(respID, conv, "in_progress", []any{}, nil)}); err != nil {
		return err
	}
	if err := send("response.in_progress", map[string]any{"response": responseObject(respID, conv, "in_progress", []any{}, nil)}); err != nil {
		return err
	}
	for i, it := range items {
		if err := send("response.output_item.added", map[string]any{"output_index": i, "item": it.added}); err != nil {
			return err
		}
		for _, ev := range it.events {
			if ev.paced {
				if err := s.pause(p.delay); err != nil {
					return err
				}
			}
			ev.fields["output_index"] = i
			if err := send(ev.name, ev.fields); err != nil {
				return err
			}
		}
		if err := send("response.output_item.done", map[string]any{"output_index": i, "item": it.done}); err != nil {
			return err
		}
	}
	if e := p.streamErr; e != nil {
		if e.drop {
			return errDropConnection
		}
		failed := responseObject(respID, conv, "failed", output, responsesUsage(inputTokens, p))
		failed["error"] = map[string]any{"code": openAIErrorType(e.status), "message": e.message}
		return send("response.failed", map[string]any{"response": failed})
	}
	return send("response.completed", map[string]any{"response": responseObject(respID, conv, "completed", output, responsesUsage(inputTokens, p))})
}
