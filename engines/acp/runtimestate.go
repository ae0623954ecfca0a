package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/astrabox/astrabox/engines"
)

// stateBlobName is the name a profile's state files are saved under in the platform's
// runtime-state storage (one blob per Session).
const stateBlobName = "acp-state"

// stateBlob is the saved state: each state file's bytes by its name under the state
// folder. A file the program had not written is absent.
type stateBlob struct {
	Files map[string][]byte `json:"files"`
}

// stopTimeout bounds how long the program may take to exit after SIGTERM before the
// save kills it.
const stopTimeout = 20 * time.Second

// stateCustody is a client's hold on the platform's runtime-state storage for a
// profile that names state files.
type stateCustody struct {
	storage  engines.RuntimeStateStorage
	identity *engines.RuntimeIdentity
	box      engines.Box
	dir      string
	files    []string

	mu sync.Mutex
	// generation is the newest saved generation this client knows (0: none saved).
	generation int64
}

// restoreState learns the saved generation and, when the box lacks the program's
// state (a new box), writes the saved files back before the program starts.
func (a *Adapter) restoreState(ctx context.Context, sc engines.EngineStartupContext, box engines.Box, paths Paths) (*stateCustody, error) {
	p := a.cfg.Profile
	if len(p.StateFiles) == 0 {
		return nil, nil
	}
	cred, ok := sc.CallbackCredential(engines.CallbackRuntimeStateStorage)
	if !ok || cred.RuntimeState == nil {
		return nil, errors.New("no runtime-state storage was issued for the profile's state files")
	}
	custody := &stateCustody{storage: cred.RuntimeState, identity: sc.RuntimeIdentity, box: box, dir: paths.StateDir, files: p.StateFiles}
	data, generation, err := cred.RuntimeState.Load(ctx, stateBlobName)
	if errors.Is(err, engines.ErrNoRuntimeState) {
		return custody, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load the saved state: %w", err)
	}
	custody.generation = generation
	if _, err := box.ReadFile(ctx, sc.RuntimeIdentity, path.Join(paths.StateDir, p.StateFiles[0])); err == nil {
		return custody, nil // the box still holds the program's own state, newer than any save
	}
	var blob stateBlob
	if err := json.Unmarshal(data, &blob); err != nil {
		return nil, fmt.Errorf("read the saved state: %w", err)
	}
	for _, name := range p.StateFiles {
		if content, ok := blob.Files[name]; ok {
			if err := box.WriteFile(ctx, sc.RuntimeIdentity, path.Join(paths.StateDir, name), content, 0o600); err != nil {
				return nil, fmt.Errorf("restore %s: %w", name, err)
			}
		}
	}
	return custody, nil
}

// SaveRuntimeState implements engines.RuntimeStateSaver. For a profile with state
// files (opencode's SQLite database and its WAL) the program is stopped first, so the
// files are complete and no writer changes them while they are read; then they are
// saved. The platform calls it before it lets the box go; a later start in the same
// box starts the program again and reopens the session. Profiles without state files
// have nothing to save: their session log is mirrored by the platform.
func (c *Client) SaveRuntimeState(ctx context.Context) error {
	s := c.state
	if s == nil {
		return nil
	}
	if err := c.stop(ctx); err != nil {
		return fmt.Errorf("save %s state: %w", c.profile.Kind, err)
	}
	blob := stateBlob{Files: map[string][]byte{}}
	for _, name := range s.files {
		data, err := s.box.ReadFile(ctx, s.identity, path.Join(s.dir, name))
		if err != nil {
			continue // not written (a WAL after a clean shutdown)
		}
		blob.Files[name] = data
	}
	if len(blob.Files) == 0 {
		return nil
	}
	data, err := json.Marshal(blob)
	if err != nil {
		return fmt.Errorf("encode %s state: %w", c.profile.Kind, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	generation, err := s.storage.Save(ctx, stateBlobName, s.generation, data)
	if err != nil {
		return fmt.Errorf("save %s state: %w", c.profile.Kind, err)
	}
	s.generation = generation
	return nil
}

// stop ends the program: SIGTERM, then SIGKILL when it has not exited in time. It
// returns once the process has exited.
func (c *Client) stop(ctx context.Context) error {
	if st, err := c.proc.ExitStatus(ctx); err == nil && st != nil {
		return nil
	}
	if err := c.proc.Signal(ctx, "TERM"); err != nil {
		return fmt.Errorf("stop the program: %w", err)
	}
	if c.waitExit(ctx, stopTimeout) {
		return nil
	}
	if err := c.proc.Signal(ctx, "KILL"); err != nil {
		return fmt.Errorf("kill the program: %w", err)
	}
	if !c.waitExit(ctx, stopTimeout) {
		return errors.New("the program did not exit after SIGKILL")
	}
	return nil
}

// waitExit follows the program's output until it ends (the process exited) or the
// timeout passes.
func (c *Client) waitExit(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, err := range c.proc.ReadOutput(ctx, c.tail.Load(), true) {
		if err != nil {
			break
		}
	}
	st, err := c.proc.ExitStatus(context.WithoutCancel(ctx))
	if err == nil && st != nil {
		c.live.Store(false)
		return true
	}
	return false
}
