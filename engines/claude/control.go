package claude

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// uuidPattern is the form Claude Code requires of a user message uuid.
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Submit implements engines.RuntimeClient. The input id is Claude's message uuid: it
// becomes the transcript line's uuid, command_lifecycle's command_uuid and the result's
// user_message_uuids, which is how the client follows the input. The write is
// idempotent by input id, and an input the transcript already holds is not sent again.
func (c *Client) Submit(ctx context.Context, input engines.RuntimeInput) error {
	if !uuidPattern.MatchString(input.InputID) {
		return &engines.RuntimeInputRefused{Code: "invalid_input_id",
			Message: fmt.Sprintf("Claude Code identifies messages by uuid; %q is not one", input.InputID)}
	}
	content, err := messageContent(input.Content)
	if err != nil {
		return err
	}
	if c.admissions.Holds(ctx, input.InputID) {
		return nil
	}
	line, err := json.Marshal(map[string]any{
		"type": "user", "uuid": input.InputID, "session_id": "", "parent_tool_use_id": nil,
		"message": map[string]any{"role": "user", "content": content},
	})
	if err != nil {
		return fmt.Errorf("encode claude input: %w", err)
	}
	if err := c.proc.WriteStdin(ctx, "input:"+input.InputID, append(line, '\n')); err != nil {
		return fmt.Errorf("submit to claude code: %w", err)
	}
	return nil
}

// messageContent builds Claude's user message content: a string for one text part,
// otherwise Anthropic content blocks.
func messageContent(parts []engines.InputContent) (any, error) {
	if len(parts) == 1 && parts[0].Type == engines.InputText {
		return parts[0].Text, nil
	}
	var blocks []map[string]any
	for _, p := range parts {
		switch p.Type {
		case engines.InputText:
			blocks = append(blocks, map[string]any{"type": "text", "text": p.Text})
		case engines.InputImage:
			src, err := imageSource(p)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, map[string]any{"type": "image", "source": src})
		default:
			return nil, &engines.RuntimeInputRefused{Code: "unsupported_content",
				Message: fmt.Sprintf("Claude Code does not take %s input parts", p.Type)}
		}
	}
	if len(blocks) == 0 {
		return nil, &engines.RuntimeInputRefused{Code: "empty_input", Message: "the input has no content"}
	}
	return blocks, nil
}

func imageSource(p engines.InputContent) (map[string]any, error) {
	if rest, ok := strings.CutPrefix(p.URL, "data:"); ok {
		meta, data, found := strings.Cut(rest, ",")
		mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
		if !found || !isBase64 {
			return nil, &engines.RuntimeInputRefused{Code: "unsupported_content", Message: "image data URLs must be base64"}
		}
		if _, err := base64.StdEncoding.DecodeString(data); err != nil {
			return nil, &engines.RuntimeInputRefused{Code: "unsupported_content", Message: "image data URL is not base64"}
		}
		return map[string]any{"type": "base64", "media_type": mediaType, "data": data}, nil
	}
	if strings.HasPrefix(p.URL, "https://") {
		return map[string]any{"type": "url", "url": p.URL}, nil
	}
	return nil, &engines.RuntimeInputRefused{Code: "unsupported_content", Message: "an image needs a data or https URL"}
}

// Answer implements engines.RuntimeClient: a control_response to can_use_tool, allow
// with the tool's input unchanged, or deny with the person's reason. Acceptance is
// reported when Claude's echo of the answer reaches the journal.
func (c *Client) Answer(ctx context.Context, interactionID string, answer engines.InteractionAnswer) error {
	st, err := c.State(ctx)
	if err != nil {
		return err
	}
	var open *engines.PendingInteraction
	for i := range st.PendingInteractions {
		if st.PendingInteractions[i].InteractionID == interactionID {
			open = &st.PendingInteractions[i]
		}
	}
	if open == nil {
		for _, r := range st.ClosedInteractions {
			if r.InteractionID == interactionID && r.Reason == engines.ClosureAnswered {
				return nil // Claude already accepted this answer.
			}
		}
		return &engines.InteractionNotOpen{InteractionID: interactionID}
	}
	if err := engines.ValidateInteractionAnswer(open.Contract, answer); err != nil {
		return fmt.Errorf("answer %s: %w", interactionID, err)
	}
	result := permissionResult{Behavior: "deny", Message: answer.Reason}
	if answer.Decision == engines.DecisionApprove {
		result = permissionResult{Behavior: "allow", UpdatedInput: open.Contract.Tool.Input}
	} else if result.Message == "" {
		result.Message = "The person denied this tool call."
	}
	payload, _ := json.Marshal(result)
	line, _ := json.Marshal(map[string]any{"type": "control_response", "response": controlResponse{
		Subtype: "success", RequestID: interactionID, Response: payload}})
	if err := c.proc.WriteStdin(ctx, "answer:"+interactionID, append(line, '\n')); err != nil {
		return fmt.Errorf("answer %s: %w", interactionID, err)
	}
	return nil
}

