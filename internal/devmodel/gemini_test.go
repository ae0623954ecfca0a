package devmodel_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/devmodel"
)

// geminiPart is one content part of a Gemini API reply.
type geminiPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	} `json:"functionCall"`
}

// geminiReply is a generateContent reply, or one chunk of a streamed one.
type geminiReply struct {
	Candidates []struct {
		Content struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int `json:"thoughtsTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// shellTool is Gemini CLI's shell tool as it declares it.
var shellTool = []any{map[string]any{"functionDeclarations": []any{map[string]any{
	"name": "run_shell_command", "description": "Runs a shell command",
	"parametersJsonSchema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}},
}}}}

// postGemini sends a Gemini API request the way the Gemini SDK does (the key in
// x-goog-api-key) and returns the response.
func postGemini(t *testing.T, srv *devmodel.Server, method string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	url := srv.URL() + "/v1beta/models/gemini-2.5-flash:" + method
	if method == "streamGenerateContent" {
		url += "?alt=sse"
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-goog-api-key", "astrabox-placeholder-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// streamGemini streams one request and returns its chunks in order.
func streamGemini(t *testing.T, srv *devmodel.Server, body any) []geminiReply {
	t.Helper()
	resp := postGemini(t, srv, "streamGenerateContent", body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	var chunks []geminiReply
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var r geminiReply
		require.NoError(t, json.Unmarshal([]byte(data), &r), data)
		chunks = append(chunks, r)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, chunks)
	return chunks
}

// userText is a Gemini content of role user with one text part.
func userText(text string) map[string]any {
	return map[string]any{"role": "user", "parts": []any{map[string]any{"text": text}}}
}

func TestGeminiStreamsThoughtsTextAndUsage(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	chunks := streamGemini(t, srv, map[string]any{
		"contents": []any{userText(`[[script:think thought="Consider it." text="All clear."]]`)},
		"tools":    shellTool,
	})
	var thought, text strings.Builder
	for i, c := range chunks {
		require.Len(t, c.Candidates, 1)
		require.Equal(t, "model", c.Candidates[0].Content.Role)
		last := i == len(chunks)-1
		require.Equal(t, last, c.Candidates[0].FinishReason == "STOP", "only the last chunk finishes")
		require.Equal(t, last, c.UsageMetadata != nil, "only the last chunk carries usage")
		for _, p := range c.Candidates[0].Content.Parts {
			if p.Thought {
				thought.WriteString(p.Text)
			} else {
				text.WriteString(p.Text)
			}
		}
	}
	require.Equal(t, "Consider it.", thought.String())
	require.Equal(t, "All clear.", text.String())
	u := chunks[len(chunks)-1].UsageMetadata
	require.Positive(t, u.PromptTokenCount)
	require.Positive(t, u.ThoughtsTokenCount)
	require.Equal(t, u.PromptTokenCount+u.CandidatesTokenCount+u.ThoughtsTokenCount, u.TotalTokenCount)

	rec := settled(t, srv, 1)
	require.Equal(t, devmodel.APIGeminiGenerateContent, rec.API)
	require.Equal(t, "gemini-2.5-flash", rec.Model)
	require.True(t, rec.Stream)
	require.Equal(t, []string{"run_shell_command"}, rec.Tools)
	require.Equal(t, "[redacted]", rec.Header.Get("x-goog-api-key"), "the key is not logged")
}

func TestGeminiFunctionCallThenFinalText(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	contents := []any{
		// Gemini CLI's session context comes first, answered by the model.
		userText("<session_context>\nThis is the Gemini CLI.\n</session_context>"),
		map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Got it."}}},
		userText(`[[script:bash cmd="echo one" cmd="echo two"]]`),
	}
	for step, want := range []string{"echo one", "echo two"} {
		chunks := streamGemini(t, srv, map[string]any{"contents": contents, "tools": shellTool})
		last := chunks[len(chunks)-1]
		require.Equal(t, "STOP", last.Candidates[0].FinishReason)
		var call *geminiPart
		for _, c := range chunks {
			for _, p := range c.Candidates[0].Content.Parts {
				if p.FunctionCall != nil {
					call = &p
				}
			}
		}
		require.NotNil(t, call, "step %d", step)
		require.Equal(t, "run_shell_command", call.FunctionCall.Name)
		require.Equal(t, want, call.FunctionCall.Args["command"])
		require.Equal(t, false, call.FunctionCall.Args["is_background"])
		contents = append(contents,
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": call.FunctionCall.Args}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{
				"id": "run_shell_command_1_0", "name": "run_shell_command", "response": map[string]any{"output": "<untrusted_context>\nCommand: " + want + "\noutput of " + want + "\n</untrusted_context>"}}}}})
	}
	chunks := streamGemini(t, srv, map[string]any{"contents": contents, "tools": shellTool})
	var text strings.Builder
	for _, c := range chunks {
		for _, p := range c.Candidates[0].Content.Parts {
			text.WriteString(p.Text)
		}
	}
	require.Equal(t, "Tool finished: output of echo two", text.String())
}

func TestGeminiGenerateContentAndJSONSchema(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp := postGemini(t, srv, "generateContent", map[string]any{"contents": []any{userText("plain please")}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var r geminiReply
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	require.Equal(t, "STOP", r.Candidates[0].FinishReason)
	require.Len(t, r.Candidates[0].Content.Parts, 1, "one part per block")
	require.Equal(t, "Scripted reply to: plain please", r.Candidates[0].Content.Parts[0].Text)
	require.NotNil(t, r.UsageMetadata)

	// Gemini CLI's next-speaker check asks for JSON of a schema.
	resp = postGemini(t, srv, "generateContent", map[string]any{
		"contents": []any{userText("Who should speak next?")},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": map[string]any{
			"type": "object", "properties": map[string]any{
				"reasoning":    map[string]any{"type": "string"},
				"next_speaker": map[string]any{"type": "string", "enum": []any{"user", "model"}},
			}}},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r = geminiReply{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	require.JSONEq(t, `{"reasoning":"","next_speaker":"user"}`, r.Candidates[0].Content.Parts[0].Text)
	require.Equal(t, devmodel.ScriptJSON, settled(t, srv, 2).Script)
}

func TestGeminiCountTokensAndErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp := postGemini(t, srv, "countTokens", map[string]any{"contents": []any{userText("count me")}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var count struct {
		TotalTokens int `json:"totalTokens"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&count))
	require.Positive(t, count.TotalTokens)
	require.Equal(t, devmodel.APIGeminiCountTokens, settled(t, srv, 1).API)

	resp = postGemini(t, srv, "generateContent", map[string]any{"contents": []any{userText(`[[script:error status=400 message="bad request"]]`)}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	var r geminiReply
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	require.Equal(t, 400, r.Error.Code)
	require.Equal(t, "INVALID_ARGUMENT", r.Error.Status)

	// Without a key the request is refused, as the real API does.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/v1beta/models/gemini-2.5-flash:generateContent",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
	require.NoError(t, err)
	noKey, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer noKey.Body.Close()
	require.Equal(t, http.StatusUnauthorized, noKey.StatusCode)

	// An unknown method on a model is not served.
	resp = postGemini(t, srv, "embedContent", map[string]any{})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
