package claude

import (
	"cmp"
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

// Client is one connection to a Claude Code process session: it writes inputs,
// answers and control requests to Claude's stdin and translates the journal of its
// stdout into runtime events.
type Client struct {
	box           engines.Box
	proc          engines.ProcessSession
	identity      *engines.RuntimeIdentity
	sessionID     string // the AstraBox Session id
	claudeSession string
	generation    string
	caps          engines.EngineRuntimeCapabilities
	transcript    string
	// checkpointPath is where Committed saves the state before freeing output.
	checkpointPath string
	commitEvery    int64
	admissions     *engines.FileAdmissions
	// pollInterval spaces transcript checks while inputs wait for admission and Claude
	// prints nothing.
	pollInterval time.Duration

	live atomic.Bool
	// tail is the newest journal offset any read has seen: control responses are
	// searched for from there.
	tail atomic.Int64
	seq  atomic.Int64

	mu         sync.Mutex
	version    string
	checkpoint *checkpoint
	// model is the model the newest init message read named.
	model string
}

var (
	_ engines.RuntimeClient        = (*Client)(nil)
	_ engines.PermissionModeSetter = (*Client)(nil)
	_ engines.ModelReporter        = (*Client)(nil)
	_ engines.ServerInfoProvider   = (*Client)(nil)
)

// ClientConfig is what a Client connects to.
type ClientConfig struct {
	// Box is the conversation's box and Process the Claude Code process session in it.
	Box     engines.Box
	Process engines.ProcessSession
	// Identity is the runtime identity files are read as (nil: the box account).
	Identity *engines.RuntimeIdentity
	// SessionID is the AstraBox Session id; ClaudeSession is Claude's session id.
	SessionID     string
	ClaudeSession string
	// TranscriptPath is Claude's transcript file in the box (TranscriptPath).
	TranscriptPath string
	// CheckpointPath, when set, is where Committed saves the translation state before
	// a process session that implements OutputCommitter frees recorded output.
	CheckpointPath string
	// CommitEvery is how many lines a commit must advance before output is freed
	// (default 256).
	CommitEvery int64
	// Capabilities is the adapter's declaration.
	Capabilities engines.EngineRuntimeCapabilities
}

// NewClient connects to a running Claude Code process session.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Box == nil || cfg.Process == nil || cfg.ClaudeSession == "" || cfg.TranscriptPath == "" {
		return nil, errors.New("claude client: box, process, claude session and transcript path are required")
	}
	c := &Client{
		box: cfg.Box, proc: cfg.Process, identity: cfg.Identity, sessionID: cfg.SessionID,
		claudeSession: cfg.ClaudeSession, generation: generationOf(cfg.Process.Name(), cfg.ClaudeSession),
		caps: cfg.Capabilities, transcript: cfg.TranscriptPath, checkpointPath: cfg.CheckpointPath,
		commitEvery:  cmp.Or(cfg.CommitEvery, defaultCommitEvery),
		admissions:   engines.NewFileAdmissions(cfg.Box, cfg.Identity, cfg.TranscriptPath, admittedUUIDs),
		pollInterval: 100 * time.Millisecond,
	}
	c.live.Store(true)
	return c, nil
}

// EngineKind implements engines.RuntimeClient.
func (c *Client) EngineKind() string { return EngineKind }

// IsLive implements engines.RuntimeClient.
func (c *Client) IsLive() bool { return c.live.Load() }

// EngineSessionKey implements engines.RuntimeClient: Claude's session id.
func (c *Client) EngineSessionKey() string { return c.claudeSession }

// Generation is the cursor generation of this process session.
func (c *Client) Generation() string { return c.generation }

// Close implements engines.RuntimeClient. Claude Code keeps running.
func (c *Client) Close() error {
	c.live.Store(false)
	return nil
}

// Capabilities implements engines.RuntimeClient.
func (c *Client) Capabilities(context.Context) (engines.EngineCapabilityManifest, error) {
	return engines.EngineCapabilityManifest{
		EngineKind:        EngineKind,
		PermissionModes:   append([]string{}, c.caps.PermissionModes...),
		InputContentTypes: []engines.InputContentType{engines.InputText, engines.InputImage},
		Controls: []engines.Control{engines.ControlInterrupt, engines.ControlInterruptCancelQueued,
			engines.ControlSetPermissionMode},
	}, nil
}

// Events implements engines.RuntimeClient: the translated journal after the cursor,
// following Claude's output until ctx ends or the process exits.
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
		base, err := c.baseCheckpoint(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		if pos.Line < base.Line {
			cur := engines.RuntimeCursor{Generation: c.generation}
			if after != nil {
				cur = *after
			}
			yield(nil, &engines.RuntimeCursorExpired{Cursor: cur,
				Reason: fmt.Sprintf("journal lines before %d were freed after the platform recorded them", base.Line)})
			return
		}
		c.replay(ctx, pos, true, yield)
	}
}

// replay translates the journal from pos (engines.ReplayJournal), polling the
// vendor's record for pending admissions while it follows.
func (c *Client) replay(ctx context.Context, pos position, follow bool, yield func(engines.Event, error) bool) (transState, int64) {
	tr := &translator{sessionID: c.sessionID, st: pos.State.clone(), admitted: func(id string) bool { return c.admissions.Holds(ctx, id) }, model: c.setModel}
	return engines.ReplayJournal(ctx, engines.JournalReplay{
		Process: c.proc, Generation: c.generation, Program: "claude code process", PollInterval: c.pollInterval,
		Seen: func(offset int64) {
			if offset > c.tail.Load() {
				c.tail.Store(offset)
			}
		},
		Ended: func() { c.live.Store(false) },
	}, tr, pos, follow, yield)
}

// State implements engines.RuntimeClient: Claude's account of itself, read by
// translating its whole journal, with the inputs its transcript durably holds.
func (c *Client) State(ctx context.Context) (engines.RuntimeState, error) {
	base, err := c.baseCheckpoint(ctx)
	if err != nil {
		return engines.RuntimeState{}, fmt.Errorf("claude state: %w", err)
	}
	var failure error
	st, next := c.replay(ctx, position{Line: base.Line, State: base.State}, false, func(_ engines.Event, err error) bool {
		if err != nil {
			failure = err
			return false
		}
		return true
	})
	if failure != nil {
		return engines.RuntimeState{}, fmt.Errorf("claude state: %w", failure)
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

// ModelName implements engines.ModelReporter: the model Claude Code's newest init
// message named (it sends one at the start of each turn), "" before the first.
func (c *Client) ModelName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.model
}

func (c *Client) setModel(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.model = name
}
