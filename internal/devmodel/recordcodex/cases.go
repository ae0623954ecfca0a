package recordcodex

import (
	"fmt"
	"strings"

	"github.com/astrabox/astrabox/internal/devmodel"
)

// Codex's approval policies the cases run under, in its own words.
const (
	policyNever     = "never"
	policyUntrusted = "untrusted"
)

// patchModel is a model slug Codex bundles metadata for: with it Codex offers
// apply_patch, so file changes (and their approvals) happen; an unknown slug
// gets fallback metadata without it.
const patchModel = "gpt-5.5"

// scenario is one recorded case.
type scenario struct {
	name           string
	description    string
	approvalPolicy string
	model          string
	run            func(s *session) error
}

// cases are recorded in this order. Each checks the milestones it exists to
// show, so a recording that misses one is an error rather than a silent gap.
var cases = []scenario{
	{
		name: "plain_text", description: "One input without a directive; the default text reply.",
		approvalPolicy: policyNever,
		run:            func(s *session) error { return s.turn("hello there") },
	},
	{
		name: "reasoning", description: "A reasoning item (summary text deltas) before the text.",
		approvalPolicy: policyNever,
		run: func(s *session) error {
			return s.turn(`[[script:think thought="Plan the answer first." text="Thought it through."]]`)
		},
	},
	{
		name: "command", description: "An exec_command call run without approval (commandExecution item), then the final text.",
		approvalPolicy: policyNever,
		run:            func(s *session) error { return s.turn(`[[script:bash cmd="echo hi"]]`) },
	},
	{
		name: "file_change", description: "An apply_patch call (fileChange item, turn/diff/updated), then the final text.",
		approvalPolicy: policyNever, model: patchModel,
		run: func(s *session) error {
			return s.turn(`[[script:write path=notes.md content="# notes\n" final="Wrote notes.md."]]`)
		},
	},
	{
		name: "approval_accept", description: "Under untrusted a command asks for approval; answered accept.",
		approvalPolicy: policyUntrusted,
		run: func(s *session) error {
			return approve(s, `[[script:bash cmd="touch approved.txt"]]`, commandApproval, "accept")
		},
	},
	{
		name: "approval_decline", description: "Under untrusted a command asks for approval; answered decline.",
		approvalPolicy: policyUntrusted,
		run: func(s *session) error {
			return approve(s, `[[script:bash cmd="touch declined.txt"]]`, commandApproval, "decline")
		},
	},
	{
		name: "approval_file_change", description: "Under untrusted a patch asks for approval; answered acceptForSession.",
		approvalPolicy: policyUntrusted, model: patchModel,
		run: func(s *session) error {
			return approve(s, `[[script:write path=approved.md content="approved\n" final="Wrote approved.md."]]`, fileChangeApproval, "acceptForSession")
		},
	},
	{
		name: "interrupt_streaming", description: "turn/interrupt while the reply streams.",
		approvalPolicy: policyNever,
		run: func(s *session) error {
			from, turn, err := s.send(`[[script:slow chunks=200]]`)
			if err != nil {
				return err
			}
			if _, err := s.notification(from, "item/agentMessage/delta"); err != nil {
				return err
			}
			if err := s.interrupt(turn); err != nil {
				return err
			}
			return s.completed(from, "interrupted")
		},
	},
	{
		name: "interrupt_during_tool", description: "turn/interrupt while a long command runs.",
		approvalPolicy: policyNever,
		run: func(s *session) error {
			from, turn, err := s.send(`[[script:bash cmd="sleep 30"]]`)
			if err != nil {
				return err
			}
			if _, _, err := s.await(from, "the command item", func(m message) bool {
				return m.Method == "item/started" && strings.Contains(string(m.Params), `"commandExecution"`)
			}); err != nil {
				return err
			}
			if err := s.interrupt(turn); err != nil {
				return err
			}
			return s.completed(from, "interrupted")
		},
	},
	{
		name: "interrupt_while_approval_pending", description: "turn/interrupt while an approval is open: Codex resolves the request itself.",
		approvalPolicy: policyUntrusted,
		run: func(s *session) error {
			from, turn, err := s.send(`[[script:bash cmd="touch never.txt"]]`)
			if err != nil {
				return err
			}
			if _, _, err := s.await(from, "approval request", func(m message) bool { return m.Method == commandApproval }); err != nil {
				return err
			}
			if err := s.interrupt(turn); err != nil {
				return err
			}
			if err := s.completed(from, "interrupted"); err != nil {
				return err
			}
			_, err = s.notification(from, "serverRequest/resolved")
			return err
		},
	},
	{
		name: "message_while_streaming", description: "A second turn/start while the reply streams joins the running turn.",
		approvalPolicy: policyNever,
		run: func(s *session) error {
			from, turn, err := s.send(`[[script:slow chunks=30]]`)
			if err != nil {
				return err
			}
			if _, err := s.notification(from, "item/agentMessage/delta"); err != nil {
				return err
			}
			_, joined, err := s.send("and one more thing")
			if err != nil {
				return err
			}
			if joined != turn {
				return fmt.Errorf("%w: the second input started turn %s, not the running %s", errUnexpected, joined, turn)
			}
			return s.completed(from, "completed")
		},
	},
	{
		name: "message_during_tool", description: "A second turn/start while a command runs joins the turn; Codex holds it until the command ends.",
		approvalPolicy: policyNever,
		run: func(s *session) error {
			from, turn, err := s.send(`[[script:bash cmd="sleep 2"]]`)
			if err != nil {
				return err
			}
			if _, _, err := s.await(from, "the command item", func(m message) bool {
				return m.Method == "item/started" && strings.Contains(string(m.Params), `"commandExecution"`)
			}); err != nil {
				return err
			}
			_, joined, err := s.send("and while it runs")
			if err != nil {
				return err
			}
			if joined != turn {
				return fmt.Errorf("%w: the second input started turn %s, not the running %s", errUnexpected, joined, turn)
			}
			return s.completed(from, "completed")
		},
	},
	{
		name: "model_error_400", description: "The model answers 400: the turn fails.",
		approvalPolicy: policyNever,
		run: func(s *session) error {
			from, _, err := s.send(`[[script:error status=400]]`)
			if err != nil {
				return err
			}
			if err := s.completed(from, "failed"); err != nil {
				return err
			}
			return s.modelRequest("400", func(r devmodel.Request) bool { return r.Status == 400 })
		},
	},
}

// Codex's approval requests, server to client.
const (
	commandApproval    = "item/commandExecution/requestApproval"
	fileChangeApproval = "item/fileChange/requestApproval"
)

func approve(s *session, text, method, decision string) error {
	from, _, err := s.send(text)
	if err != nil {
		return err
	}
	if err := s.approval(from, method, decision); err != nil {
		return err
	}
	return s.completed(from, "completed")
}
