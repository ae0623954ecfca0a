package acp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/astrabox/astrabox/engines"
)

// Client is one connection to an ACP program's process session running one ACP
// session: it writes JSON-RPC to the program's stdin and translates the journal of its
// stdout (which also holds what was sent, through stdin-echo) into runtime events.
type Client struct {
	profile    Profile
	caps       engines.EngineRuntimeCapabilities
	proc       engines.ProcessSession
	sessionID  string
	generation string
	respPrefix string
	// state holds the profile's state files in the platform's custody (nil: the
	// profile has none).
	state *stateCustody
	// log is the program's session log where prompts are found for admission
	// (admission session_log; nil otherwise).
	log *sessionLog

	live atomic.Bool
	// tail is the newest journal offset any read has seen: replies to the client's
	// requests are searched for from there.
	tail atomic.Int64
	// hold keeps the prompts of a program that refuses a prompt while busy.
	hold heldPrompts
}

var (
	_ engines.RuntimeClient        = (*Client)(nil)
	_ engines.PermissionModeSetter = (*Client)(nil)
	_ engines.RuntimeStateSaver    = (*Client)(nil)
)

// position is a cursor's position in the process's journal, with the translation state.
type position = engines.JournalPosition[transState]

func newClient(p Profile, caps engines.EngineRuntimeCapabilities, proc engines.ProcessSession, sessionID string) *Client {
	c := &Client{profile: p, caps: caps, proc: proc, sessionID: sessionID,
		generation: proc.Name() + "/" + sessionID, respPrefix: "resp_" + sessionID + ":" + launchTag(proc.Name())}
	c.live.Store(true)
	return c
}

// launchTag is the part of a process name that differs per launch.
func launchTag(processName string) string {
	return processName[strings.LastIndexByte(processName, '-')+1:]
}

// EngineKind implements engines.RuntimeClient.
func (c *Client) EngineKind() string { return c.profile.Kind }

// IsLive implements engines.RuntimeClient.
func (c *Client) IsLive() bool { return c.live.Load() }

// EngineSessionKey implements engines.RuntimeClient: the ACP session id.
func (c *Client) EngineSessionKey() string { return c.sessionID }

// ProcessName is the name of the process session the client drives.
func (c *Client) ProcessName() string { return c.proc.Name() }

// Generation is the cursor generation of this process session.
func (c *Client) Generation() string { return c.generation }

// Close implements engines.RuntimeClient. The program keeps running.
func (c *Client) Close() error {
	c.live.Store(false)
	return nil
}

// Capabilities implements engines.RuntimeClient.
func (c *Client) Capabilities(context.Context) (engines.EngineCapabilityManifest, error) {
	controls := []engines.Control{engines.ControlInterrupt}
	if len(c.caps.PermissionModes) > 0 {
		controls = append(controls, engines.ControlSetPermissionMode)
	}
	return engines.EngineCapabilityManifest{
		EngineKind:        c.profile.Kind,
		PermissionModes:   append([]string{}, c.caps.PermissionModes...),
		InputContentTypes: []engines.InputContentType{engines.InputText},
		Controls:          controls,
	}, nil
}

// Committed implements engines.RuntimeClient: the journal stays whole.
func (c *Client) Committed(context.Context, engines.RuntimeCursor) error { return nil }

func (c *Client) translator(st transState, answer bool) *translator {
	t := &translator{st: st, respPrefix: c.respPrefix, busy: c.profile.Busy, modeText: c.profile.ModeUpdateText}
	if c.log != nil {
		t.inLog = func(text string, from int, claimed []int) (int, bool) {
			return c.log.find(context.Background(), text, from, claimed)
		}
	}
	if answer {
		t.decline = func(id json.RawMessage, method string) {
			// Declared in initialize (no fs, no terminal): the program is told so
			// rather than left waiting. The write id makes every reader's decline one.
			_ = c.proc.WriteStdin(context.Background(), "decline:"+string(id),
				replyError(id, codeMethodNotFound, "AstraBox does not serve "+method+" (declared in initialize)"))
		}
	}
	return t
}

// Events implements engines.RuntimeClient: the translated journal after the cursor,
// following the program's output until ctx ends or the process exits.
func (c *Client) Events(ctx context.Context, after *engines.RuntimeCursor) iter.Seq2[engines.Event, error] {
	return func(yield func(engines.Event, error) bool) {
		var pos position
		if after != nil {
			p, err := engines.DecodeJournalCursor[transState](c.generation, *after, c.profile.Kind+" process")
			if err != nil {
				yield(nil, err)
				return
			}
			pos = p
		}
		c.replay(ctx, pos, true, yield)
	}
}

