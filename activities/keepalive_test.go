package activities_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// stallingBackend makes every box creation it is told to stall hang, its context
// ignored, as on a worker that died in the middle of it.
type stallingBackend struct {
	sandbox.Backend
	mu      sync.Mutex
	stall   bool
	stalled chan struct{}
	release chan struct{}
}

func (b *stallingBackend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	b.mu.Lock()
	stall := b.stall
	b.stall = false
	b.mu.Unlock()
	if stall {
		close(b.stalled)
		<-b.release
		return nil, context.Canceled
	}
	return b.Backend.Create(ctx, spec)
}

// Claim falls through to Create: no prewarmed boxes here.
func (b *stallingBackend) Claim(context.Context, string) (sandbox.Handle, error) {
	return nil, sandbox.ErrNoWarmBox
}

// TestAWorkerDeadInPrepareRuntimeIsNoticedByItsHeartbeat stops the worker while its
// PrepareRuntime is creating the Session's box and never lets that attempt answer: the
// attempt stops heartbeating, Temporal times it out after the setup heartbeat timeout
// (20 s) instead of its five-minute start-to-close, and the other worker prepares the
// box and answers the message. The test's deadline (well under five minutes) is what
// fails without the heartbeat.
func TestAWorkerDeadInPrepareRuntimeIsNoticedByItsHeartbeat(t *testing.T) {
	s := newStack(t)
	stalling := &stallingBackend{Backend: s.backend, stall: true, stalled: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(stalling.release) })
	s.workerBackend = stalling
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()
	in := s.send(id, "hello after a dead worker")
	select {
	case <-stalling.stalled:
	case <-s.ctx.Done():
		t.Fatal("PrepareRuntime never created a box")
	}
	stopA()
	s.startWorker("host-b-" + uniq())
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
	defer cancel()
	s.eventuallyWithin(ctx, "the message answered by the other worker", func() bool { return s.admittedAndIdle(id, in) && s.answerEnded(id, in) })
}
