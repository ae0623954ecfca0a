package prewarm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox"
)

// fakeHandle is a box that only has an id; the pool never drives boxes.
type fakeHandle struct {
	sandbox.Handle
	id string
}

func (f *fakeHandle) ID() string   { return f.id }
func (f *fakeHandle) Close() error { return nil }

type fakeBackend struct {
	mu        sync.Mutex
	created   int
	destroyed []string
	failFirst int
}

func (f *fakeBackend) create(_ context.Context, key string, _ sandbox.Spec) (sandbox.Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created++
	if f.created <= f.failFirst {
		return nil, errors.New("image not ready")
	}
	return &fakeHandle{id: fmt.Sprintf("%s-%d", key, f.created)}, nil
}

func (f *fakeBackend) destroy(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyed = append(f.destroyed, id)
	return nil
}

func TestPoolFillsClaimsAndRefills(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fb := &fakeBackend{failFirst: 1}
	p := New([]Profile{{Key: "a", Size: 2}, {Key: "off", Size: 0}}, fb.create, fb.destroy, zap.NewNop())
	p.Start(ctx)
	require.NoError(t, p.WaitReady(ctx, "a", 2), "a failed create is retried")
	h, ok := p.Take("a")
	require.True(t, ok)
	require.False(t, p.Holds(h.ID()))
	_, ok = p.Take("off")
	require.False(t, ok)
	require.NoError(t, p.WaitReady(ctx, "a", 2), "refilled after the claim")
	waiting, _ := p.Take("a")
	p.Drop("a-999") // unknown ids are ignored
	require.NoError(t, p.WaitReady(ctx, "a", 2))
	require.NoError(t, p.Close(ctx))
	require.Len(t, fb.destroyed, 2, "unclaimed boxes are destroyed on close")
	require.NotContains(t, fb.destroyed, h.ID())
	require.NotContains(t, fb.destroyed, waiting.ID())
}

// TestEnsureAddsAPoolWhileThePoolRuns: a profile added after Start is filled like the
// others; a known one keeps its pool; a pool closed destroys the added pool's boxes.
func TestEnsureAddsAPoolWhileThePoolRuns(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fb := &fakeBackend{}
	p := New([]Profile{{Key: "a", Size: 1}}, fb.create, fb.destroy, zap.NewNop())
	p.Start(ctx)
	require.NoError(t, p.WaitReady(ctx, "a", 1))
	require.True(t, p.Ensure(Profile{Key: "later", Size: 2}))
	require.False(t, p.Ensure(Profile{Key: "later", Size: 5}), "a known pool keeps its size")
	require.False(t, p.Ensure(Profile{Key: "a", Size: 3}))
	require.False(t, p.Ensure(Profile{Key: "none", Size: 0}))
	require.NoError(t, p.WaitReady(ctx, "later", 2))
	h, ok := p.Take("later")
	require.True(t, ok)
	require.NoError(t, p.WaitReady(ctx, "later", 2), "refilled after the claim")
	require.NoError(t, p.Close(ctx))
	require.Len(t, fb.destroyed, 3)
	require.NotContains(t, fb.destroyed, h.ID())
}
