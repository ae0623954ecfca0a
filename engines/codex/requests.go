package codex

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// Codex's server requests beyond command and file-change approvals (0.169.0
// ServerRequest). Each one holds its turn until the client answers, so each becomes an
// interaction answered through the platform with Codex's own reply shape.
const (
	// requestUserInput asks the person the questions of Codex's request_user_input
	// tool (ToolRequestUserInputParams).
	requestUserInput = "item/tool/requestUserInput"
	// requestMCPElicitation relays an MCP server's elicitation/create: a form described
	// by the server's schema, or a URL to open (McpServerElicitationRequestParams).
	requestMCPElicitation = "mcpServer/elicitation/request"
	// requestPermissions asks for additional sandbox permissions for the turn or the
	// session (PermissionsRequestApprovalParams).
	requestPermissions = "item/permissions/requestApproval"
)

// Codex's McpServerElicitationAction values.
const (
	elicitationAccept  = "accept"
	elicitationDecline = "decline"
	elicitationCancel  = "cancel"
)

// elicitationOptions answer an elicitation without filling its form, in Codex's words.
var elicitationOptions = []engines.DecisionOption{
	{ID: elicitationDecline, Label: "Decline", Description: "The MCP server is told the person declined."},
	{ID: elicitationCancel, Label: "Cancel", Description: "The MCP server is told the person dismissed the request."},
}

// Codex's PermissionGrantScope values: how long granted permissions last.
const (
	grantTurn    = "turn"
	grantSession = "session"
)

// permissionOptions answer a permissions request: grant what Codex asked for, for the
// turn or the session (its scope values), or deny by granting nothing.
var permissionOptions = []engines.DecisionOption{
	{ID: grantTurn, Label: "Grant for this turn", Description: "Codex gets the requested permissions until the turn ends."},
	{ID: grantSession, Label: "Grant for the session", Description: "Codex keeps the requested permissions for the rest of the session."},
	{ID: engines.DecisionDeny, Label: "Deny", Description: "Codex gets none of the requested permissions."},
}

// userInputRequest is the part of Codex's requestUserInput this package reads.
type userInputRequest struct {
	TurnID    string `json:"turnId"`
	ItemID    string `json:"itemId"`
	Questions []struct {
		ID       string `json:"id"`
		Header   string `json:"header"`
		Question string `json:"question"`
		IsOther  bool   `json:"isOther"`
		IsSecret bool   `json:"isSecret"`
		Options  []struct {
			Label       string `json:"label"`
			Description string `json:"description"`
		} `json:"options"`
	} `json:"questions"`
}

// elicitationRequest is the part of Codex's mcpServer/elicitation/request this package
// reads.
type elicitationRequest struct {
	TurnID          *string         `json:"turnId"`
	ServerName      string          `json:"serverName"`
	Mode            string          `json:"mode"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
	URL             string          `json:"url"`
}

// permissionsRequest is the part of Codex's item/permissions/requestApproval this
// package reads; Permissions is what a grant returns.
type permissionsRequest struct {
	TurnID      string          `json:"turnId"`
	ItemID      string          `json:"itemId"`
	Reason      *string         `json:"reason"`
	Permissions json.RawMessage `json:"permissions"`
}

// otherRequest opens the interaction for a server request that is not a tool approval,
// or keeps it as a diagnostic when this adapter cannot present it.
func (t *translator) otherRequest(l rpcLine, raw json.RawMessage) {
	r := t.st.Resp
	if r == nil {
		t.diag(l.Method, raw)
		return
	}
	if _, ok := t.st.interactionByRequest(l.ID); ok {
		return
	}
	native := engines.NativeRequest{Type: l.Method, ID: string(l.ID), Payload: l.Params}
	var turn, key string
	var contract engines.InteractionContract
	switch l.Method {
	case requestUserInput:
		var req userInputRequest
		if json.Unmarshal(l.Params, &req) != nil || req.ItemID == "" || len(req.Questions) == 0 {
			t.diag(l.Method, raw)
			return
		}
		turn, key = req.TurnID, req.ItemID
		contract = engines.FormContract(native, req.Questions[0].Header, questionsSchema(req))
		if len(req.Questions) == 1 {
			contract.Prompt = req.Questions[0].Question
		}
	case requestMCPElicitation:
		var req elicitationRequest
		if json.Unmarshal(l.Params, &req) != nil {
			t.diag(l.Method, raw)
			return
		}
		if req.TurnID != nil {
			turn = *req.TurnID
		}
		key = "elicitation-" + strings.Trim(string(l.ID), `"`)
		if req.Mode == "url" {
			contract = engines.DecisionContract(native, req.Message+"\n"+req.URL, append([]engines.DecisionOption{
				{ID: elicitationAccept, Label: "Open and continue", Description: "The person opened " + req.URL + " and completed it."}},
				elicitationOptions...)...)
		} else {
			contract = engines.FormContract(native, req.ServerName, req.RequestedSchema)
			contract.Prompt, contract.Options = req.Message, elicitationOptions
		}
		contract.Title = req.ServerName
	case requestPermissions:
		var req permissionsRequest
		if json.Unmarshal(l.Params, &req) != nil || req.ItemID == "" {
			t.diag(l.Method, raw)
			return
		}
		turn, key = req.TurnID, req.ItemID
		prompt := "Codex asks for additional permissions: " + string(req.Permissions)
		if req.Reason != nil && *req.Reason != "" {
			prompt = *req.Reason + "\n" + prompt
		}
		contract = engines.DecisionContract(native, prompt, permissionOptions...)
	default:
		t.diag(l.Method, raw)
		return
	}
	if turn != "" && turn != r.Turn {
		t.diag(l.Method, raw)
		return
	}
	interactionID := interactionIDFor(r.Turn, key)
	frames, err := engines.InteractionSegmentFrames(r.ID, interactionID, contract)
	if err != nil {
		t.diag(l.Method, raw)
		return
	}
	t.st.Open = append(t.st.Open, openInteraction{ID: interactionID, ResponseID: r.ID, RequestID: l.ID, Contract: contract})
	t.emit(engines.InteractionOpened{ResponseID: r.ID, InteractionID: interactionID, Contract: contract})
	for _, f := range frames {
		t.output(f)
	}
	r.Paused = true
	t.status(engines.StatusWaiting)
}

