package devmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The Gemini API's methods on a model, the part of its path after the colon
// (POST /v1beta/models/<model>:<method>).
const (
	geminiStream      = "streamGenerateContent"
	geminiGenerate    = "generateContent"
	geminiCountTokens = "countTokens"
)

// geminiFormat is the Gemini API (generateContent, and streamGenerateContent with
// alt=sse) as Gemini CLI calls it: candidates whose content parts are text,
// thoughts (text with thought:true) and whole function calls, the last chunk
// carrying the finish reason and the usage metadata. The model and whether the
// reply streams are in the path, not the body.
type geminiFormat struct {
	model  string
	stream bool
}

var _ wireFormat = geminiFormat{}

func (geminiFormat) api() string { return APIGeminiGenerateContent }

// authorized accepts the key in the x-goog-api-key header, as the Gemini SDK sends
// it, or in the key query parameter.
func (geminiFormat) authorized(r *http.Request) bool {
	return r.Header.Get("x-goog-api-key") != "" || r.URL.Query().Get("key") != ""
}

// geminiContent is one message of a Gemini request's contents.
type geminiContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text         string `json:"text"`
		Thought      bool   `json:"thought"`
		FunctionCall *struct {
			Name string `json:"name"`
		} `json:"functionCall"`
		FunctionResponse *struct {
			Name     string          `json:"name"`
			Response json.RawMessage `json:"response"`
		} `json:"functionResponse"`
	} `json:"parts"`
}

// geminiRequest is the part of a generateContent request the scripts look at.
type geminiRequest struct {
	Contents []geminiContent `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

func (f geminiFormat) parse(body []byte) (*conversation, error) {
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("parse generateContent request: %w", err)
	}
	if len(req.Contents) == 0 {
		return nil, fmt.Errorf("contents is not specified")
	}
	conv := &conversation{model: f.model, stream: f.stream}
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			conv.tools = append(conv.tools, d.Name)
		}
	}
	if gc := req.GenerationConfig; gc.ResponseMimeType == "application/json" {
		schema := gc.ResponseJSONSchema
		if len(schema) == 0 {
			schema = gc.ResponseSchema
		}
		conv.jsonReply = schemaExample(schema)
	}
	for _, c := range req.Contents {
		var said []string
		for _, part := range c.Parts {
			switch {
			case part.FunctionResponse != nil:
				conv.addToolResult(geminiResult(part.FunctionResponse.Response))
			case part.FunctionCall != nil:
				said = append(said, "[tool_call "+part.FunctionCall.Name+"]")
			case part.Thought:
			case c.Role == "model":
				said = append(said, part.Text)
			case part.Text != "":
				conv.addPrompt(part.Text)
			}
		}
		if c.Role == "model" {
			conv.addAssistant(strings.Join(said, " "))
		}
	}
	return conv, nil
}

// geminiResult is a function response as text: Gemini CLI puts a tool's output
// in response.output (its error in response.error), wrapped in an
// <untrusted_context> element, which is taken off; anything else is kept as JSON.
func geminiResult(raw json.RawMessage) string {
	var r struct {
		Output *string `json:"output"`
		Error  *string `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err == nil {
		for _, s := range []*string{r.Output, r.Error} {
			if s == nil {
				continue
			}
			text := strings.TrimSpace(*s)
			if inner, ok := strings.CutPrefix(text, "<untrusted_context>"); ok {
				text = strings.TrimSpace(strings.TrimSuffix(inner, "</untrusted_context>"))
			}
			return text
		}
	}
	return string(raw)
}

// schemaExample is the smallest value a JSON schema accepts, as JSON text: an
// enum's first value, empty strings, zeros, false, empty arrays, objects with
// every property. Gemini CLI asks for JSON when it wants a decision (who speaks
// next), and the first enum value is the conservative one ("user").
func schemaExample(schema json.RawMessage) string {
	var s map[string]any
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return "{}"
	}
	b, err := json.Marshal(exampleOf(s))
	if err != nil {
		return "{}"
	}
	return string(b)
}

func exampleOf(s map[string]any) any {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := s["type"].(string)
	switch strings.ToLower(typ) {
	case "string":
		return ""
	case "number", "integer":
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	}
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		if ps, ok := p.(map[string]any); ok {
			out[name] = exampleOf(ps)
		}
	}
	return out
}

func (geminiFormat) writeError(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	setRetryAfter(w, retryAfter)
	writeJSON(w, status, map[string]any{"error": geminiErrorBody(status, message)})
}

// geminiErrorBody is the Google API error object: the HTTP status as code and
// its canonical name as status.
func geminiErrorBody(status int, message string) map[string]any {
	name := "INTERNAL"
	switch {
	case status == http.StatusUnauthorized:
		name = "UNAUTHENTICATED"
	case status == http.StatusForbidden:
		name = "PERMISSION_DENIED"
	case status == http.StatusNotFound:
		name = "NOT_FOUND"
	case status == http.StatusTooManyRequests:
		name = "RESOURCE_EXHAUSTED"
	case status == http.StatusServiceUnavailable:
		name = "UNAVAILABLE"
	case status < 500:
		name = "INVALID_ARGUMENT"
	}
	return map[string]any{"code": status, "message": message, "status": name}
}