func (c *Client) replay(ctx context.Context, pos position, follow bool, yield func(engines.Event, error) bool) (transState, int64) {
	tr := c.translator(pos.State.clone(), follow)
	return engines.ReplayJournal(ctx, engines.JournalReplay{
		Process: c.proc, Generation: c.generation, Program: c.profile.Kind + " process", PollInterval: time.Second,
		Seen: func(offset int64) {
			if offset > c.tail.Load() {
				c.tail.Store(offset)
			}
		},
		Ended: func() { c.live.Store(false) },
	}, journalTranslator{tr}, pos, follow, yield)
}

// journalTranslator presents a translator to engines.ReplayJournal.
type journalTranslator struct{ t *translator }

func (j journalTranslator) State() transState                             { return j.t.st }
func (j journalTranslator) Apply(line engines.OutputLine) []engines.Event { return j.t.apply(line) }

// Poll reports the prompts the session log came to hold while the program printed
// nothing (admission session_log); otherwise admission is read from the journal itself.
func (j journalTranslator) Poll() []engines.Event {
	if j.t.inLog == nil {
		return nil
	}
	j.t.out = nil
	j.t.admitFromLog()
	return j.t.out
}

// translated is the translation state after the whole journal, and the offset after it.
func (c *Client) translated(ctx context.Context) (transState, int64, error) {
	var failure error
	st, next := c.replay(ctx, position{}, false, func(_ engines.Event, err error) bool {
		if err != nil {
			failure = err
			return false
		}
		return true
	})
	return st, next, failure
}

// State implements engines.RuntimeClient: the program's account of itself, read by
// translating its whole journal.
func (c *Client) State(ctx context.Context) (engines.RuntimeState, error) {
	st, next, err := c.translated(ctx)
	if err != nil {
		return engines.RuntimeState{}, fmt.Errorf("%s state: %w", c.profile.Kind, err)
	}
	rs := st.runtimeState()
	rs.QueuedInputIDs = append(rs.QueuedInputIDs, c.hold.ids()...)
	if next > 0 {
		stateJSON, _ := json.Marshal(st)
		cur := engines.JournalCursor(c.generation, next, 0, stateJSON)
		rs.Cursor = &cur
	}
	return rs, nil
}

// Submit implements engines.RuntimeClient: one session/prompt per input, whose request
// id carries the input id, written once per input id.
func (c *Client) Submit(ctx context.Context, input engines.RuntimeInput) error {
	if input.InputID == "" {
		return errors.New("acp submit: input id is required")
	}
	blocks := make([]map[string]any, 0, len(input.Content))
	for _, part := range input.Content {
		if part.Type != engines.InputText {
			return &engines.RuntimeInputRefused{Code: "unsupported_content",
				Message: fmt.Sprintf("%s takes text input only, not %s", c.profile.Kind, part.Type)}
		}
		blocks = append(blocks, map[string]any{"type": "text", "text": part.Text})
	}
	if !c.live.Load() {
		return fmt.Errorf("acp submit: %w", engines.ErrRuntimeConnectionLost)
	}
	params := map[string]any{"sessionId": c.sessionID, "prompt": blocks}
	if c.log != nil {
		// Where the prompt's user record can start: the lines the log holds now.
		params["_meta"] = map[string]any{metaLogLines: c.log.lineCount(ctx)}
	}
	line := request(idPrefixPrompt+input.InputID, methodSessionPrompt, params)
	if c.profile.Busy == BusyRefused {
		return c.submitWhenIdle(ctx, input.InputID, line)
	}
	if err := c.proc.WriteStdin(ctx, idPrefixPrompt+input.InputID, line); err != nil {
		return fmt.Errorf("acp submit %s: %w", input.InputID, err)
	}
	return nil
}

