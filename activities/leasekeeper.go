package activities

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/store"
)

// leaseKeeper renews the reader leases of a worker's Relays, all of them in one
// statement every HeartbeatEvery: a lease renewed by its own Relay costs a statement
// per Session every interval, busy or idle, two hundred a second for a worker holding
// a thousand idle Sessions. A lease is renewed only while its
// Relay's reading loop has gone round lately (within two intervals), so a stuck
// Relay's lease still runs out; a Relay whose lease was superseded, or whose renewal
// failed, is told on the channel hold gave it, and ends as it did when its own
// renewal failed. The keeper runs while it holds a lease: releasing the last one
// stops it.
type leaseKeeper struct {
	store *store.Store
	every time.Duration
	ttl   time.Duration
	log   *zap.Logger

	mu   sync.Mutex
	held map[store.LeaseRef]*heldLease
	// stop ends the running keeper; nil while none runs.
	stop chan struct{}
}

// heldLease is a Relay's lease as the keeper sees it.
type heldLease struct {
	// alive is when the Relay's reading loop last went round (unix nanoseconds).
	alive *atomic.Int64
	// lost receives the lease's loss or a renewal's failure; it holds one.
	lost chan error
}

func newLeaseKeeper(st *store.Store, set Settings, log *zap.Logger) *leaseKeeper {
	return &leaseKeeper{store: st, every: set.HeartbeatEvery, ttl: set.LeaseTTL, log: log, held: map[store.LeaseRef]*heldLease{}}
}

// hold renews ref from the keeper's next round on while alive is recent, until
// release. The channel says why the lease is no longer the Relay's.
func (k *leaseKeeper) hold(ref store.LeaseRef, alive *atomic.Int64) (lost <-chan error, release func()) {
	h := &heldLease{alive: alive, lost: make(chan error, 1)}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held[ref] = h
	if k.stop == nil {
		k.stop = make(chan struct{})
		go k.run(k.stop)
	}
	return h.lost, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.held[ref] == h {
			delete(k.held, ref)
		}
		if len(k.held) == 0 && k.stop != nil {
			close(k.stop)
			k.stop = nil
		}
	}
}

// run renews the held leases every interval until stop is closed.
func (k *leaseKeeper) run(stop <-chan struct{}) {
	tick := time.NewTicker(k.every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			k.renew(k.due())
		}
	}
}

// due returns the held leases whose Relays went round lately.
func (k *leaseKeeper) due() map[store.LeaseRef]*heldLease {
	k.mu.Lock()
	defer k.mu.Unlock()
	recent := time.Now().Add(-2 * k.every).UnixNano()
	due := make(map[store.LeaseRef]*heldLease, len(k.held))
	for ref, h := range k.held {
		if h.alive.Load() >= recent {
			due[ref] = h
		}
	}
	return due
}

// renew extends the due leases in one statement and tells each Relay whose lease was
// not extended. A renewal that takes longer than a lease lasts has failed.
func (k *leaseKeeper) renew(due map[store.LeaseRef]*heldLease) {
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.ttl)
	defer cancel()
	renewed, err := k.store.RenewReaderLeases(ctx, slices.Collect(maps.Keys(due)), k.ttl)
	if err != nil {
		k.log.Warn("renew reader leases", zap.Int("leases", len(due)), zap.Error(err))
		for _, h := range due {
			h.tell(fmt.Errorf("renew reader lease: %w", err))
		}
		return
	}
	for _, l := range renewed {
		delete(due, store.LeaseRef{SessionID: l.SessionID, Generation: l.Generation})
	}
	for ref, h := range due {
		h.tell(fmt.Errorf("renew reader lease of session %s generation %d: %w", ref.SessionID, ref.Generation, store.ErrLeaseLost))
	}
}

// tell passes the Relay the first reason its lease is lost; later ones are dropped.
func (h *heldLease) tell(err error) {
	select {
	case h.lost <- err:
	default:
	}
}