// questionsSchema is the form for Codex's questions: one required property per
// question id, a choice among the option labels unless Codex lets the person answer
// otherwise (isOther), hidden input for a secret.
func questionsSchema(req userInputRequest) json.RawMessage {
	props := map[string]any{}
	required := make([]string, 0, len(req.Questions))
	for _, q := range req.Questions {
		p := map[string]any{"type": "string", "title": q.Header, "description": q.Question}
		if len(q.Options) > 0 {
			labels := make([]string, 0, len(q.Options))
			for _, o := range q.Options {
				labels = append(labels, o.Label)
			}
			if q.IsOther {
				p["examples"] = labels
			} else {
				p["enum"] = labels
			}
		}
		if q.IsSecret {
			p["writeOnly"] = true
		}
		props[q.ID] = p
		required = append(required, q.ID)
	}
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	return schema
}

// requestReply is the result Codex takes for an answered request, in its own shape.
func requestReply(open openInteraction, answer engines.InteractionAnswer) (any, error) {
	switch open.Contract.Native.Type {
	case requestUserInput:
		// ToolRequestUserInputResponse: each question id maps to its answers.
		var values map[string]json.RawMessage
		if err := json.Unmarshal(answer.Values, &values); err != nil {
			return nil, fmt.Errorf("the answers are not an object: %w", err)
		}
		answers := map[string]any{}
		for id, v := range values {
			var one string
			var many []string
			switch {
			case json.Unmarshal(v, &one) == nil:
				many = []string{one}
			case json.Unmarshal(v, &many) == nil:
			default:
				return nil, fmt.Errorf("the answer to %q is neither a string nor a list of strings", id)
			}
			answers[id] = map[string]any{"answers": many}
		}
		return map[string]any{"answers": answers}, nil
	case requestMCPElicitation:
		// McpServerElicitationRequestResponse: the action, with the form's content when
		// accepted.
		if answer.Decision != "" {
			return map[string]any{"action": answer.Decision, "content": nil, "_meta": nil}, nil
		}
		return map[string]any{"action": elicitationAccept, "content": answer.Values, "_meta": nil}, nil
	case requestPermissions:
		// PermissionsRequestApprovalResponse: the granted subset (all or nothing) and
		// its scope.
		if answer.Decision == engines.DecisionDeny {
			return map[string]any{"permissions": map[string]any{}, "scope": grantTurn}, nil
		}
		var req permissionsRequest
		if err := json.Unmarshal(open.Contract.Native.Payload, &req); err != nil {
			return nil, fmt.Errorf("read the permissions request: %w", err)
		}
		return map[string]any{"permissions": grantedPermissions(req.Permissions), "scope": answer.Decision}, nil
	}
	return map[string]any{"decision": codexDecision(answer.Decision)}, nil
}

// grantedPermissions is Codex's RequestPermissionProfile as a GrantedPermissionProfile:
// the requested kinds without the ones Codex left null.
func grantedPermissions(requested json.RawMessage) map[string]json.RawMessage {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(requested, &fields)
	granted := map[string]json.RawMessage{}
	for k, v := range fields {
		if string(v) != "null" {
			granted[k] = v
		}
	}
	return granted
}

// codexDecision is a tool approval answer as Codex's decision: approve is accept, deny
// decline, and a declared option (acceptForSession, cancel) is Codex's own value.
func codexDecision(decision string) string {
	switch decision {
	case engines.DecisionApprove:
		return decisionAccept
	case engines.DecisionDeny:
		return decisionDecline
	}
	return decision
}
