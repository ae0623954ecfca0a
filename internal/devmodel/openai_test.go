package devmodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/devmodel"
)

func openAIClient(srv *devmodel.Server, retries int) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(srv.URL()+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(retries))
	return &c
}

var execCommandTool = responses.ToolParamOfFunction("exec_command", map[string]any{
	"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}},
}, false)

// streamResponse streams one Responses request through the official SDK and
// returns the completed response and the event types in order.
func streamResponse(t *testing.T, ctx context.Context, client *openai.Client, params responses.ResponseNewParams) (responses.Response, []string) {
	t.Helper()
	stream := client.Responses.NewStreaming(ctx, params)
	var types []string
	var completed responses.Response
	var text strings.Builder
	for stream.Next() {
		ev := stream.Current()
		require.Equal(t, int64(len(types)), ev.SequenceNumber, "sequence numbers count up from 0")
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			completed = ev.AsResponseCompleted().Response
		}
	}
	require.NoError(t, stream.Err())
	require.Equal(t, "response.created", types[0])
	require.Equal(t, "response.completed", types[len(types)-1])
	require.Equal(t, responses.ResponseStatusCompleted, completed.Status)
	require.Equal(t, text.String(), completed.OutputText(), "deltas add up to the final text")
	return completed, types
}

func TestResponsesStreamsTextAndReasoning(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp, types := streamResponse(t, t.Context(), openAIClient(srv, 0), responses.ResponseNewParams{
		Model: "gpt-5.5",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`[[script:think thought="Consider it." text="All clear."]]`)},
	})
	require.Len(t, resp.Output, 2)
	reasoning := resp.Output[0].AsReasoning()
	require.Equal(t, "reasoning", resp.Output[0].Type)
	require.Equal(t, "Consider it.", reasoning.Summary[0].Text)
	require.Equal(t, "All clear.", resp.OutputText())
	require.Contains(t, types, "response.reasoning_summary_text.delta")
	require.Positive(t, resp.Usage.InputTokens)
	require.Equal(t, resp.Usage.InputTokens+resp.Usage.OutputTokens, resp.Usage.TotalTokens)
}

func TestResponsesFunctionCallThenFinalText(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	client := openAIClient(srv, 0)
	prompt := responses.ResponseInputItemParamOfMessage(`[[script:bash cmd="echo one" cmd="echo two"]]`, responses.EasyInputMessageRoleUser)
	input := responses.ResponseInputParam{prompt}
	for step, want := range []string{"echo one", "echo two"} {
		resp, types := streamResponse(t, t.Context(), client, responses.ResponseNewParams{
			Model: "stub-model", Tools: []responses.ToolUnionParam{execCommandTool},
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		})
		require.Contains(t, types, "response.function_call_arguments.delta")
		require.Len(t, resp.Output, 1)
		call := resp.Output[0].AsFunctionCall()
		require.Equal(t, "exec_command", call.Name, "step %d", step)
		require.JSONEq(t, `{"cmd":"`+want+`"}`, call.Arguments)
		require.True(t, strings.HasPrefix(call.CallID, "call_"))
		out := responses.ResponseInputItemParamOfFunctionCallOutput("output of " + want)
		out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
		input = append(input, responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name), out)
	}
	resp, _ := streamResponse(t, t.Context(), client, responses.ResponseNewParams{
		Model: "stub-model", Tools: []responses.ToolUnionParam{execCommandTool},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
	})
	require.Equal(t, "Tool finished: output of echo two", resp.OutputText())
}

func TestResponsesFreeformApplyPatch(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp, types := streamResponse(t, t.Context(), openAIClient(srv, 0), responses.ResponseNewParams{
		Model: "gpt-5.5",
		Tools: []responses.ToolUnionParam{execCommandTool, {OfCustom: &responses.CustomToolParam{Name: "apply_patch"}}},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`[[script:write path=hello.txt content="hi\nthere\n"]]`)},
	})
	require.Contains(t, types, "response.custom_tool_call_input.delta")
	call := resp.Output[0].AsCustomToolCall()
	require.Equal(t, "apply_patch", call.Name)
	require.Equal(t, "*** Begin Patch\n*** Add File: hello.txt\n+hi\n+there\n*** End Patch\n", call.Input)
}

func TestResponsesNonStreamingAndErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	client := openAIClient(srv, 0)
	resp, err := client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "stub-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("plain please")},
	})
	require.NoError(t, err)
	require.Equal(t, "Scripted reply to: plain please", resp.OutputText())

	_, err = client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "stub-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`[[script:error status=500]]`)},
	})
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusInternalServerError, apiErr.StatusCode)
	require.Equal(t, "server_error", apiErr.Type)
}

func TestResponsesRateLimitRetriedBySDK(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp, _ := streamResponse(t, t.Context(), openAIClient(srv, 3), responses.ResponseNewParams{
		Model: "stub-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`[[script:error status=429 times=2 retry_after=5ms text=ok]]`)},
	})
	require.Equal(t, "ok", resp.OutputText())
	var statuses []int
	for _, r := range srv.Requests() {
		statuses = append(statuses, r.Status)
	}
	require.Equal(t, []int{429, 429, 200}, statuses)
}

var bashFunction = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:       "bash",
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}},
})

