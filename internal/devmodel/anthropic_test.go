package devmodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/internal/devmodel"
)

// startServer starts a scripted model server on a free loopback port.
func startServer(t *testing.T) *devmodel.Server {
	t.Helper()
	srv := devmodel.New(devmodel.Options{Logger: zaptest.NewLogger(t), SlowDelay: 20 * time.Millisecond})
	require.NoError(t, srv.Start(t.Context(), "127.0.0.1:0"))
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return srv
}

// settled waits until request seq has finished on the server: a client can see
// the end of a stream before the server has logged the outcome.
func settled(t *testing.T, srv *devmodel.Server, seq int) devmodel.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := srv.WaitFor(ctx, func(r devmodel.Request) bool { return r.Seq == seq && r.Outcome != devmodel.OutcomeActive })
	require.NoError(t, err)
	return r
}

func anthropicClient(srv *devmodel.Server, retries int) *anthropic.Client {
	c := anthropic.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(retries))
	return &c
}

var bashTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name: "Bash",
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{
		"command": map[string]any{"type": "string"}, "description": map[string]any{"type": "string"},
	}},
}}

// streamMessage streams one request through the official SDK and accumulates it.
func streamMessage(t *testing.T, ctx context.Context, client *anthropic.Client, params anthropic.MessageNewParams) anthropic.Message {
	t.Helper()
	stream := client.Messages.NewStreaming(ctx, params)
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		require.NoError(t, msg.Accumulate(ev))
	}
	require.NoError(t, stream.Err())
	require.Equal(t, "message_start", types[0])
	require.Equal(t, "message_stop", types[len(types)-1])
	return msg
}

func TestAnthropicStreamsPlainText(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	msg := streamMessage(t, t.Context(), anthropicClient(srv, 0), anthropic.MessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello   there"))},
	})
	require.Len(t, msg.Content, 1)
	require.Equal(t, "text", msg.Content[0].Type)
	require.Equal(t, "Scripted reply to: hello there", msg.Content[0].Text)
	require.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
	require.Equal(t, "assistant", string(msg.Role))
	require.Positive(t, msg.Usage.InputTokens)
	require.Positive(t, msg.Usage.OutputTokens)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, devmodel.APIAnthropicMessages, reqs[0].API)
	require.Equal(t, devmodel.OutcomeCompleted, settled(t, srv, 1).Outcome)
	// The Go SDK sends the key as a bearer token; Claude Code sends x-api-key.
	require.Equal(t, "[redacted]", reqs[0].Header.Get("Authorization"))
	require.NotContains(t, fmt.Sprint(reqs[0].Header), "sk-ant-test")
}

func TestAnthropicToolCallThenFinalText(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	client := anthropicClient(srv, 0)
	prompt := anthropic.NewUserMessage(anthropic.NewTextBlock(`[[script:bash cmd="ls -l" think="Look first." description="List files"]]`))
	first := streamMessage(t, t.Context(), client, anthropic.MessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 1024, Tools: []anthropic.ToolUnionParam{bashTool},
		Messages: []anthropic.MessageParam{prompt},
	})
	require.Equal(t, anthropic.StopReasonToolUse, first.StopReason)
	require.Len(t, first.Content, 2)
	require.Equal(t, "thinking", first.Content[0].Type)
	require.Equal(t, "Look first.", first.Content[0].Thinking)
	require.NotEmpty(t, first.Content[0].Signature, "thinking ends with a signature_delta")
	call := first.Content[1]
	require.Equal(t, "tool_use", call.Type)
	require.Equal(t, "Bash", call.Name)
	require.Regexp(t, `^toolu_[0-9a-f]{24}$`, call.ID)
	var input map[string]string
	require.NoError(t, json.Unmarshal(call.Input, &input))
	require.Equal(t, map[string]string{"command": "ls -l", "description": "List files"}, input)

	final := streamMessage(t, t.Context(), client, anthropic.MessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 1024, Tools: []anthropic.ToolUnionParam{bashTool},
		Messages: []anthropic.MessageParam{
			prompt,
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(call.ID, input, call.Name)),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, "total 0\nlast line", false)),
		},
	})
	require.Equal(t, anthropic.StopReasonEndTurn, final.StopReason)
	require.Equal(t, "Tool finished: last line", final.Content[len(final.Content)-1].Text)
	require.Equal(t, 1, srv.Requests()[1].Step)
}