// Interrupt implements engines.RuntimeClient with Claude's interrupt control request.
func (c *Client) Interrupt(ctx context.Context, cancelQueued bool) error {
	req := map[string]any{"subtype": subtypeInterrupt}
	if cancelQueued {
		req["cancel_queued"] = true
	}
	if _, err := c.control(ctx, req); err != nil {
		return fmt.Errorf("interrupt claude code: %w", err)
	}
	return nil
}

// SetPermissionMode implements engines.PermissionModeSetter with Claude's
// set_permission_mode control request, in Claude's own mode names.
func (c *Client) SetPermissionMode(ctx context.Context, mode string) error {
	if !slices.Contains(c.caps.PermissionModes, mode) {
		return &engines.RuntimeControlRefused{Control: engines.ControlSetPermissionMode, Code: "invalid_mode",
			Message: fmt.Sprintf("%q is not a Claude Code permission mode", mode)}
	}
	if _, err := c.control(ctx, map[string]any{"subtype": subtypeSetPermissionMode, "mode": mode}); err != nil {
		return fmt.Errorf("set claude code permission mode %s: %w", mode, err)
	}
	return nil
}

// ServerInfo implements engines.ServerInfoProvider: the version Claude Code reported
// in its initialize response.
func (c *Client) ServerInfo(ctx context.Context) (engines.ServerInfo, error) {
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	comp := engines.UnknownComponent("claude_code", "initialize control response", "Claude Code has not answered initialize on this process")
	if version != "" {
		comp = engines.KnownComponent("claude_code", version, "initialize control response")
	}
	return engines.ServerInfo{RuntimeVersions: &engines.RuntimeVersions{
		RuntimeGeneration: c.generation, Components: []engines.RuntimeComponent{comp}}}, nil
}

// initialize sends Claude's initialize control request and keeps the version it reports.
func (c *Client) initialize(ctx context.Context) error {
	resp, err := c.control(ctx, map[string]any{"subtype": subtypeInitialize, "hooks": nil})
	if err != nil {
		return fmt.Errorf("initialize claude code: %w", err)
	}
	var info struct {
		Version string `json:"claude_code_version"`
	}
	_ = json.Unmarshal(resp, &info)
	c.mu.Lock()
	c.version = info.Version
	c.mu.Unlock()
	return nil
}

// control sends a control request and waits for Claude's control_response to it.
func (c *Client) control(ctx context.Context, request map[string]any) (json.RawMessage, error) {
	id := "astrabox-" + randomHex(8)
	raw, _ := json.Marshal(request)
	line, _ := json.Marshal(map[string]any{"type": "control_request", "request_id": id, "request": json.RawMessage(raw)})
	// The answer comes after the request, so it is searched for from the end of what
	// was journalled before it: a client new to a running process has read nothing yet,
	// and the start of its journal may have been freed.
	from := c.tail.Load()
	if committer, ok := c.proc.(OutputCommitter); ok {
		end, err := committer.OutputEnd(ctx)
		if err != nil {
			return nil, err
		}
		from = max(from, end)
	}
	if err := c.proc.WriteStdin(ctx, id, append(line, '\n')); err != nil {
		return nil, err
	}
	for out, err := range c.proc.ReadOutput(ctx, from, true) {
		if err != nil {
			return nil, err
		}
		var n nativeLine
		if out.Stream != engines.Stdout || json.Unmarshal(out.Data, &n) != nil || n.Type != "control_response" {
			continue
		}
		var resp controlResponse
		if json.Unmarshal(n.Response, &resp) != nil || resp.RequestID != id {
			continue
		}
		if resp.Subtype != "success" {
			// Claude's control names match the contract's (interrupt, set_permission_mode).
			subtype, _ := request["subtype"].(string)
			return nil, &engines.RuntimeControlRefused{Control: engines.Control(subtype), Code: resp.ErrorCode, Message: resp.Error}
		}
		return resp.Response, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("claude code exited before it answered")
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ProcessName is the name of the process session the client drives.
func (c *Client) ProcessName() string { return c.proc.Name() }