// geminiParts turns a reply's blocks into content parts, one per text or thought
// chunk (for a stream) or one per block, and one per function call.
func geminiParts(p plan, perChunk bool) [][]map[string]any {
	var events [][]map[string]any
	var whole []map[string]any
	for _, b := range p.blocks {
		var parts []map[string]any
		switch b.kind {
		case blockText, blockThinking:
			pieces := []string{b.text()}
			if perChunk {
				pieces = b.chunks
			}
			for _, c := range pieces {
				part := map[string]any{"text": c}
				if b.kind == blockThinking {
					part["thought"] = true
				}
				parts = append(parts, part)
			}
		case blockToolCall:
			var args map[string]any
			if err := json.Unmarshal([]byte(b.call.arguments), &args); err != nil {
				args = map[string]any{"input": b.call.arguments}
			}
			parts = append(parts, map[string]any{"functionCall": map[string]any{"name": b.call.name, "args": args}})
		}
		if !perChunk {
			whole = append(whole, parts...)
			continue
		}
		for _, part := range parts {
			events = append(events, []map[string]any{part})
		}
	}
	if !perChunk {
		events = [][]map[string]any{whole}
	}
	return events
}

func (f geminiFormat) writeReply(ctx context.Context, w http.ResponseWriter, conv *conversation, p plan, inputTokens int) error {
	out := outputTokens(p)
	thoughts := 0
	for _, b := range p.blocks {
		if b.kind == blockThinking {
			thoughts += len(b.chunks)
		}
	}
	usage := map[string]any{"promptTokenCount": inputTokens, "candidatesTokenCount": out - thoughts,
		"thoughtsTokenCount": thoughts, "totalTokenCount": inputTokens + out}
	responseID := newID("")
	response := func(parts []map[string]any, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		r := map[string]any{"candidates": []any{cand}, "modelVersion": conv.model, "responseId": responseID}
		if last {
			// Function calls end with STOP too: the caller sees the calls in the parts.
			cand["finishReason"] = "STOP"
			r["usageMetadata"] = usage
		}
		return r
	}
	if !conv.stream {
		writeJSON(w, http.StatusOK, response(geminiParts(p, false)[0], true))
		return nil
	}
	s := startSSE(ctx, w)
	events := geminiParts(p, true)
	for i, parts := range events {
		if err := s.pause(p.delay); err != nil {
			return err
		}
		last := i == len(events)-1 && p.streamErr == nil
		if err := s.event("", response(parts, last)); err != nil {
			return err
		}
	}
	if e := p.streamErr; e != nil {
		if e.drop {
			return errDropConnection
		}
		// A failure mid-stream is a data line holding the Google API error.
		return s.event("", map[string]any{"error": geminiErrorBody(e.status, e.message)})
	}
	return nil
}

// serveGemini routes POST /v1beta/models/<model>:<method>: the method is part of
// the last path segment, which a mux pattern cannot split.
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request) {
	model, method, ok := strings.Cut(r.PathValue("call"), ":")
	switch {
	case ok && method == geminiStream:
		s.serveModel(w, r, geminiFormat{model: model, stream: true})
	case ok && method == geminiGenerate:
		s.serveModel(w, r, geminiFormat{model: model})
	case ok && method == geminiCountTokens:
		s.serveGeminiCountTokens(w, r, model)
	default:
		s.serveOther(w, r)
	}
}

// serveGeminiCountTokens answers the Gemini API's token counting with an estimate.
func (s *Server) serveGeminiCountTokens(w http.ResponseWriter, r *http.Request, model string) {
	start := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	rec := Request{Received: start, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Model: model,
		API: APIGeminiCountTokens, Header: redactedHeader(r.Header), Body: json.RawMessage(body)}
	f := geminiFormat{model: model}
	switch {
	case err != nil:
		rec.Status, rec.Outcome = http.StatusBadRequest, OutcomeFailed
		f.writeError(w, http.StatusBadRequest, fmt.Sprintf("read body: %v", err), 0)
	case !f.authorized(r):
		rec.Status, rec.Outcome = http.StatusUnauthorized, OutcomeFailed
		f.writeError(w, http.StatusUnauthorized, "API key not valid. Please pass a valid API key.", 0)
	case !json.Valid(body):
		rec.Status, rec.Outcome = http.StatusBadRequest, OutcomeFailed
		f.writeError(w, http.StatusBadRequest, "invalid JSON payload", 0)
	default:
		rec.Status, rec.Outcome = http.StatusOK, OutcomeCompleted
		writeJSON(w, http.StatusOK, map[string]int{"totalTokens": estimateTokens(body)})
	}
	s.finish(rec, start)
}
