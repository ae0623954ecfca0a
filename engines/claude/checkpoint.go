package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/astrabox/astrabox/engines"
)

// defaultCommitEvery is how many journal lines a commit must advance before the client
// checkpoints and lets the box free them: freeing is worth a file write only in bulk.
const defaultCommitEvery = 256

// OutputCommitter is implemented by a process session whose box can free journal
// lines the platform has recorded (the runner's CommitOutput). Reading from before the
// freed lines then fails, so such a box also says where its journal ends: a client
// that connects to a running process after lines were freed waits for the answer to a
// control request from there instead of from the start.
type OutputCommitter interface {
	CommitOutput(ctx context.Context, through int64) error
	// OutputEnd is the offset the next journalled line will have at least.
	OutputEnd(ctx context.Context) (int64, error)
}

// checkpoint is the translation state at a journal line, saved in the box before the
// lines before it are freed: State translates from it instead of from the start.
type checkpoint struct {
	Line  int64      `json:"line"`
	State transState `json:"state"`
}

// CheckpointPath is where the client keeps a process session's checkpoint: in Claude's
// configuration directory, which the conversation's account owns.
func CheckpointPath(configDir, processName string) string {
	return path.Join(configDir, "astrabox", processName+".checkpoint.json")
}

// Committed implements engines.RuntimeClient. When the box can free recorded output,
// every CommitEvery lines the client saves a checkpoint (the state before the committed
// line) and then frees the lines before it; otherwise the journal stays whole.
func (c *Client) Committed(ctx context.Context, cursor engines.RuntimeCursor) error {
	committer, ok := c.proc.(OutputCommitter)
	if !ok || c.checkpointPath == "" || cursor.Generation != c.generation {
		return nil
	}
	pos, err := decodeCursor(c.generation, cursor)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	base, err := c.loadCheckpointLocked(ctx)
	if err != nil {
		return err
	}
	if pos.Line-base.Line < c.commitEvery {
		return nil
	}
	cp := checkpoint{Line: pos.Line, State: pos.State}
	raw, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("encode claude checkpoint: %w", err)
	}
	if err := c.box.WriteFile(ctx, c.identity, c.checkpointPath, raw, 0o600); err != nil {
		return fmt.Errorf("save claude checkpoint: %w", err)
	}
	c.checkpoint = &cp
	if err := committer.CommitOutput(ctx, pos.Line-1); err != nil {
		return fmt.Errorf("free claude output through %d: %w", pos.Line-1, err)
	}
	return nil
}

// baseCheckpoint returns the newest checkpoint, or the start of the journal.
func (c *Client) baseCheckpoint(ctx context.Context) (checkpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loadCheckpointLocked(ctx)
}

func (c *Client) loadCheckpointLocked(ctx context.Context) (checkpoint, error) {
	if c.checkpoint != nil {
		return *c.checkpoint, nil
	}
	if c.checkpointPath == "" {
		return checkpoint{}, nil
	}
	raw, err := c.box.ReadFile(ctx, c.identity, c.checkpointPath)
	if err != nil {
		// No checkpoint yet: nothing was freed. A box that cannot read it at all
		// fails the same way on the journal, where the error is reported.
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return checkpoint{}, err
		}
		return checkpoint{}, nil
	}
	var cp checkpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		return checkpoint{}, fmt.Errorf("read claude checkpoint: %w", err)
	}
	c.checkpoint = &cp
	return cp, nil
}
