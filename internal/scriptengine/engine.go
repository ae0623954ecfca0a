// Package scriptengine is an engine adapter for tests of the platform's orchestration:
// it drives the scriptagent program (a tiny scripted line-protocol Agent program) in a
// real box through engines.Box, and implements the whole runtime contract: admission
// at the program's own record, responses with their browser parts, a deterministic
// cursor over the in-box runner's journal, RuntimeCursorExpired for another box's
// cursor, and State folded from that journal. It stands in for a real Agent program
// until the Claude Code adapter lands; it is not a product engine.
package scriptengine

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/astrabox/astrabox/engines"
)

// Kind is the engine kind the adapter registers under.
const Kind = "scripted"

// ProcessName is the name of the program's process session in the box.
const ProcessName = "scriptagent"

// Adapter starts scriptagent at BinaryPath (a path inside the box).
type Adapter struct {
	BinaryPath string
}

var (
	_ engines.EngineAdapter   = (*Adapter)(nil)
	_ engines.RuntimeClient   = (*Client)(nil)
	_ engines.ChildRunStopper = (*Client)(nil)
)

// Capabilities implements engines.EngineAdapter.
func (a *Adapter) Capabilities() engines.EngineRuntimeCapabilities {
	return engines.EngineRuntimeCapabilities{
		EngineKind:              Kind,
		SupportedSessionKinds:   []engines.SessionKind{engines.SessionKindAgentChat},
		Workload:                engines.EngineWorkloadDeclaration{ConfigDirName: ".scriptagent", ConfigDirEnv: "SCRIPTAGENT_HOME", RequiredCommands: []string{a.BinaryPath}},
		ConversationPlacement:   engines.PlacementPerConversationAccount,
		Extensions:              engines.EngineExtensions{MCPTransports: []engines.MCPTransport{engines.MCPTransportStdio}},
		RequiresProcessSessions: true,
		SessionLog:              &engines.SessionLogDeclaration{PathPattern: engines.SessionLogKeyPlaceholder + ".jsonl"},
		SupportsChildRunStop:    true,
	}
}

// EngineClientType implements engines.EngineAdapter.
func (a *Adapter) EngineClientType() reflect.Type { return reflect.TypeFor[*Client]() }

// SandboxRequest implements engines.EngineAdapter.
func (a *Adapter) SandboxRequest() engines.EngineSandboxRequest {
	return engines.EngineSandboxRequest{
		ModelCredential:          engines.ModelCredentialDestination{APIKeyEnv: "SCRIPTAGENT_API_KEY"},
		WorkingDirectoryVariable: "SCRIPTAGENT_CWD",
	}
}

// StartupMaterialRequest implements engines.EngineAdapter.
func (a *Adapter) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return engines.EngineStartupMaterialRequest{}
}

// ActivateRuntime starts the program (or attaches to the one running under
// ProcessName) and connects a client. The conversation key is the resumed one on
// attach, else one derived from the Session.
func (a *Adapter) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	key := sc.ResumeSessionKey
	if key == "" {
		key = "conv-" + sc.SessionID
	}
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{
		Name:     ProcessName,
		Command:  []string{a.BinaryPath, "--conversation", key},
		Env:      map[string]string{"SCRIPTAGENT_HOME": configDir(sc.RuntimeIdentity)},
		Identity: sc.RuntimeIdentity,
	})
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("start scriptagent: %w", err)
	}
	c := &Client{proc: proc, key: key, sessionID: sc.SessionID, generation: box.ID() + "/" + ProcessName}
	c.live.Store(true)
	manifest, err := engines.InitializeRuntimeClient(ctx, c, a.Capabilities(), sc.ResumeSessionKey)
	if err != nil {
		return engines.SessionRuntime{}, err
	}
	return engines.SessionRuntime{EngineClient: c, EngineManifest: manifest}, nil
}

// TranscriptPath is where scriptagent keeps a conversation's native JSONL log (one
// entry per admitted input and one per completed response), under the runtime
// identity's home.
func TranscriptPath(id *engines.RuntimeIdentity, key string) string {
	return configDir(id) + "/" + key + ".jsonl"
}

func configDir(id *engines.RuntimeIdentity) string {
	home := "/tmp"
	if id != nil {
		home = id.HomeDir
	}
	return home + "/.scriptagent"
}

// Client is one connection to a running scriptagent.
type Client struct {
	proc       engines.ProcessSession
	key        string
	sessionID  string
	generation string
	live       atomic.Bool
	mu         sync.Mutex
	interrupts int
}

