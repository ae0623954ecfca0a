package pi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/astrabox/astrabox/engines"
)

// Client is one connection to a Pi rpc process session running one conversation: it
// writes commands to Pi's stdin and translates the journal of its stdout into runtime
// events.
type Client struct {
	box          engines.Box
	proc         engines.ProcessSession
	identity     *engines.RuntimeIdentity
	sessionKey   string
	generation   string
	caps         engines.EngineRuntimeCapabilities
	admissions   *engines.FileAdmissions
	pollInterval time.Duration
	version      string

	live atomic.Bool
	// tail is the newest journal offset any read has seen: responses to our commands
	// are searched for from there.
	tail atomic.Int64

	mu    sync.Mutex
	model string
	mode  string
}

var (
	_ engines.RuntimeClient        = (*Client)(nil)
	_ engines.PermissionModeSetter = (*Client)(nil)
	_ engines.ServerInfoProvider   = (*Client)(nil)
)

// ClientConfig is what a Client connects to.
type ClientConfig struct {
	// Box is the conversation's box and Process the Pi process session in it.
	Box     engines.Box
	Process engines.ProcessSession
	// Identity is the runtime identity files are read as (nil: the box account).
	Identity *engines.RuntimeIdentity
	// SessionKey is the engine session key the platform chose and SessionFile the
	// session JSONL Pi keeps the conversation in (--session).
	SessionKey  string
	SessionFile string
	// PermissionMode is the platform extension's mode Pi was started in.
	PermissionMode string
	// Model is the model Pi reported when it started; Version the pinned release.
	Model, Version string
	// Capabilities is the adapter's declaration.
	Capabilities engines.EngineRuntimeCapabilities
}

// NewClient connects to a running Pi.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Box == nil || cfg.Process == nil || cfg.SessionKey == "" || cfg.SessionFile == "" {
		return nil, errors.New("pi client: box, process, session key and session file are required")
	}
	c := &Client{
		box: cfg.Box, proc: cfg.Process, identity: cfg.Identity, sessionKey: cfg.SessionKey,
		generation: generationOf(cfg.Process.Name(), cfg.SessionKey), caps: cfg.Capabilities,
		admissions:   engines.NewFileAdmissions(cfg.Box, cfg.Identity, cfg.SessionFile, userMessageInput),
		pollInterval: 100 * time.Millisecond, version: cfg.Version, model: cfg.Model, mode: cfg.PermissionMode,
	}
	c.live.Store(true)
	return c, nil
}

// EngineKind implements engines.RuntimeClient.
func (c *Client) EngineKind() string { return EngineKind }

// IsLive implements engines.RuntimeClient.
func (c *Client) IsLive() bool { return c.live.Load() }

// EngineSessionKey implements engines.RuntimeClient: the key the platform chose, which
// names the session file.
func (c *Client) EngineSessionKey() string { return c.sessionKey }

// Generation is the cursor generation of this process session.
func (c *Client) Generation() string { return c.generation }

// SessionFile is the conversation's session JSONL in the box.
func (c *Client) SessionFile() string { return c.admissions.Path() }

// ProcessName is the name of the process session the client drives.
func (c *Client) ProcessName() string { return c.proc.Name() }

// ModelName implements engines.ModelReporter: the model of the newest assistant
// message this client has translated, or the one Pi reported at start.
func (c *Client) ModelName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.model
}

// noteModel keeps the model a translated assistant message names, for ModelName.
func (c *Client) noteModel(model string) {
	if model == "" {
		return
	}
	c.mu.Lock()
	c.model = model
	c.mu.Unlock()
}

// Close implements engines.RuntimeClient. Pi keeps running.
func (c *Client) Close() error {
	c.live.Store(false)
	return nil
}

// Capabilities implements engines.RuntimeClient. A message sent while Pi works is a
// steering message of the running run; an interrupt does not drop Pi's queue.
func (c *Client) Capabilities(context.Context) (engines.EngineCapabilityManifest, error) {
	return engines.EngineCapabilityManifest{
		EngineKind:        EngineKind,
		PermissionModes:   append([]string{}, c.caps.PermissionModes...),
		InputContentTypes: []engines.InputContentType{engines.InputText, engines.InputImage},
		Controls:          []engines.Control{engines.ControlInterrupt, engines.ControlSetPermissionMode},
	}, nil
}

// Committed implements engines.RuntimeClient: the journal stays whole.
func (c *Client) Committed(context.Context, engines.RuntimeCursor) error { return nil }

