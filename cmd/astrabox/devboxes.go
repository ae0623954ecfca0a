package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox/local"
	"github.com/astrabox/astrabox/store"
)

// stopBoxesTimeout bounds how long the dev stack's exit waits for its boxes to end.
const stopBoxesTimeout = 30 * time.Second

// reapOrphanBoxes runs when the dev stack starts, before its worker: the backend
// has just adopted the boxes a crashed (killed) dev stack left running. A box a
// live Session still has placed is kept, so its workflow, which survived in
// Temporal's database, reconnects to the runner that outlived the crash as after
// any worker restart. Every other box (a prewarmed one nobody claimed, one of a
// deleted Session) belongs to nobody and is destroyed.
func reapOrphanBoxes(ctx context.Context, st *store.Store, boxes *local.Backend, log *zap.Logger) error {
	placed, err := st.ListPlacedSandboxIDs(ctx)
	if err != nil {
		return fmt.Errorf("reap orphan boxes: %w", err)
	}
	held := make(map[string]bool, len(placed))
	for _, id := range placed {
		held[id] = true
	}
	reaped, err := boxes.Reap(ctx, func(id string) bool { return held[id] })
	if len(reaped) > 0 {
		log.Info("destroyed boxes no Session holds", zap.Strings("boxes", reaped))
	}
	if err != nil {
		return fmt.Errorf("reap orphan boxes: %w", err)
	}
	return nil
}

// stopBoxes destroys every box of the dev stack once its API and worker have
// stopped, so Ctrl-C leaves no process behind. A Session whose box was stopped
// finds it lost at the next start, and its next message resumes the
// conversation on a new box.
func stopBoxes(boxes *local.Backend, log *zap.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), stopBoxesTimeout)
	defer cancel()
	stopped, err := boxes.Reap(ctx, func(string) bool { return false })
	if len(stopped) > 0 {
		log.Info("stopped boxes", zap.Strings("boxes", stopped))
	}
	if err != nil {
		err = fmt.Errorf("stop boxes: %w", err)
	}
	if cerr := boxes.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close sandbox backend: %w", cerr))
	}
	return err
}