// position is the cursor position: after event Index of the journal line at Offset.
type position struct {
	Offset int64 `json:"offset"`
	Index  int   `json:"index"`
}

// EngineKind implements engines.RuntimeClient.
func (c *Client) EngineKind() string { return Kind }

// IsLive implements engines.RuntimeClient.
func (c *Client) IsLive() bool { return c.live.Load() }

// EngineSessionKey implements engines.RuntimeClient.
func (c *Client) EngineSessionKey() string { return c.key }

// RefusePrefix makes Submit decline an input whose text starts with it, as a runtime
// refusing an input would.
const RefusePrefix = "refuse:"

// Submit hands the program one input; the runner writes it once per input id.
func (c *Client) Submit(ctx context.Context, in engines.RuntimeInput) error {
	text := ""
	for _, part := range in.Content {
		text += part.Text
	}
	if strings.HasPrefix(text, RefusePrefix) {
		return &engines.RuntimeInputRefused{Code: "SCRIPT_REFUSED", Message: strings.TrimPrefix(text, RefusePrefix)}
	}
	line, _ := json.Marshal(map[string]string{"op": "submit", "input_id": in.InputID, "text": text})
	if err := c.proc.WriteStdin(ctx, "input-"+in.InputID, append(line, '\n')); err != nil {
		return fmt.Errorf("%w: submit: %w", engines.ErrRuntimeConnectionLost, err)
	}
	return nil
}

// Events reads the program's journal after the cursor and translates each line.
func (c *Client) Events(ctx context.Context, after *engines.RuntimeCursor) iter.Seq2[engines.Event, error] {
	return func(yield func(engines.Event, error) bool) {
		var from position
		skip := -1
		if after != nil {
			if after.Generation != c.generation {
				yield(nil, &engines.RuntimeCursorExpired{Cursor: *after, Reason: "cursor of another box or process"})
				return
			}
			if err := after.DecodePosition(&from); err != nil {
				yield(nil, &engines.RuntimeCursorExpired{Cursor: *after, Reason: err.Error()})
				return
			}
			skip = from.Index
		}
		for line, err := range c.proc.ReadOutput(ctx, from.Offset, true) {
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				c.live.Store(false)
				yield(nil, fmt.Errorf("%w: read output: %w", engines.ErrRuntimeConnectionLost, err))
				return
			}
			if line.Stream != engines.Stdout {
				continue
			}
			for i, ev := range c.translate(line) {
				if line.Offset == from.Offset && i <= skip {
					continue
				}
				if !yield(ev, nil) {
					return
				}
			}
		}
		if ctx.Err() == nil {
			c.live.Store(false)
			yield(nil, fmt.Errorf("%w: the program's output ended", engines.ErrRuntimeConnectionLost))
		}
	}
}

// State folds the whole journal into the program's account of itself. Its cursor is
// nil: the runner retains this generation's journal from its start, and a cursor
// expires only when it names another generation, whose reader has seen none of this
// one's events; continuing from the end would skip them.
func (c *Client) State(ctx context.Context) (engines.RuntimeState, error) {
	st := engines.RuntimeState{Status: engines.StatusIdle}
	open := map[string]engines.OpenResponse{}
	var order []string
	started := map[string]bool{}
	for line, err := range c.proc.ReadOutput(ctx, 0, false) {
		if err != nil {
			return engines.RuntimeState{}, fmt.Errorf("%w: read journal: %w", engines.ErrRuntimeConnectionLost, err)
		}
		if line.Stream != engines.Stdout {
			continue
		}
		for _, ev := range c.translate(line) {
			switch e := ev.(type) {
			case engines.InputAdmitted:
				st.AdmittedInputIDs = append(st.AdmittedInputIDs, e.InputID)
			case engines.ResponseStarted:
				open[e.ResponseID] = engines.OpenResponse{ResponseID: e.ResponseID, Origin: e.Origin, InputIDs: e.InputIDs}
				order = append(order, e.ResponseID)
				for _, id := range e.InputIDs {
					started[id] = true
				}
			case engines.ResponseEnded:
				delete(open, e.ResponseID)
			case engines.InteractionOpened:
				st.PendingInteractions = append(st.PendingInteractions, engines.PendingInteraction{ResponseID: e.ResponseID, InteractionID: e.InteractionID, Contract: e.Contract})
			case engines.InteractionClosed:
				st.PendingInteractions = slices.DeleteFunc(st.PendingInteractions, func(p engines.PendingInteraction) bool { return p.InteractionID == e.InteractionID })
				st.ClosedInteractions = append(st.ClosedInteractions, engines.ClosedInteraction{InteractionID: e.InteractionID, Reason: e.Reason})
			case engines.StatusChanged:
				st.Status = e.Status
			}
		}
	}
	for _, id := range order {
		if r, ok := open[id]; ok {
			st.OpenResponses = append(st.OpenResponses, r)
		}
	}
	for _, id := range st.AdmittedInputIDs {
		if !started[id] {
			st.QueuedInputIDs = append(st.QueuedInputIDs, id)
		}
	}
	return st, nil
}

