package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/astrabox/astrabox/engines"
)

// Client is one connection to a Codex app-server process session running one thread:
// it writes JSON-RPC requests and answers to the app-server's stdin and translates the
// journal of its stdout into runtime events.
type Client struct {
	box        engines.Box
	proc       engines.ProcessSession
	identity   *engines.RuntimeIdentity
	threadID   string
	generation string
	caps       engines.EngineRuntimeCapabilities
	admissions *engines.FileAdmissions
	// pollInterval spaces rollout checks while inputs wait for admission and Codex
	// prints nothing.
	pollInterval time.Duration

	live atomic.Bool
	// tail is the newest journal offset any read has seen: replies to our requests are
	// searched for from there.
	tail atomic.Int64

	mu             sync.Mutex
	version        string
	model          string
	approvalPolicy string
}

var (
	_ engines.RuntimeClient        = (*Client)(nil)
	_ engines.PermissionModeSetter = (*Client)(nil)
	_ engines.ServerInfoProvider   = (*Client)(nil)
	_ engines.ModelReporter        = (*Client)(nil)
)

// ClientConfig is what a Client connects to.
type ClientConfig struct {
	// Box is the conversation's box and Process the app-server process session in it.
	Box     engines.Box
	Process engines.ProcessSession
	// Identity is the runtime identity files are read as (nil: the box account).
	Identity *engines.RuntimeIdentity
	// ThreadID is Codex's thread id and RolloutPath the rollout file Codex keeps it in.
	ThreadID    string
	RolloutPath string
	// ApprovalPolicy is sent with every turn (a Codex approval policy; empty: Codex's
	// thread setting).
	ApprovalPolicy string
	// Capabilities is the adapter's declaration.
	Capabilities engines.EngineRuntimeCapabilities
}

// NewClient connects to a running app-server whose thread is started or resumed.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Box == nil || cfg.Process == nil || cfg.ThreadID == "" || cfg.RolloutPath == "" {
		return nil, errors.New("codex client: box, process, thread id and rollout path are required")
	}
	c := &Client{
		box: cfg.Box, proc: cfg.Process, identity: cfg.Identity, threadID: cfg.ThreadID,
		generation: generationOf(cfg.Process.Name(), cfg.ThreadID), caps: cfg.Capabilities,
		admissions:   engines.NewFileAdmissions(cfg.Box, cfg.Identity, cfg.RolloutPath, admittedClientID),
		pollInterval: 100 * time.Millisecond, approvalPolicy: cfg.ApprovalPolicy,
	}
	c.live.Store(true)
	return c, nil
}

// EngineKind implements engines.RuntimeClient.
func (c *Client) EngineKind() string { return EngineKind }

// IsLive implements engines.RuntimeClient.
func (c *Client) IsLive() bool { return c.live.Load() }

// EngineSessionKey implements engines.RuntimeClient: Codex's thread id.
func (c *Client) EngineSessionKey() string { return c.threadID }

// Generation is the cursor generation of this process session.
func (c *Client) Generation() string { return c.generation }

// RolloutPath is the thread's rollout file in the box.
func (c *Client) RolloutPath() string { return c.admissions.Path() }

// ModelName is the model Codex reported for the thread when it started or resumed it.
func (c *Client) ModelName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.model
}

// ProcessName is the name of the process session the client drives.
func (c *Client) ProcessName() string { return c.proc.Name() }

// Close implements engines.RuntimeClient. The app-server keeps running.
func (c *Client) Close() error {
	c.live.Store(false)
	return nil
}

// Capabilities implements engines.RuntimeClient. Codex has no queue an interrupt could
// drop: a message sent while a turn runs joins that turn.
func (c *Client) Capabilities(context.Context) (engines.EngineCapabilityManifest, error) {
	return engines.EngineCapabilityManifest{
		EngineKind:        EngineKind,
		PermissionModes:   append([]string{}, c.caps.PermissionModes...),
		InputContentTypes: []engines.InputContentType{engines.InputText, engines.InputImage},
		Controls:          []engines.Control{engines.ControlInterrupt, engines.ControlSetPermissionMode},
	}, nil
}

// Committed implements engines.RuntimeClient. The app-server's journal stays whole:
// nothing is freed, so there is nothing to release.
func (c *Client) Committed(context.Context, engines.RuntimeCursor) error { return nil }

// Events implements engines.RuntimeClient: the translated journal after the cursor,
// following the app-server's output until ctx ends or the process exits.
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

// replay translates the journal from pos (engines.ReplayJournal), polling the
// vendor's record for pending admissions while it follows.
func (c *Client) replay(ctx context.Context, pos position, follow bool, yield func(engines.Event, error) bool) (transState, int64) {
	tr := &translator{st: pos.State.clone(), admitted: func(id string) bool { return c.admissions.Holds(ctx, id) }}
	return engines.ReplayJournal(ctx, engines.JournalReplay{
		Process: c.proc, Generation: c.generation, Program: "codex app-server", PollInterval: c.pollInterval,
		Seen: func(offset int64) {
			if offset > c.tail.Load() {
				c.tail.Store(offset)
			}
		},
		Ended: func() { c.live.Store(false) },
	}, tr, pos, follow, yield)
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

// State implements engines.RuntimeClient: Codex's account of itself, read by
// translating its whole journal, with the inputs its rollout durably holds.
func (c *Client) State(ctx context.Context) (engines.RuntimeState, error) {
	st, next, err := c.translated(ctx)
	if err != nil {
		return engines.RuntimeState{}, fmt.Errorf("codex state: %w", err)
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