// streamChat streams one Chat Completions request and accumulates it.
func streamChat(t *testing.T, ctx context.Context, client *openai.Client, params openai.ChatCompletionNewParams) (openai.ChatCompletionAccumulator, string) {
	t.Helper()
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var reasoning strings.Builder
	for stream.Next() {
		chunk := stream.Current()
		require.True(t, acc.AddChunk(chunk), "chunk accepted by the accumulator")
		if len(chunk.Choices) > 0 {
			if raw, ok := chunk.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var s string
				require.NoError(t, json.Unmarshal([]byte(raw.Raw()), &s))
				reasoning.WriteString(s)
			}
		}
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices, 1)
	require.Positive(t, acc.Usage.TotalTokens, "the usage chunk arrives when include_usage is set")
	return acc, reasoning.String()
}

func TestChatCompletionsToolCallThenFinalText(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	client := openAIClient(srv, 0)
	messages := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are a coding agent."),
		openai.UserMessage(`[[script:bash cmd="touch a" think="Need a file."]]`),
	}
	acc, reasoning := streamChat(t, t.Context(), client, openai.ChatCompletionNewParams{
		Model: "stub-model", Messages: messages, Tools: []openai.ChatCompletionToolUnionParam{bashFunction},
	})
	require.Equal(t, "Need a file.", reasoning)
	require.Equal(t, "tool_calls", acc.Choices[0].FinishReason)
	calls := acc.Choices[0].Message.ToolCalls
	require.Len(t, calls, 1)
	require.Equal(t, "bash", calls[0].Function.Name)
	require.JSONEq(t, `{"command":"touch a"}`, calls[0].Function.Arguments)

	messages = append(messages, acc.Choices[0].Message.ToParam(), openai.ToolMessage("(no output)", calls[0].ID))
	acc, _ = streamChat(t, t.Context(), client, openai.ChatCompletionNewParams{
		Model: "stub-model", Messages: messages, Tools: []openai.ChatCompletionToolUnionParam{bashFunction},
	})
	require.Equal(t, "stop", acc.Choices[0].FinishReason)
	require.Equal(t, "Tool finished: (no output)", acc.Choices[0].Message.Content)
}

func TestChatCompletionsNonStreamingAndAuth(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp, err := openAIClient(srv, 0).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "stub-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	require.NoError(t, err)
	require.Equal(t, "Scripted reply to: hi", resp.Choices[0].Message.Content)

	noKey := openai.NewClient(option.WithBaseURL(srv.URL()+"/v1/"), option.WithAPIKey(""), option.WithMaxRetries(0))
	_, err = noKey.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "stub-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
}

// TestChatCompletionsReminderPartBesideThePrompt: Qwen Code sends its list of skills
// as a <system-reminder> text part before the person's text in one user message; the
// reminder is dropped, not the message, so a directive in the person's text runs.
func TestChatCompletionsReminderPartBesideThePrompt(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	resp, err := openAIClient(srv, 0).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "stub-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("<system-reminder>\nThe following skills are available\n</system-reminder>"),
			openai.TextContentPart(devmodel.Directive("slow", "chunks", "2", "delay", "1ms")),
		})},
	})
	require.NoError(t, err)
	require.Equal(t, "Slow chunk 1 of 2. Slow chunk 2 of 2. ", resp.Choices[0].Message.Content)
}

func TestOpenAIErrorsMidStream(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	client := openAIClient(srv, 0)
	stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model: "stub-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`[[script:error status=500 midstream message="broke mid-reply"]]`)},
	})
	var failed responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.failed" {
			failed = ev.AsResponseFailed().Response
		}
	}
	require.NoError(t, stream.Err())
	require.Equal(t, responses.ResponseStatusFailed, failed.Status)
	require.Equal(t, "broke mid-reply", failed.Error.Message)

	chat := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:    "stub-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`[[script:error status=500 midstream message="chat broke"]]`)},
	})
	var acc openai.ChatCompletionAccumulator
	for chat.Next() {
		acc.AddChunk(chat.Current())
	}
	require.ErrorContains(t, chat.Err(), "chat broke")
}

// TestChatCompletionsDeepSeekHarness scripts against the prompt DeepSeek Harness sends,
// not the runtime context message it adds after it, and gives its bash the description
// it requires and, to leave its sandbox, sandbox_permissions and a justification.
func TestChatCompletionsDeepSeekHarness(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	client := openAIClient(srv, 0)
	const context = "Current runtime context.\nApproval policy: ask"
	acc, _ := streamChat(t, t.Context(), client, openai.ChatCompletionNewParams{
		Model: "deepseek-v4-flash", Tools: []openai.ChatCompletionToolUnionParam{bashFunction},
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage(`[[script:bash cmd="touch /tmp/out" escalate=true description="Leave"]]`), openai.UserMessage(context)},
	})
	calls := acc.Choices[0].Message.ToolCalls
	require.Len(t, calls, 1)
	require.JSONEq(t, `{"command":"touch /tmp/out","description":"Leave","sandbox_permissions":"danger-full-access","justification":"Leave"}`,
		calls[0].Function.Arguments)

	acc, _ = streamChat(t, t.Context(), client, openai.ChatCompletionNewParams{
		Model: "deepseek-v4-flash", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there"), openai.UserMessage(context)},
	})
	require.Equal(t, "Scripted reply to: hello there", acc.Choices[0].Message.Content)
}