func TestAnthropicNonStreaming(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	msg, err := anthropicClient(srv, 0).Messages.New(t.Context(), anthropic.MessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 1024, Tools: []anthropic.ToolUnionParam{bashTool},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(`[[script:bash cmd=pwd]]`))},
	})
	require.NoError(t, err)
	require.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	require.Equal(t, "Bash", msg.Content[0].Name)
	require.JSONEq(t, `{"command":"pwd","description":"Run scripted command"}`, string(msg.Content[0].Input))
}

func TestAnthropicCountTokens(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	count, err := anthropicClient(srv, 0).Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{
		Model:    "claude-opus-5-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("how long is this?"))},
	})
	require.NoError(t, err)
	require.Positive(t, count.InputTokens)
	require.Equal(t, devmodel.APIAnthropicCountTokens, srv.Requests()[0].API)
}

func TestAnthropicRateLimitThenRetrySucceeds(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	msg := streamMessage(t, t.Context(), anthropicClient(srv, 2), anthropic.MessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(`[[script:error status=429 times=1 retry_after=10ms]]`))},
	})
	require.Equal(t, "Recovered after 1 scripted errors.", msg.Content[0].Text)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, http.StatusTooManyRequests, reqs[0].Status)
	require.Equal(t, devmodel.OutcomeFailed, reqs[0].Outcome)
	require.Equal(t, http.StatusOK, reqs[1].Status)
}

func TestAnthropicErrorsUseTheAPIShape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status  int
		errType string
	}{{400, "invalid_request_error"}, {500, "api_error"}, {529, "overloaded_error"}} {
		srv := startServer(t)
		_, err := anthropicClient(srv, 0).Messages.New(t.Context(), anthropic.MessageNewParams{
			Model: "claude-opus-5-5", MaxTokens: 1024,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(
				fmt.Sprintf(`[[script:error status=%d message="no good"]]`, tc.status)))},
		})
		var apiErr *anthropic.Error
		require.True(t, errors.As(err, &apiErr), "status %d: %v", tc.status, err)
		require.Equal(t, tc.status, apiErr.StatusCode)
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(apiErr.RawJSON()), &body))
		require.Equal(t, "error", body.Type)
		require.Equal(t, tc.errType, body.Error.Type)
		require.Equal(t, "no good", body.Error.Message)
	}
}

func TestAnthropicRequiresAKey(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	client := anthropic.NewClient(option.WithBaseURL(srv.URL()), option.WithAPIKey(""), option.WithMaxRetries(0))
	_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var apiErr *anthropic.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
}

func TestAnthropicSlowReplyStopsWhenTheClientGoesAway(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream := anthropicClient(srv, 0).Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(`[[script:slow chunks=1000 delay=20ms]]`))},
	})
	deltas := 0
	for stream.Next() {
		if stream.Current().Type == "content_block_delta" {
			deltas++
			if deltas == 2 {
				cancel()
			}
		}
	}
	require.GreaterOrEqual(t, deltas, 2)
	require.Less(t, deltas, 1000)
	waitCtx, waitCancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer waitCancel()
	req, err := srv.WaitFor(waitCtx, func(r devmodel.Request) bool { return r.Outcome == devmodel.OutcomeCancelled })
	require.NoError(t, err)
	require.Equal(t, devmodel.ScriptSlow, req.Script)
	require.Less(t, req.Duration, 5*time.Second, "a cancelled slow reply stops at once instead of running its 20 s")
}

func TestAnthropicErrorMidStream(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	stream := anthropicClient(srv, 0).Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(
			`[[script:error status=529 midstream partial="half a reply" message="overloaded now"]]`))},
	})
	var msg anthropic.Message
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.ErrorContains(t, stream.Err(), "overloaded now")
	require.Equal(t, "half a reply", msg.Content[0].Text, "the partial text arrived before the error")
	require.Equal(t, devmodel.OutcomeFailed, settled(t, srv, 1).Outcome)
}

func TestAnthropicConnectionDroppedMidStream(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	stream := anthropicClient(srv, 0).Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{
		Model: "claude-opus-5-5", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(
			`[[script:error midstream drop partial="half a reply"]]`))},
	})
	var msg anthropic.Message
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.Error(t, stream.Err(), "a dropped connection ends the stream with an error")
	require.NotContains(t, stream.Err().Error(), "scripted error", "no error event was sent, the connection closed")
	require.Equal(t, "half a reply", msg.Content[0].Text, "the partial text arrived before the drop")
	require.Equal(t, devmodel.OutcomeFailed, settled(t, srv, 1).Outcome)
}
