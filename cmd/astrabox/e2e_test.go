package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/uicheck"
)

// TestConversationEndToEnd follows the Sessions document's conversation
// workflow against the whole platform as `make run` starts it: the API, the
// Session workflow on Temporal, a real local box running the pinned Claude Code
// against the scripted model server, and the stream read as a browser reads it,
// with the `ai` package's own parser.
func TestConversationEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform")
	}
	c, agentID, validator := startRoutesStack(t)

	// Create a Session; the same Idempotency-Key returns the same one.
	created := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "create-e2e", http.StatusOK)
	sessionID := created["session_id"].(string)
	assert.Equal(t, "code-reviewer", created["deployment_name"])
	again := c.call(http.MethodPost, "/agents/"+agentID+"/conversations", `{}`, "create-e2e", http.StatusOK)
	assert.Equal(t, sessionID, again["session_id"])

	// Message 1, then its response on the stream from a new Session's 0.
	receipt := c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Create a Python Flask project scaffold.","client_message_id":"message-1"}`, "", http.StatusOK)
	assert.Equal(t, false, receipt["duplicate"])
	first := c.stream(validator, sessionID, 0)
	require.Len(t, first.report.Messages, 1)
	assert.Contains(t, messageText(first.report.Messages[0]), "Create a Python Flask project scaffold.")
	assert.Contains(t, string(first.report.Messages[0].Metadata), receipt["input_id"].(string))

	dup := c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Create a Python Flask project scaffold.","client_message_id":"message-1"}`, "", http.StatusOK)
	assert.Equal(t, true, dup["duplicate"])
	assert.Equal(t, receipt["input_id"], dup["input_id"])

	// Message 2 runs a command in the box; the tool call reaches the browser as
	// one dynamic tool part with Claude's own tool name and input.
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Add unit tests. [[script:bash cmd=\"echo tests-ok\"]]","client_message_id":"message-2"}`, "", http.StatusOK)
	second := c.stream(validator, sessionID, first.lastSeq)
	require.Len(t, second.report.Messages, 1)
	tools := second.report.Messages[0].PartsOfType("dynamic-tool")
	require.Len(t, tools, 1)
	assert.Equal(t, "Bash", tools[0]["toolName"])
	assert.Contains(t, fmt.Sprint(tools[0]["output"]), "tests-ok")

	// A slow response interrupted: the program ends it, and the Session stays usable.
	c.call(http.MethodPost, "/sessions/"+sessionID+"/inputs",
		`{"content":"Explain slowly. [[script:slow chunks=200 delay=100ms]]","client_message_id":"message-3"}`, "", http.StatusOK)
	// Interrupt once the program has opened its response: before that the
	// message is only held, and an interrupt is refused with the held input ids.
	c.dev.waitUntil(t, time.Minute, "an open response", func() bool {
		open, _ := c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)["current_responses"].([]any)
		return len(open) > 0
	})
	interrupted := c.call(http.MethodPost, "/sessions/"+sessionID+"/interrupt", ``, "", http.StatusOK)
	assert.Equal(t, "accepted", interrupted["status"])
	third := c.stream(validator, sessionID, second.lastSeq)
	require.Len(t, third.report.Messages, 1)
	assert.Contains(t, string(third.report.Messages[0].Metadata), "cancelled")
	c.waitState(sessionID, "READY")

	// The recorded history reads back as UI messages: three inputs, three responses.
	history := c.call(http.MethodGet, "/sessions/"+sessionID+"/messages", ``, "", http.StatusOK)
	msgs, ok := history["messages"].([]any)
	require.True(t, ok, "messages: %v", history)
	assert.Len(t, msgs, 6)

	// The process's /metrics shows the conversation: the API's, the Relays' and the
	// Temporal SDK's series from one registry.
	exposition := c.metrics()
	for _, series := range []string{
		`astrabox_http_request_duration_seconds_count{method="POST",route="/api/v1/sessions/:session_id/inputs",status="200"} 4`,
		`astrabox_inputs_accepted_total 3`,
		`astrabox_inputs_admitted_total 3`,
		`astrabox_custody_duration_seconds_count 3`,
		`astrabox_custody_inputs 0`,
		`astrabox_custody_oldest_age_seconds 0`,
		`astrabox_sse_followers 0`,
		`astrabox_boxes{state="Running"}`,
		`astrabox_relay_lag_seconds_count`,
		`astrabox_parts_committed_total`,
		`astrabox_activity_failures_total{activity_type="Relay"}`,
		`temporal_workflow_task_execution_latency_seconds_count`,
		`temporal_activity_execution_latency_seconds_count`,
		`temporal_request_total`,
	} {
		assert.Contains(t, exposition, series)
	}
	c.dev.interrupt(t)
	c.setup.assertStopped(t)
}

type apiClient struct {
	t     *testing.T
	base  string
	token string
	dev   *devProcess
	setup devSetup
}

func (c *apiClient) request(method, path, body, idempotencyKey string) *http.Response {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c.t.Cleanup(cancel)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	require.NoError(c.t, err)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	return resp
}

// call sends a request and returns the envelope's data.
func (c *apiClient) call(method, path, body, idempotencyKey string, want int) map[string]any {
	c.t.Helper()
	resp := c.request(method, path, body, idempotencyKey)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	require.Equal(c.t, want, resp.StatusCode, "%s %s: %s", method, path, raw)
	var env struct {
		Code string         `json:"code"`
		Data map[string]any `json:"data"`
	}
	require.NoError(c.t, json.Unmarshal(raw, &env), string(raw))
	return env.Data
}

type streamed struct {
	report  uicheck.Report
	lastSeq int
}

// stream reads one response from after_seq to its [DONE], validates it with
// the real client, and returns the last resume cursor it carried.
func (c *apiClient) stream(v *uicheck.Validator, sessionID string, after int) streamed {
	c.t.Helper()
	resp := c.request(http.MethodGet, fmt.Sprintf("/sessions/%s/stream?after_seq=%d", sessionID, after), "", "")
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	assert.Equal(c.t, "v1", resp.Header.Get("x-vercel-ai-ui-message-stream"))
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err, "stream so far:\n%s\nplatform:\n%s", raw, c.dev.output)
	report, err := v.SSE(context.Background(), raw, nil)
	require.NoError(c.t, err)
	require.NoError(c.t, report.Err())
	require.True(c.t, report.Done, "the stream ends with [DONE]")
	last := after
	for _, line := range bytes.Split(raw, []byte("\n")) {
		var chunk struct {
			Type string `json:"type"`
			Data struct {
				Seq int `json:"seq"`
			} `json:"data"`
		}
		if json.Unmarshal(bytes.TrimPrefix(line, []byte("data: ")), &chunk) == nil && chunk.Type == "data-resume-cursor" {
			last = chunk.Data.Seq
		}
	}
	require.Greater(c.t, last, after, "the stream carried resume cursors")
	return streamed{report: report, lastSeq: last}
}

// metrics reads the platform's /metrics, beside the API.
func (c *apiClient) metrics() string {
	c.t.Helper()
	resp, err := http.Get(strings.TrimSuffix(c.base, "/api/v1") + "/metrics")
	require.NoError(c.t, err)
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return string(raw)
}

// waitState polls the Session until it reports state.
func (c *apiClient) waitState(sessionID, state string) {
	c.t.Helper()
	c.dev.waitUntil(c.t, time.Minute, "state "+state, func() bool {
		return c.call(http.MethodGet, "/sessions/"+sessionID, ``, "", http.StatusOK)["state"] == state
	})
}

func messageText(m uicheck.UIMessage) string {
	var b strings.Builder
	for _, p := range m.PartsOfType("text") {
		b.WriteString(fmt.Sprint(p["text"]))
	}
	return b.String()
}