// Events implements engines.RuntimeClient: the translated journal after the cursor,
// following Pi's output until ctx ends or the process exits.
func (c *Client) Events(ctx context.Context, after *engines.RuntimeCursor) iter.Seq2[engines.Event, error] {
	return func(yield func(engines.Event, error) bool) {
		var pos position
		if after != nil {
			p, err := decodeCursor(c.generation, *after)
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
	tr := &translator{st: pos.State.clone(), process: c.proc.Name(),
		admitted: func(id string) bool { return c.admissions.Holds(ctx, id) }}
	return engines.ReplayJournal(ctx, engines.JournalReplay{
		Process: c.proc, Generation: c.generation, Program: "pi rpc", PollInterval: c.pollInterval,
		Seen: func(offset int64) {
			if offset > c.tail.Load() {
				c.tail.Store(offset)
			}
		},
		Ended: func() { c.live.Store(false) },
	}, tr, pos, follow, func(ev engines.Event, err error) bool {
		c.noteModel(tr.st.Model)
		return yield(ev, err)
	})
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

// State implements engines.RuntimeClient: Pi's account of itself, read by translating
// its whole journal, with every input the session file durably holds.
func (c *Client) State(ctx context.Context) (engines.RuntimeState, error) {
	st, next, err := c.translated(ctx)
	if err != nil {
		return engines.RuntimeState{}, fmt.Errorf("pi state: %w", err)
	}
	rs := st.runtimeState()
	rs.AdmittedInputIDs = c.admissions.All(ctx)
	if next > 0 {
		stateJSON, _ := json.Marshal(st)
		cur := cursorAt(c.generation, next, 0, stateJSON)
		rs.Cursor = &cur
	}
	return rs, nil
}

// Submit implements engines.RuntimeClient with Pi's prompt command, streamingBehavior
// steer: while Pi is idle it starts a run, while Pi works it is a steering message
// delivered within the running run. The input id is the command's id behind a prefix,
// so Pi's response names the input, and the text starts with the input id marker, so
// the user message Pi delivers names it too (in its event and the session file). The
// write is idempotent by input id, and an input the session file already holds is not
// sent again.
func (c *Client) Submit(ctx context.Context, input engines.RuntimeInput) error {
	if input.InputID == "" {
		return &engines.RuntimeInputRefused{Code: "invalid_input_id", Message: "the input has no id"}
	}
	text, images, err := promptContent(input.Content)
	if err != nil {
		return err
	}
	if c.admissions.Holds(ctx, input.InputID) {
		return nil
	}
	id := requestIDPrefixInput + input.InputID
	cmd := map[string]any{"id": id, "type": cmdPrompt, "message": InputMarker(input.InputID) + text, "streamingBehavior": streamingBehaviorSteer}
	if len(images) > 0 {
		cmd["images"] = images
	}
	if err := c.write(ctx, id, cmd); err != nil {
		return fmt.Errorf("submit to pi: %w", err)
	}
	return nil
}

// promptContent builds Pi's prompt text and images. A text starting with "/" would be
// run as a Pi command, skill or prompt template, which a person's message must not
// be: it is refused.
func promptContent(parts []engines.InputContent) (string, []map[string]any, error) {
	var texts []string
	var images []map[string]any
	for _, p := range parts {
		switch p.Type {
		case engines.InputText:
			texts = append(texts, p.Text)
		case engines.InputImage:
			mediaType, data, ok := dataURL(p.URL)
			if !ok {
				return "", nil, &engines.RuntimeInputRefused{Code: "unsupported_content", Message: "Pi takes images as base64 data URLs only"}
			}
			images = append(images, map[string]any{"type": "image", "data": data, "mimeType": mediaType})
		default:
			return "", nil, &engines.RuntimeInputRefused{Code: "unsupported_content",
				Message: fmt.Sprintf("Pi does not take %s input parts", p.Type)}
		}
	}
	text := strings.Join(texts, "\n\n")
	if text == "" && len(images) == 0 {
		return "", nil, &engines.RuntimeInputRefused{Code: "empty_input", Message: "the input has no content"}
	}
	if strings.HasPrefix(strings.TrimSpace(text), "/") {
		return "", nil, &engines.RuntimeInputRefused{Code: "unsupported_content",
			Message: "Pi runs a message starting with / as a command; start it with another character"}
	}
	return text, images, nil
}

// dataURL splits data:<media type>;base64,<data>.
func dataURL(u string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	head, data, ok := strings.Cut(rest, ",")
	mediaType, isBase64 := strings.CutSuffix(head, ";base64")
	if !ok || !isBase64 || mediaType == "" {
		return "", "", false
	}
	return mediaType, data, true
}

// Answer implements engines.RuntimeClient: the reply to the extension's question,
// Allow or Deny. The extension confirms with its status line.
func (c *Client) Answer(ctx context.Context, interactionID string, answer engines.InteractionAnswer) error {
	st, _, err := c.translated(ctx)
	if err != nil {
		return fmt.Errorf("answer %s: %w", interactionID, err)
	}
	i := slices.IndexFunc(st.Open, func(o openInteraction) bool { return o.ID == interactionID })
	if i < 0 {
		for _, r := range st.Closed {
			if r.InteractionID == interactionID && r.Reason == engines.ClosureAnswered {
				return nil // Pi already took this answer.
			}
		}
		return &engines.InteractionNotOpen{InteractionID: interactionID}
	}
	open := st.Open[i]
	if err := engines.ValidateInteractionAnswer(open.Contract, answer); err != nil {
		return fmt.Errorf("answer %s: %w", interactionID, err)
	}
	value := optionDeny
	if answer.Decision == engines.DecisionApprove {
		value = optionAllow
	}
	reply := map[string]any{"type": cmdExtensionUIResponse, "id": open.RequestID, "value": value}
	if err := c.write(ctx, "answer:"+interactionID, reply); err != nil {
		return fmt.Errorf("answer %s: %w", interactionID, err)
	}
	return nil
}

// Interrupt implements engines.RuntimeClient with Pi's abort. Pi answers it only
// after agent_end, so the client does not wait. Steering messages Pi holds stay
// queued: Pi has no command that drops them.
func (c *Client) Interrupt(ctx context.Context, _ bool) error {
	st, _, err := c.translated(ctx)
	if err != nil {
		return fmt.Errorf("interrupt pi: %w", err)
	}
	if st.Resp == nil {
		return nil
	}
	id := "abort:" + st.Resp.ID + ":" + randomHex(4)
	if err := c.write(ctx, id, map[string]any{"id": id, "type": cmdAbort}); err != nil {
		return fmt.Errorf("interrupt pi: %w", err)
	}
	return nil
}

// SetPermissionMode implements engines.PermissionModeSetter: the platform extension's
// command, which Pi runs at once, also while it works.
func (c *Client) SetPermissionMode(ctx context.Context, mode string) error {
	if !slices.Contains(c.caps.PermissionModes, mode) {
		return fmt.Errorf("set permission mode: %q is not a mode of the AstraBox Pi extension (%s)", mode, strings.Join(c.caps.PermissionModes, ", "))
	}
	id := "mode:" + mode + ":" + randomHex(4)
	if _, err := call(ctx, c.proc, c.tail.Load(), id, map[string]any{"id": id, "type": cmdPrompt,
		"message": PermissionModeCommand + " " + mode, "streamingBehavior": streamingBehaviorSteer}); err != nil {
		return fmt.Errorf("set permission mode: %w", err)
	}
	c.mu.Lock()
	c.mode = mode
	c.mu.Unlock()
	return nil
}

// ServerInfo implements engines.ServerInfoProvider: Pi reports no version over rpc,
// so the version is the pinned release the platform runs.
func (c *Client) ServerInfo(context.Context) (engines.ServerInfo, error) {
	comp := engines.UnknownComponent("pi", "adapter configuration", "no Pi version is configured")
	if c.version != "" {
		comp = engines.KnownComponent("pi", c.version, "adapter configuration (the release the platform runs)")
	}
	return engines.ServerInfo{RuntimeVersions: &engines.RuntimeVersions{
		RuntimeGeneration: c.generation, Components: []engines.RuntimeComponent{comp}}}, nil
}

// write sends one command, once per writeID.
func (c *Client) write(ctx context.Context, writeID string, msg any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode %s: %w", writeID, err)
	}
	return c.proc.WriteStdin(ctx, writeID, append(data, '\n'))
}

// call sends a command and waits for Pi's successful response to it, reading the
// journal from offset from.
func call(ctx context.Context, proc engines.ProcessSession, from int64, id string, cmd map[string]any) (json.RawMessage, error) {
	data, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", cmd["type"], err)
	}
	if err := proc.WriteStdin(ctx, id, append(data, '\n')); err != nil {
		return nil, err
	}
	var stderr []string
	for out, err := range proc.ReadOutput(ctx, from, true) {
		if err != nil {
			return nil, err
		}
		if out.Stream == engines.Stderr && len(stderr) < 5 {
			stderr = append(stderr, strings.TrimSpace(string(out.Data)))
		}
		var l line
		if out.Stream != engines.Stdout || json.Unmarshal(out.Data, &l) != nil || l.Type != evResponse || l.ID != id {
			continue
		}
		if l.Success == nil || !*l.Success {
			return nil, fmt.Errorf("pi refused %s: %s", cmd["type"], l.Error)
		}
		return l.Data, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(stderr) > 0 {
		return nil, fmt.Errorf("pi exited before it answered %s; it printed: %s", cmd["type"], strings.Join(stderr, " | "))
	}
	return nil, fmt.Errorf("pi exited before it answered %s", cmd["type"])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
