package codex

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// externalSandbox is the per-turn sandbox policy that tells Codex the box is the
// sandbox: commands run as the box's account without Codex's own bubblewrap, and the
// model is told network access is restricted. Codex keeps it only for the running
// app-server, so every turn carries it.
var externalSandbox = map[string]any{"type": "externalSandbox", "networkAccess": "restricted"}

// Submit implements engines.RuntimeClient with turn/start: the input id is Codex's
// clientUserMessageId and, behind a prefix, the request id, so Codex's reply, the
// userMessage item and the rollout line all name the input. While a turn runs Codex
// adds the message to it. The write is idempotent by input id, and an input the
// rollout already holds is not sent again.
func (c *Client) Submit(ctx context.Context, input engines.RuntimeInput) error {
	if input.InputID == "" {
		return &engines.RuntimeInputRefused{Code: "invalid_input_id", Message: "the input has no id"}
	}
	content, err := userInput(input.Content)
	if err != nil {
		return err
	}
	if c.admissions.Holds(ctx, input.InputID) {
		return nil
	}
	params := map[string]any{"threadId": c.threadID, "clientUserMessageId": input.InputID, "input": content,
		"sandboxPolicy": externalSandbox}
	c.mu.Lock()
	if c.approvalPolicy != "" {
		params["approvalPolicy"] = approvalPolicyParam(c.approvalPolicy)
	}
	c.mu.Unlock()
	id := requestIDPrefixInput + input.InputID
	if err := c.write(ctx, id, map[string]any{"id": id, "method": methodTurnStart, "params": params}); err != nil {
		return fmt.Errorf("submit to codex: %w", err)
	}
	return nil
}

// userInput builds Codex's UserInput items.
func userInput(parts []engines.InputContent) ([]map[string]any, error) {
	var items []map[string]any
	for _, p := range parts {
		switch p.Type {
		case engines.InputText:
			items = append(items, map[string]any{"type": "text", "text": p.Text, "text_elements": []any{}})
		case engines.InputImage:
			if !strings.HasPrefix(p.URL, "data:") && !strings.HasPrefix(p.URL, "https://") {
				return nil, &engines.RuntimeInputRefused{Code: "unsupported_content", Message: "an image needs a data or https URL"}
			}
			items = append(items, map[string]any{"type": "image", "url": p.URL})
		default:
			return nil, &engines.RuntimeInputRefused{Code: "unsupported_content",
				Message: fmt.Sprintf("Codex does not take %s input parts", p.Type)}
		}
	}
	if len(items) == 0 {
		return nil, &engines.RuntimeInputRefused{Code: "empty_input", Message: "the input has no content"}
	}
	return items, nil
}

// Answer implements engines.RuntimeClient: the reply to Codex's request in its own
// shape (requestReply): an approval's decision (approve: accept, deny: decline, or a
// declared option such as acceptForSession, unchanged), the answers to its questions,
// an MCP elicitation's action and content, a permissions grant. Codex confirms with
// serverRequest/resolved.
func (c *Client) Answer(ctx context.Context, interactionID string, answer engines.InteractionAnswer) error {
	st, _, err := c.translated(ctx)
	if err != nil {
		return fmt.Errorf("answer %s: %w", interactionID, err)
	}
	i := slices.IndexFunc(st.Open, func(o openInteraction) bool { return o.ID == interactionID })
	if i < 0 {
		for _, r := range st.Closed {
			if r.InteractionID == interactionID && r.Reason == engines.ClosureAnswered {
				return nil // Codex already took this answer.
			}
		}
		return &engines.InteractionNotOpen{InteractionID: interactionID}
	}
	open := st.Open[i]
	if err := engines.ValidateInteractionAnswer(open.Contract, answer); err != nil {
		return fmt.Errorf("answer %s: %w", interactionID, err)
	}
	result, err := requestReply(open, answer)
	if err != nil {
		return fmt.Errorf("answer %s: %w", interactionID, err)
	}
	reply := map[string]any{"id": open.RequestID, "result": result}
	if err := c.write(ctx, "answer:"+interactionID, reply); err != nil {
		return fmt.Errorf("answer %s: %w", interactionID, err)
	}
	return nil
}

// Interrupt implements engines.RuntimeClient with turn/interrupt on the running turn.
// Codex keeps no queue of inputs behind a turn, so cancelQueued has nothing to drop.
func (c *Client) Interrupt(ctx context.Context, _ bool) error {
	st, _, err := c.translated(ctx)
	if err != nil {
		return fmt.Errorf("interrupt codex: %w", err)
	}
	if st.Resp == nil {
		return nil
	}
	id := "interrupt:" + st.Resp.Turn + ":" + randomHex(4)
	if _, err := c.call(ctx, id, methodTurnInterrupt, map[string]any{"threadId": c.threadID, "turnId": st.Resp.Turn}); err != nil {
		return fmt.Errorf("interrupt codex: %w", err)
	}
	return nil
}

// SetPermissionMode implements engines.PermissionModeSetter: the mode is a Codex
// approval policy, sent with every following turn/start (Codex applies it from that
// turn on; a running turn keeps its policy).
func (c *Client) SetPermissionMode(_ context.Context, mode string) error {
	if !slices.Contains(c.caps.PermissionModes, mode) {
		return fmt.Errorf("set permission mode: %q is not a Codex approval policy", mode)
	}
	c.mu.Lock()
	c.approvalPolicy = mode
	c.mu.Unlock()
	return nil
}

