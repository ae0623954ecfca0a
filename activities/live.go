package activities

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.temporal.io/sdk/temporal"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
)

// liveRuntime is one live runtime connection this process holds.
type liveRuntime struct {
	sessionID  string
	generation int64
	client     engines.RuntimeClient
	// handle is the box handle the client works through; it closes with the client.
	handle sandbox.Handle
	// box, caps and identity locate the engine's native log for mirroring.
	box      engines.Box
	caps     engines.EngineRuntimeCapabilities
	identity *engines.RuntimeIdentity

	// logs is how far each native log was mirrored over this connection.
	logs logMirror

	// deliverMu serialises hand-overs (the Deliver activity and the Relay's notices)
	// so inputs reach the runtime in accepted order.
	deliverMu sync.Mutex
	// handedThrough, under deliverMu, is a seq every input of the Session up to which
	// was handed to this runtime or needs no hand-over (admitted, failed): an input
	// notice of the next seq is handed over as it is, any other means a read of the
	// held inputs. 0 until a hand-over tells.
	handedThrough int64
	// tookBack says a reconciliation took back inputs this runtime had received, so
	// handedThrough no longer holds: the next hand-over reads the held inputs.
	tookBack atomic.Bool
	// records are the hand-overs whose delivery is still to be recorded.
	records deliveryRecords

	mu sync.Mutex
	// leaseGeneration is the reader lease of the Relay reading this runtime, 0 before
	// one runs; host activities that write parts fence them by it.
	leaseGeneration int64
	// relay is the Relay reading this runtime and how to end it; stoppedRelay is the
	// last Relay StopRelay named, which may reach this worker before the Relay
	// itself does.
	relay        runningRelay
	stoppedRelay string
}

// runningRelay is a Relay reading a live runtime, by its RelayRequest.RelayID.
type runningRelay struct {
	id   string
	stop context.CancelFunc
}

// beginRelay records the Relay id as reading this runtime, ended by stop. It
// reports false when StopRelay already named it: the Relay is not to run at all.
func (l *liveRuntime) beginRelay(id string, stop context.CancelFunc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id != "" && id == l.stoppedRelay {
		return false
	}
	l.relay = runningRelay{id: id, stop: stop}
	return true
}

// endRelay forgets the Relay id once it returns.
func (l *liveRuntime) endRelay(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.relay.id == id {
		l.relay = runningRelay{}
	}
}

// stopRelay ends the Relay id if it is reading this runtime, and keeps it from
// beginning if it has not yet. A later Relay, with another id, is left alone.
func (l *liveRuntime) stopRelay(id string) {
	if id == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stoppedRelay = id
	if l.relay.id == id && l.relay.stop != nil {
		l.relay.stop()
	}
}

// close closes the connection and the box handle; the runtime keeps running.
func (l *liveRuntime) close() {
	_ = l.client.Close()
	if l.handle != nil {
		_ = l.handle.Close()
	}
}

func (l *liveRuntime) lease() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaseGeneration
}

func (l *liveRuntime) setLease(g int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leaseGeneration = g
}

// liveRegistry holds this process's live runtime connections by Session. The
// workflow routes every activity that needs one to this process's host task queue.
type liveRegistry struct {
	mu sync.Mutex
	m  map[string]*liveRuntime
}

func newLiveRegistry() *liveRegistry { return &liveRegistry{m: map[string]*liveRuntime{}} }

// put installs a runtime and closes the one it replaces.
func (r *liveRegistry) put(l *liveRuntime) {
	r.mu.Lock()
	old := r.m[l.sessionID]
	r.m[l.sessionID] = l
	r.mu.Unlock()
	if old != nil && old != l {
		old.close()
	}
}

// get returns the live runtime of the Session's generation, or a NoLiveRuntime error.
func (r *liveRegistry) get(sessionID string, generation int64) (*liveRuntime, error) {
	r.mu.Lock()
	l := r.m[sessionID]
	r.mu.Unlock()
	if l == nil || l.generation != generation || !l.client.IsLive() {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no live runtime of generation %d for session %s on this worker", generation, sessionID),
			ErrTypeNoLiveRuntime, nil)
	}
	return l, nil
}

// lookup returns the Session's runtime held here, of any generation, or nil.
func (r *liveRegistry) lookup(sessionID string) *liveRuntime {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[sessionID]
}

// remove drops and closes l if it is still the Session's runtime.
func (r *liveRegistry) remove(l *liveRuntime) {
	r.mu.Lock()
	if r.m[l.sessionID] == l {
		delete(r.m, l.sessionID)
	}
	r.mu.Unlock()
	l.close()
}

// removeSession drops and closes whatever runtime the Session has here.
func (r *liveRegistry) removeSession(sessionID string) {
	r.mu.Lock()
	l := r.m[sessionID]
	delete(r.m, sessionID)
	r.mu.Unlock()
	if l != nil {
		l.close()
	}
}

func (r *liveRegistry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// Disconnect mirrors the engine's native log one last time, has a runtime_state_store
// engine save its native state (RuntimeStateSaver), and closes this process's
// connection to the Session's runtime, if any; the runtime itself keeps running. The
// workflow calls it before releasing the box (idle release, archive, delete), so what
// the program wrote since the last admission, such as a reply's tail, is in custody
// before the box goes. A failed mirror keeps the connection and fails the attempt, so
// the activity's retries try again before the workflow gives up and releases; a failed
// save fails it as RuntimeStateSaveRequired, on which the workflow keeps the box.
func (a *Activities) Disconnect(ctx context.Context, ref SessionRef) error {
	if l := a.live.lookup(ref.SessionID); l != nil && l.client.IsLive() {
		if err := a.mirrorSessionLog(ctx, l); err != nil {
			return fmt.Errorf("mirror session log before release: %w", err)
		}
		if err := saveRuntimeState(ctx, l); err != nil {
			// The box holds the only copy: the workflow keeps it and reconnects.
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("before release: %v", err), ErrTypeRuntimeStateSaveRequired, err)
		}
	}
	a.live.removeSession(ref.SessionID)
	return nil
}
