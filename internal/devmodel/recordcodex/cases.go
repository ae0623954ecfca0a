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

// Granular approval policies (Codex's AskForApproval object form): MCP elicitations
// relayed to the client, or declined by Codex itself.
const (
	policyGranularElicit      = `{"granular":{"sandbox_approval":true,"rules":false,"skill_approval":false,"request_permissions":false,"mcp_elicitations":true}}`
	policyGranularPermissions = `{"granular":{"sandbox_approval":true,"rules":false,"skill_approval":false,"request_permissions":true,"mcp_elicitations":false}}`
	policyGranularNoElicit    = `{"granular":{"sandbox_approval":true,"rules":false,"skill_approval":false,"request_permissions":false,"mcp_elicitations":false}}`
)

// elicitDirective calls the echo MCP server's elicit tool, which asks the client for a
// name through elicitation/create.
const elicitDirective = `[[script:tool name=elicit server=asker args="{\"message\":\"Your name?\"}"]]`

// scenario is one recorded case.
type scenario struct {
	name           string
	description    string
	approvalPolicy string
	model          string
	// elicitServer configures the echo MCP server (engines/enginetest/testdata) with its
	// elicit tool as the stdio MCP server "asker".
	elicitServer bool
	// features are Codex features the case turns on (-c features.<name>=true): tools
	// the pinned release offers only behind a feature.
	features []string
	run      func(s *session) error
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
		name: "mcp_elicitation_accept", description: "Under a granular policy allowing MCP elicitations an MCP tool elicits; the form answered accept with content.",
		approvalPolicy: policyGranularElicit, elicitServer: true,
		run: func(s *session) error {
			return elicit(s, map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}, "_meta": nil})
		},
	},
	{
		name: "mcp_elicitation_decline", description: "Under a granular policy allowing MCP elicitations an MCP tool elicits; answered decline.",
		approvalPolicy: policyGranularElicit, elicitServer: true,
		run: func(s *session) error {
			return elicit(s, map[string]any{"action": "decline", "content": nil, "_meta": nil})
		},
	},
	{
		name: "mcp_elicitation_disallowed", description: "Under a granular policy without MCP elicitations Codex declines the elicitation itself.",
		approvalPolicy: policyGranularNoElicit, elicitServer: true,
		run: func(s *session) error {
			from, _, err := s.send(elicitDirective)
			if err != nil {
				return err
			}
			if err := s.completed(from, "completed"); err != nil {
				return err
			}
			for _, l := range s.proc.Lines()[from:] {
				if m, ok := parse(l); ok && m.Method == mcpElicitation {
					return fmt.Errorf("%w: Codex relayed an elicitation the policy disallows", errUnexpected)
				}
			}
			return nil
		},
	},
	{
		name: "request_user_input", description: "With Codex's default_mode_request_user_input feature the model asks the person a question (item/tool/requestUserInput); answered.",
		approvalPolicy: policyNever, features: []string{"default_mode_request_user_input"},
		run: func(s *session) error {
			from, _, err := s.send(`[[script:tool name=request_user_input args="{\"questions\":[{\"id\":\"color\",\"header\":\"Color\",\"question\":\"Which color?\",\"options\":[{\"label\":\"Red\",\"description\":\"Warm.\"},{\"label\":\"Blue\",\"description\":\"Cool.\"}]}]}"]]`)
			if err != nil {
				return err
			}
			m, _, err := s.await(from, userInputRequest, func(m message) bool { return m.Method == userInputRequest && len(m.ID) > 0 })
			if err != nil {
				return err
			}
			s.note("answer %s %s", userInputRequest, m.ID)
			if err := s.proc.Send(map[string]any{"id": m.ID, "result": map[string]any{"answers": map[string]any{"color": map[string]any{"answers": []string{"Blue"}}}}}); err != nil {
				return err
			}
			return s.completed(from, "completed")
		},
	},
	{
		name: "request_permissions", description: "With Codex's request_permissions_tool feature, under a granular policy allowing it, the model asks for network access (item/permissions/requestApproval); granted for the turn.",
		approvalPolicy: policyGranularPermissions, features: []string{"request_permissions_tool"},
		run: func(s *session) error {
			from, _, err := s.send(`[[script:tool name=request_permissions args="{\"reason\":\"Fetch the docs.\",\"permissions\":{\"network\":{\"enabled\":true}}}"]]`)
			if err != nil {
				return err
			}
			m, _, err := s.await(from, permissionsRequest, func(m message) bool { return m.Method == permissionsRequest && len(m.ID) > 0 })
			if err != nil {
				return err
			}
			s.note("answer %s %s", permissionsRequest, m.ID)
			if err := s.proc.Send(map[string]any{"id": m.ID, "result": map[string]any{"permissions": map[string]any{"network": map[string]any{"enabled": true}}, "scope": "turn"}}); err != nil {
				return err
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
	mcpElicitation     = "mcpServer/elicitation/request"
	userInputRequest   = "item/tool/requestUserInput"
	permissionsRequest = "item/permissions/requestApproval"
)

// elicit runs the elicit tool and answers Codex's relayed elicitation with result.
func elicit(s *session, result map[string]any) error {
	from, _, err := s.send(elicitDirective)
	if err != nil {
		return err
	}
	m, _, err := s.await(from, mcpElicitation, func(m message) bool { return m.Method == mcpElicitation && len(m.ID) > 0 })
	if err != nil {
		return err
	}
	s.note("answer %s %s with %v", mcpElicitation, m.ID, result["action"])
	if err := s.proc.Send(map[string]any{"id": m.ID, "result": result}); err != nil {
		return err
	}
	return s.completed(from, "completed")
}

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