// ServerInfo implements engines.ServerInfoProvider: the version in the user agent
// Codex answered initialize with.
func (c *Client) ServerInfo(context.Context) (engines.ServerInfo, error) {
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	comp := engines.UnknownComponent("codex", "initialize response userAgent", "this client did not initialize the app-server")
	if version != "" {
		comp = engines.KnownComponent("codex", version, "initialize response userAgent")
	}
	return engines.ServerInfo{RuntimeVersions: &engines.RuntimeVersions{
		RuntimeGeneration: c.generation, Components: []engines.RuntimeComponent{comp}}}, nil
}

// write sends one JSON-RPC message, once per writeID.
func (c *Client) write(ctx context.Context, writeID string, msg any) error {
	line, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode %s: %w", writeID, err)
	}
	return c.proc.WriteStdin(ctx, writeID, append(line, '\n'))
}

// call sends a request and waits for Codex's reply to it.
func (c *Client) call(ctx context.Context, id, method string, params any) (json.RawMessage, error) {
	return call(ctx, c.proc, c.tail.Load(), id, method, params)
}

// call sends a request to an app-server and waits for the reply, reading its journal
// from offset from.
func call(ctx context.Context, proc engines.ProcessSession, from int64, id, method string, params any) (json.RawMessage, error) {
	line, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", method, err)
	}
	if err := proc.WriteStdin(ctx, id, append(line, '\n')); err != nil {
		return nil, err
	}
	want, _ := json.Marshal(id)
	for out, err := range proc.ReadOutput(ctx, from, true) {
		if err != nil {
			return nil, err
		}
		var l rpcLine
		if out.Stream != engines.Stdout || json.Unmarshal(out.Data, &l) != nil || !l.isResponse() || string(l.ID) != string(want) {
			continue
		}
		if len(l.Error) > 0 && string(l.Error) != "null" {
			return nil, fmt.Errorf("codex refused %s: %s", method, l.Error)
		}
		return l.Result, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("codex app-server exited before it answered %s", method)
}

// clientVersion is the version AstraBox reports in initialize's clientInfo (Codex puts
// it in the user agent of its model requests).
const clientVersion = "1"

// threadInfo is what thread/start and thread/resume answer with.
type threadInfo struct {
	Thread struct {
		ID   string `json:"id"`
		Path string `json:"path"`
	} `json:"thread"`
	Model string `json:"model"`
}

// handshake initializes a new app-server and starts (resumeThread empty) or resumes a
// thread; it returns the thread and the version Codex reported. A new thread is named
// at once: Codex writes a thread's rollout only at its first turn, or when it is named,
// and a thread without a rollout cannot be resumed by another app-server, so a
// conversation that never got a message would be lost with its first app-server.
func handshake(ctx context.Context, proc engines.ProcessSession, threadParams map[string]any, resumeThread, name string) (threadInfo, string, error) {
	res, err := call(ctx, proc, 0, methodInitialize, methodInitialize, map[string]any{
		"clientInfo":   map[string]any{"name": "astrabox", "title": "AstraBox", "version": clientVersion},
		"capabilities": map[string]any{"experimentalApi": true},
	})
	if err != nil {
		return threadInfo{}, "", err
	}
	var init struct {
		UserAgent string `json:"userAgent"`
	}
	_ = json.Unmarshal(res, &init)
	line, _ := json.Marshal(map[string]any{"method": methodInitialized})
	if err := proc.WriteStdin(ctx, methodInitialized, append(line, '\n')); err != nil {
		return threadInfo{}, "", err
	}
	method := methodThreadStart
	if resumeThread != "" {
		method = methodThreadResume
		threadParams["threadId"] = resumeThread
		// The history is in the rollout; the client needs none of it on the wire.
		threadParams["excludeTurns"] = true
	}
	res, err = call(ctx, proc, 0, method, method, threadParams)
	if err != nil {
		return threadInfo{}, "", err
	}
	var info threadInfo
	if err := json.Unmarshal(res, &info); err != nil || info.Thread.ID == "" || info.Thread.Path == "" {
		return threadInfo{}, "", fmt.Errorf("codex answered %s without a thread id and rollout path: %s", method, res)
	}
	if resumeThread != "" && info.Thread.ID != resumeThread {
		return threadInfo{}, "", fmt.Errorf("codex resumed thread %s, not %s", info.Thread.ID, resumeThread)
	}
	if resumeThread == "" {
		if _, err := call(ctx, proc, 0, methodThreadNameSet, methodThreadNameSet, map[string]any{"threadId": info.Thread.ID, "name": name}); err != nil {
			return threadInfo{}, "", err
		}
	}
	return info, versionOf(init.UserAgent), nil
}

// versionOf reads Codex's version from its user agent, "<client>/<version> (…)".
func versionOf(userAgent string) string {
	_, rest, ok := strings.Cut(userAgent, "/")
	if !ok {
		return ""
	}
	version, _, _ := strings.Cut(rest, " ")
	return version
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
