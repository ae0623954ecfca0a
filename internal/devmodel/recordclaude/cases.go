package recordclaude

import (
	"fmt"
	"strings"

	"github.com/astrabox/astrabox/internal/agentrun"
	"github.com/astrabox/astrabox/internal/devmodel"
)

// scenario is one recorded case.
type scenario struct {
	name           string
	description    string
	permissionMode string
	run            func(s *session) error
}

// cases are recorded in this order. Each checks the milestones it exists to
// show, so a recording that misses one is an error rather than a silent gap.
var cases = []scenario{
	{
		name:        "plain_text",
		description: "One prompt without a directive; the default text reply.",
		run:         func(s *session) error { return s.turn("hello there") },
	},
	{
		name:        "tool_call",
		description: "A read-only Bash call, allowed without a prompt, then the final text.",
		run:         func(s *session) error { return s.turn(`[[script:bash cmd="echo hi"]]`) },
	},
	{
		name:        "thinking",
		description: "A thinking block (thinking_delta, signature_delta) before the text.",
		run: func(s *session) error {
			return s.turn(`[[script:think thought="Plan the answer first." text="Thought it through."]]`)
		},
	},
	{
		name:           "write_file",
		description:    "A Write call under acceptEdits, then the final text.",
		permissionMode: "acceptEdits",
		run: func(s *session) error {
			return s.turn(`[[script:write path="` + s.workdir + `/notes.md" content="# notes\n" final="Wrote notes.md."]]`)
		},
	},
	{
		name:           "write_file_update",
		description:    "Write creates a file, then a second Write replaces its content: Claude reports the structured patch.",
		permissionMode: "acceptEdits",
		run: func(s *session) error {
			if err := s.turn(`[[script:write path="` + s.workdir + `/notes.md" content="# notes\nfirst line\n" final="Created."]]`); err != nil {
				return err
			}
			return s.turn(`[[script:write path="` + s.workdir + `/notes.md" content="# notes\nsecond line\n" final="Updated."]]`)
		},
	},
	{
		name:           "subagent",
		description:    "A Task call: the sub-agent's own messages (parent_tool_use_id), then its result and the final text.",
		permissionMode: "bypassPermissions",
		run: func(s *session) error {
			return s.turn(`[[script:task description="Look around" prompt="say hello from the sub-agent" subagent_type="general-purpose"]]`)
		},
	},
	{
		name:        "approval_allow",
		description: "A Bash call that needs approval: can_use_tool, answered allow.",
		run: func(s *session) error {
			from := s.send(`[[script:bash cmd="touch approved.txt"]]`)
			if err := s.permission(from, true, ""); err != nil {
				return err
			}
			_, _, err := s.result(from, "success")
			return err
		},
	},
	{
		name:        "approval_deny",
		description: "A Bash call that needs approval: can_use_tool, answered deny with a message.",
		run: func(s *session) error {
			from := s.send(`[[script:bash cmd="touch denied.txt"]]`)
			if err := s.permission(from, false, "The person said no"); err != nil {
				return err
			}
			_, _, err := s.result(from, "success")
			return err
		},
	},
	{
		name:        "interrupt_while_approval_pending",
		description: "Interrupt while can_use_tool waits for an answer: Claude withdraws it with control_cancel_request.",
		run: func(s *session) error {
			from := s.send(`[[script:bash cmd="touch never.txt"]]`)
			if _, _, err := s.await(from, "can_use_tool", func(cl agentrun.ClaudeLine) bool {
				return cl.Type == "control_request" && strings.Contains(string(cl.Request), `"can_use_tool"`)
			}); err != nil {
				return err
			}
			s.note("send interrupt while the approval is pending")
			if _, err := s.control(map[string]any{"subtype": "interrupt"}); err != nil {
				return err
			}
			if _, _, err := s.await(from, "control_cancel_request", func(cl agentrun.ClaudeLine) bool {
				return cl.Type == "control_cancel_request"
			}); err != nil {
				return err
			}
			_, _, err := s.result(from, "error_during_execution")
			return err
		},
	},
	{
		name:        "interrupt_streaming",
		description: "Interrupt while text streams, then a new prompt that succeeds.",
		run: func(s *session) error {
			from := s.send(`[[script:slow chunks=100]]`)
			if err := s.firstDelta(from); err != nil {
				return err
			}
			s.note("send interrupt after the first text delta")
			if _, err := s.control(map[string]any{"subtype": "interrupt"}); err != nil {
				return err
			}
			if _, _, err := s.result(from, "error_during_execution"); err != nil {
				return err
			}
			if err := s.modelRequest("the slow reply was cancelled", func(r devmodel.Request) bool {
				return r.Script == devmodel.ScriptSlow && r.Outcome == devmodel.OutcomeCancelled
			}); err != nil {
				return err
			}
			return s.turn("after the interrupt")
		},
	},
	{
		name:           "interrupt_during_tool",
		description:    "Interrupt while a Bash command runs (bypassPermissions).",
		permissionMode: "bypassPermissions",
		run: func(s *session) error {
			fifo, started, err := s.toolSignal("tool-started")
			if err != nil {
				return err
			}
			from := s.send(`[[script:bash cmd="echo started > ` + fifo + `; sleep 30"]]`)
			if err := started(); err != nil {
				return err
			}
			s.note("send interrupt while the command runs")
			if _, err := s.control(map[string]any{"subtype": "interrupt"}); err != nil {
				return err
			}
			_, _, err = s.result(from, "error_during_execution")
			return err
		},
	},
	{
		name:        "queued_while_streaming",
		description: "A second message sent while the first reply streams; it runs as its own turn.",
		run: func(s *session) error {
			from := s.send(`[[script:slow chunks=20]]`)
			if err := s.firstDelta(from); err != nil {
				return err
			}
			s.note("send a second message while the reply streams")
			s.send("second message while streaming")
			_, idx, err := s.result(from, "success")
			if err != nil {
				return err
			}
			second, _, err := s.result(idx+1, "success")
			if err != nil {
				return err
			}
			if !strings.Contains(second.Result, "second message while streaming") {
				return fmt.Errorf("second result %q does not answer the second message", second.Result)
			}
			return nil
		},
	},
	{
		name: "parallel_prompts",
		description: "Ten distinct prompts written to stdin at once while Claude Code is idle; " +
			"Claude merges what it queued into fewer turns.",
		run: func(s *session) error {
			from, ids := s.sendAll(parallelPrompts("parallel prompt"))
			return s.resultsCovering(from, ids)
		},
	},
	{
		name: "parallel_prompts_while_streaming",
		description: "Ten distinct prompts written to stdin at once while a slow reply streams; " +
			"they wait in Claude Code's queue until that turn ends.",
		run: func(s *session) error {
			first := s.send(`[[script:slow chunks=20]]`)
			if err := s.firstDelta(first); err != nil {
				return err
			}
			s.note("send ten prompts at once while the reply streams")
			from, ids := s.sendAll(parallelPrompts("queued prompt"))
			if _, _, err := s.result(first, "success"); err != nil {
				return err
			}
			return s.resultsCovering(from, ids)
		},
	},
	{
		name: "parallel_prompts_during_tool",
		description: "Ten distinct prompts written to stdin at once while a Bash command runs " +
			"(bypassPermissions); Claude absorbs them into the running turn.",
		permissionMode: "bypassPermissions",
		run: func(s *session) error {
			fifo, started, err := s.toolSignal("tool-started")
			if err != nil {
				return err
			}
			first := s.send(`[[script:bash cmd="echo started > ` + fifo + `; sleep 2; echo slept"]]`)
			if err := started(); err != nil {
				return err
			}
			s.note("send ten prompts at once while the command runs")
			from, ids := s.sendAll(parallelPrompts("absorbed prompt"))
			if _, _, err := s.result(first, "success"); err != nil {
				return err
			}
			return s.resultsCovering(from, ids)
		},
	},
	{
		name:           "message_during_tool",
		description:    "A second message sent while a Bash command runs; absorbed into the running turn.",
		permissionMode: "bypassPermissions",
		run: func(s *session) error {
			fifo, started, err := s.toolSignal("tool-started")
			if err != nil {
				return err
			}
			from := s.send(`[[script:bash cmd="echo started > ` + fifo + `; sleep 2; echo slept"]]`)
			if err := started(); err != nil {
				return err
			}
			s.note("send a second message while the command runs")
			s.send("second message while the tool runs")
			_, _, err = s.result(from, "success")
			return err
		},
	},
	{
		name:        "model_error_400",
		description: "The model answers 400 every time; Claude Code retries, then reports an API error.",
		run: func(s *session) error {
			res, _, err := s.result(s.send(`[[script:error status=400 message="scripted bad request"]]`), "success")
			if err != nil {
				return err
			}
			if !res.IsError {
				return fmt.Errorf("result after a 400 is not an error: %s", res.Result)
			}
			return nil
		},
	},
	{
		name: "stream_error",
		description: "The reply breaks off with an overloaded_error event after partial text, once; " +
			"Claude Code retries the request without streaming and succeeds.",
		run: func(s *session) error {
			return s.turn(`[[script:error status=529 midstream times=1 partial="Half a reply" text="Whole reply after the retry."]]`)
		},
	},
	{
		name: "stream_dropped",
		description: "The connection closes after partial text with no error event, once, as when the " +
			"host-side egress forward dies; Claude Code abandons the partial message and asks again.",
		run: func(s *session) error {
			return s.turn(`[[script:error midstream drop times=1 delay=40ms partial="Half a reply" text="Whole reply after the retry."]]`)
		},
	},
	{
		name:        "rate_limit_retry",
		description: "The model answers 429 once; Claude Code retries (system/api_retry) and succeeds.",
		run: func(s *session) error {
			return s.turn(`[[script:error status=429 times=1 retry_after=0 text="Back after a rate limit."]]`)
		},
	},
}

// parallelPromptCount is how many prompts the parallel cases write at once.
const parallelPromptCount = 10

// parallelPrompts are distinct prompts, so each can be told apart in the transcript.
func parallelPrompts(prefix string) []string {
	texts := make([]string, parallelPromptCount)
	for i := range texts {
		texts[i] = fmt.Sprintf("%s %d of %d", prefix, i+1, parallelPromptCount)
	}
	return texts
}
