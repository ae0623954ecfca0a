package recordpi

import (
	"fmt"

	"github.com/astrabox/astrabox/engines/pi"
	"github.com/astrabox/astrabox/internal/devmodel"
)

// scenario is one recorded case.
type scenario struct {
	name        string
	description string
	// mode is the platform extension's permission mode.
	mode string
	run  func(s *session) error
}

// cases are recorded in this order. Each checks the milestones it exists to
// show, so a recording that misses one is an error rather than a silent gap.
var cases = []scenario{
	{
		name: "plain_text", description: "One input without a directive; the default text reply.",
		mode: pi.ModeAllowAll,
		run:  func(s *session) error { return s.turn("hello there", "stop") },
	},
	{
		name: "two_turns", description: "Two inputs one after the other: the second is written to the session file at once.",
		mode: pi.ModeAllowAll,
		run: func(s *session) error {
			if err := s.turn("first", "stop"); err != nil {
				return err
			}
			return s.turn("second", "stop")
		},
	},
	{
		name: "reasoning", description: "A thinking block before the text.",
		mode: pi.ModeAllowAll,
		run: func(s *session) error {
			return s.turn(`[[script:think thought="Plan the answer first." text="Thought it through."]]`, "stop")
		},
	},
	{
		name: "tool_call", description: "A bash tool call run without asking (allow-all), then the final text.",
		mode: pi.ModeAllowAll,
		run:  func(s *session) error { return s.turn(`[[script:bash cmd="echo hi"]]`, "stop") },
	},
	{
		name: "approval_allow", description: "Under ask, bash asks through the extension; answered Allow.",
		mode: pi.ModeAsk,
		run:  func(s *session) error { return s.approve(`[[script:bash cmd="touch approved.txt"]]`, "Allow") },
	},
	{
		name: "approval_deny", description: "Under ask, bash asks through the extension; answered Deny.",
		mode: pi.ModeAsk,
		run:  func(s *session) error { return s.approve(`[[script:bash cmd="touch denied.txt"]]`, "Deny") },
	},
	{
		name: "interrupt_streaming", description: "abort while the reply streams.",
		mode: pi.ModeAllowAll,
		run: func(s *session) error {
			from, err := s.send(`[[script:slow chunks=200]]`)
			if err != nil {
				return err
			}
			if _, err := s.await(from, "a text delta", isDelta("text_delta")); err != nil {
				return err
			}
			if err := s.abort(); err != nil {
				return err
			}
			return s.ended(from, "aborted")
		},
	},
	{
		name: "interrupt_during_tool", description: "abort while a long bash command runs.",
		mode: pi.ModeAllowAll,
		run: func(s *session) error {
			from, err := s.send(`[[script:bash cmd="sleep 30"]]`)
			if err != nil {
				return err
			}
			if _, err := s.await(from, "the tool", isType("tool_execution_start")); err != nil {
				return err
			}
			if err := s.abort(); err != nil {
				return err
			}
			return s.ended(from, "aborted")
		},
	},
	{
		name: "interrupt_while_approval_pending", description: "abort while the extension's question is open: the signal withdraws it.",
		mode: pi.ModeAsk,
		run: func(s *session) error {
			from, err := s.send(`[[script:bash cmd="touch never.txt"]]`)
			if err != nil {
				return err
			}
			if _, err := s.await(from, "the question", isSelect); err != nil {
				return err
			}
			if err := s.abort(); err != nil {
				return err
			}
			return s.ended(from, "aborted")
		},
	},
	{
		name: "message_while_streaming", description: "A second prompt (streamingBehavior steer) while the reply streams: Pi delivers it in the same run.",
		mode: pi.ModeAllowAll,
		run: func(s *session) error {
			if err := s.turn("warm up", "stop"); err != nil {
				return err
			}
			from, err := s.send(`[[script:slow chunks=20]]`)
			if err != nil {
				return err
			}
			if _, err := s.await(from, "a text delta", isDelta("text_delta")); err != nil {
				return err
			}
			if _, err := s.send("and one more thing"); err != nil {
				return err
			}
			return s.ended(from, "stop")
		},
	},
	{
		name: "message_during_tool", description: "A second prompt (steer) while a command runs: delivered after the tool batch, in the same run.",
		mode: pi.ModeAllowAll,
		run: func(s *session) error {
			if err := s.turn("warm up", "stop"); err != nil {
				return err
			}
			from, err := s.send(`[[script:bash cmd="sleep 2"]]`)
			if err != nil {
				return err
			}
			if _, err := s.await(from, "the tool", isType("tool_execution_start")); err != nil {
				return err
			}
			if _, err := s.send("and while it runs"); err != nil {
				return err
			}
			return s.ended(from, "stop")
		},
	},
	{
		name: "interrupt_with_queued_message", description: "abort while a steering message waits: Pi keeps it and delivers it in the next run, after that run's own prompt.",
		mode: pi.ModeAllowAll,
		run: func(s *session) error {
			if err := s.turn("warm up", "stop"); err != nil {
				return err
			}
			from, err := s.send(`[[script:slow chunks=12]]`)
			if err != nil {
				return err
			}
			if _, err := s.await(from, "a text delta", isDelta("text_delta")); err != nil {
				return err
			}
			if _, err := s.send("steered before the abort"); err != nil {
				return err
			}
			if err := s.abort(); err != nil {
				return err
			}
			if err := s.ended(from, "aborted"); err != nil {
				return err
			}
			next, err := s.send("the next prompt")
			if err != nil {
				return err
			}
			return s.ended(next, "stop")
		},
	},
	{
		name: "model_error_400", description: "The model answers 400: the run ends with stopReason error.",
		mode: pi.ModeAllowAll,
		run: func(s *session) error {
			from, err := s.send(`[[script:error status=400]]`)
			if err != nil {
				return err
			}
			if err := s.ended(from, "error"); err != nil {
				return err
			}
			return s.modelRequest("400", func(r devmodel.Request) bool { return r.Status == 400 })
		},
	},
}

func (s *session) approve(text, answer string) error {
	from, err := s.send(text)
	if err != nil {
		return err
	}
	req, err := s.await(from, "the question", isSelect)
	if err != nil {
		return err
	}
	s.note("answer %s with %s", req.ID, answer)
	if err := s.proc.Send(map[string]any{"type": "extension_ui_response", "id": req.ID, "value": answer}); err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	return s.ended(from, "stop")
}