// Answer passes an answer to the question scriptagent waits on. A redelivery returns
// nil when the journal holds the program's receipt; a question it does not wait on
// gives InteractionNotOpen.
func (c *Client) Answer(ctx context.Context, interactionID string, answer engines.InteractionAnswer) error {
	st, err := c.State(ctx)
	if err != nil {
		return err
	}
	for _, closed := range st.ClosedInteractions {
		if closed.InteractionID == interactionID && closed.Reason == engines.ClosureAnswered {
			return nil
		}
	}
	if !slices.ContainsFunc(st.PendingInteractions, func(p engines.PendingInteraction) bool { return p.InteractionID == interactionID }) {
		return &engines.InteractionNotOpen{InteractionID: interactionID}
	}
	line, _ := json.Marshal(map[string]string{"op": "answer", "interaction_id": interactionID, "decision": answer.Decision})
	if err := c.proc.WriteStdin(ctx, "answer-"+interactionID, append(line, '\n')); err != nil {
		return fmt.Errorf("%w: answer: %w", engines.ErrRuntimeConnectionLost, err)
	}
	return nil
}

// Interrupt stops the response in progress.
func (c *Client) Interrupt(ctx context.Context, cancelQueued bool) error {
	c.mu.Lock()
	c.interrupts++
	n := c.interrupts
	c.mu.Unlock()
	line, _ := json.Marshal(map[string]any{"op": "interrupt", "cancel_queued": cancelQueued})
	if err := c.proc.WriteStdin(ctx, fmt.Sprintf("interrupt-%s-%d", c.generation, n), append(line, '\n')); err != nil {
		return fmt.Errorf("%w: interrupt: %w", engines.ErrRuntimeConnectionLost, err)
	}
	return nil
}

// StopChildRun asks the program to stop the child agent with this control reference.
// A reference the journal shows no running child for gives ErrChildRunNotStoppable;
// the child's stopped status arrives as its own report.
func (c *Client) StopChildRun(ctx context.Context, controlRef string) error {
	running := false
	for line, err := range c.proc.ReadOutput(ctx, 0, false) {
		if err != nil {
			return fmt.Errorf("%w: read journal: %w", engines.ErrRuntimeConnectionLost, err)
		}
		var v vendorEvent
		if line.Stream != engines.Stdout || json.Unmarshal(line.Data, &v) != nil || v.Ev != "child" || v.ControlRef != controlRef {
			continue
		}
		running = v.Status == "running"
	}
	if !running {
		return fmt.Errorf("%w: no running child agent has control reference %q", engines.ErrChildRunNotStoppable, controlRef)
	}
	line, _ := json.Marshal(map[string]string{"op": "stop_child", "control_ref": controlRef})
	if err := c.proc.WriteStdin(ctx, "stop-child-"+controlRef, append(line, '\n')); err != nil {
		return fmt.Errorf("%w: stop child run: %w", engines.ErrRuntimeConnectionLost, err)
	}
	return nil
}

// Committed implements engines.RuntimeClient; the runner keeps the journal.
func (c *Client) Committed(context.Context, engines.RuntimeCursor) error { return nil }

// Capabilities implements engines.RuntimeClient.
func (c *Client) Capabilities(context.Context) (engines.EngineCapabilityManifest, error) {
	return engines.EngineCapabilityManifest{
		EngineKind:        Kind,
		PermissionModes:   []string{},
		InputContentTypes: []engines.InputContentType{engines.InputText},
		Controls:          []engines.Control{engines.ControlInterrupt, engines.ControlInterruptCancelQueued, engines.ControlStopChildRun},
	}, nil
}

// Close implements engines.RuntimeClient; the program keeps running.
func (c *Client) Close() error {
	c.live.Store(false)
	return nil
}