// Answer implements engines.RuntimeClient: the person's decision becomes the program's
// option of the matching kind.
func (c *Client) Answer(ctx context.Context, interactionID string, answer engines.InteractionAnswer) error {
	st, _, err := c.translated(ctx)
	if err != nil {
		return fmt.Errorf("acp answer: %w", err)
	}
	o, ok := st.interaction(interactionID)
	if !ok {
		if reason, closed := st.closedAs(interactionID); closed && reason == engines.ClosureAnswered {
			return nil
		}
		return fmt.Errorf("acp answer %s: %w", interactionID, engines.ErrInteractionNotOpen)
	}
	if err := engines.ValidateInteractionAnswer(o.Contract, answer); err != nil {
		return err
	}
	option, ok := chooseOption(o.Options, answer.Decision)
	if !ok {
		return fmt.Errorf("acp answer %s: the agent offered no option for %q", interactionID, answer.Decision)
	}
	line := reply(o.RequestID, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": option}})
	if err := c.proc.WriteStdin(ctx, "answer:"+interactionID, line); err != nil {
		return fmt.Errorf("acp answer %s: %w", interactionID, err)
	}
	return nil
}

// Interrupt implements engines.RuntimeClient: session/cancel, then every open permission
// request answered cancelled, as ACP requires (Gemini CLI waits for it).
func (c *Client) Interrupt(ctx context.Context, _ bool) error {
	st, _, err := c.translated(ctx)
	if err != nil {
		return fmt.Errorf("acp interrupt: %w", err)
	}
	if err := c.proc.WriteStdin(ctx, "cancel:"+randomHex(6), notification(methodSessionCancel, map[string]any{"sessionId": c.sessionID})); err != nil {
		return fmt.Errorf("acp interrupt: %w", err)
	}
	for _, o := range st.Open {
		line := reply(o.RequestID, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}})
		if err := c.proc.WriteStdin(ctx, "answer:"+o.ID, line); err != nil {
			return fmt.Errorf("acp interrupt: withdraw %s: %w", o.ID, err)
		}
	}
	return nil
}

// SetPermissionMode implements engines.PermissionModeSetter with session/set_mode in the
// program's own mode ids.
func (c *Client) SetPermissionMode(ctx context.Context, mode string) error {
	if !c.caps.HasPermissionMode(mode) {
		return fmt.Errorf("acp set mode: %q is not one of %v", mode, c.caps.PermissionModes)
	}
	_, err := call(ctx, c.proc, c.tail.Load(), idPrefixMode+mode+":"+randomHex(4), methodSessionSetMode,
		map[string]any{"sessionId": c.sessionID, "modeId": mode})
	if err != nil {
		return fmt.Errorf("acp set mode %s: %w", mode, err)
	}
	return nil
}

// call sends a request and waits in the journal for its reply.
func call(ctx context.Context, proc engines.ProcessSession, from int64, id, method string, params any) (json.RawMessage, error) {
	if err := proc.WriteStdin(ctx, id, request(id, method, params)); err != nil {
		return nil, err
	}
	want, _ := json.Marshal(id)
	var stderr []string
	for out, err := range proc.ReadOutput(ctx, from, true) {
		if err != nil {
			return nil, err
		}
		if out.Stream != engines.Stdout {
			stderr = append(stderr[max(0, len(stderr)-4):], string(out.Data))
			continue
		}
		jl, ok := parseJournalLine(out.Data)
		if !ok || jl.sent || !jl.msg.isReply() || string(jl.msg.ID) != string(want) {
			continue
		}
		if e := jl.msg.Error; e != nil {
			return nil, fmt.Errorf("the agent refused %s: %s (%d)", method, errorMessage(e), e.Code)
		}
		return jl.msg.Result, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("the agent exited before it answered %s (stderr: %q)", method, stderr)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var _ engines.ServerInfoProvider = (*Client)(nil)

// ServerInfo implements engines.ServerInfoProvider: the program's name and version as
// its initialize reply gives them (agentInfo), read from the journal.
func (c *Client) ServerInfo(ctx context.Context) (engines.ServerInfo, error) {
	const source = "initialize response agentInfo"
	want, _ := json.Marshal(idHandshake + methodInitialize)
	comp := engines.UnknownComponent(c.profile.Kind, source, "the program's initialize reply is not in this process's journal")
	for out, err := range c.proc.ReadOutput(ctx, 0, false) {
		if err != nil {
			return engines.ServerInfo{}, fmt.Errorf("%s server info: %w", c.profile.Kind, err)
		}
		jl, ok := parseJournalLine(out.Data)
		if out.Stream != engines.Stdout || !ok || jl.sent || !jl.msg.isReply() || string(jl.msg.ID) != string(want) {
			continue
		}
		var init acpsdk.InitializeResponse
		switch {
		case json.Unmarshal(jl.msg.Result, &init) != nil || init.AgentInfo == nil:
			comp = engines.UnknownComponent(c.profile.Kind, source, "the program's initialize reply names no agentInfo")
		case init.AgentInfo.Version == "":
			comp = engines.UnknownComponent(init.AgentInfo.Name, source, "the program reported no version")
		default:
			comp = engines.KnownComponent(init.AgentInfo.Name, init.AgentInfo.Version, source)
		}
		break
	}
	return engines.ServerInfo{RuntimeVersions: &engines.RuntimeVersions{
		RuntimeGeneration: c.generation, Components: []engines.RuntimeComponent{comp}}}, nil
}
