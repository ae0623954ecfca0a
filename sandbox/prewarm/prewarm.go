// Package prewarm keeps pools of boxes ready before any Session asks for one:
// one pool per RuntimeProfile key, each filled in the background up to its size
// and refilled after every claim. It works over any backend through two
// functions (create and destroy), so every sandbox backend can offer Claim.
package prewarm

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox"
)

// Profile is one pool: Size ready boxes made from Spec.
type Profile struct {
	Key  string
	Spec sandbox.Spec
	Size int
}

// CreateFunc makes one ready box for a pool.
type CreateFunc func(ctx context.Context, key string, spec sandbox.Spec) (sandbox.Handle, error)

// DestroyFunc removes a box the pool no longer wants.
type DestroyFunc func(ctx context.Context, id string) error

// Pool holds ready boxes per profile key.
type Pool struct {
	create   CreateFunc
	destroy  DestroyFunc
	log      *zap.Logger
	profiles map[string]Profile

	mu      sync.Mutex
	ready   map[string][]sandbox.Handle
	changed chan struct{} // closed and replaced whenever a pool changes
	wake    map[string]chan struct{}
	cancel  context.CancelFunc
	// fillCtx is the fillers' context once Start ran; a profile Ensure adds later
	// gets its filler on it.
	fillCtx context.Context
	wg      sync.WaitGroup
}

// New returns a pool; Start fills it.
func New(profiles []Profile, create CreateFunc, destroy DestroyFunc, log *zap.Logger) *Pool {
	p := &Pool{create: create, destroy: destroy, log: log, profiles: map[string]Profile{},
		ready: map[string][]sandbox.Handle{}, changed: make(chan struct{}), wake: map[string]chan struct{}{}}
	for _, pr := range profiles {
		if pr.Size > 0 {
			p.profiles[pr.Key] = pr
			p.wake[pr.Key] = make(chan struct{}, 1)
		}
	}
	return p
}

// Start runs one filler per profile until Close.
func (p *Pool) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancel, p.fillCtx = cancel, ctx
	for key := range p.profiles {
		p.wg.Add(1)
		go p.fill(ctx, p.profiles[key])
	}
}

// Ensure adds the pool of a profile the pool does not know yet (one saved after the
// pool started) and starts filling it; it reports whether it added one. A known
// profile keeps the size and spec it started with.
func (p *Pool) Ensure(pr Profile) bool {
	if pr.Size <= 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.profiles[pr.Key]; ok {
		return false
	}
	p.profiles[pr.Key] = pr
	p.wake[pr.Key] = make(chan struct{}, 1)
	if p.fillCtx != nil && p.fillCtx.Err() == nil {
		p.wg.Add(1)
		go p.fill(p.fillCtx, pr)
	}
	return true
}

// fill keeps one profile's pool at its size, backing off after failures.
func (p *Pool) fill(ctx context.Context, pr Profile) {
	defer p.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		p.mu.Lock()
		missing := pr.Size - len(p.ready[pr.Key])
		p.mu.Unlock()
		if missing <= 0 {
			select {
			case <-ctx.Done():
				return
			case <-p.wakeOf(pr.Key):
				continue
			}
		}
		h, err := p.create(ctx, pr.Key, pr.Spec)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("prewarm: create box failed", zap.String("profile", pr.Key), zap.Error(err),
				zap.Duration("retry_in", backoff))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		p.mu.Lock()
		p.ready[pr.Key] = append(p.ready[pr.Key], h)
		p.notifyLocked()
		p.mu.Unlock()
	}
}

// wakeOf is the channel that wakes the key's filler.
func (p *Pool) wakeOf(key string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wake[key]
}

func (p *Pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Take removes a ready box from the key's pool and asks for a refill.
func (p *Pool) Take(key string) (sandbox.Handle, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	boxes := p.ready[key]
	if len(boxes) == 0 {
		return nil, false
	}
	h := boxes[0]
	p.ready[key] = boxes[1:]
	p.notifyLocked()
	select {
	case p.wake[key] <- struct{}{}:
	default:
	}
	return h, true
}

// Holds reports whether a box is waiting in a pool.
func (p *Pool) Holds(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, boxes := range p.ready {
		for _, h := range boxes {
			if h.ID() == id {
				return true
			}
		}
	}
	return false
}

// Drop removes a box from its pool (it died while waiting) and asks for a refill.
func (p *Pool) Drop(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, boxes := range p.ready {
		for i, h := range boxes {
			if h.ID() == id {
				p.ready[key] = append(boxes[:i:i], boxes[i+1:]...)
				p.notifyLocked()
				select {
				case p.wake[key] <- struct{}{}:
				default:
				}
				return
			}
		}
	}
}

// Ready is the number of boxes waiting in the key's pool.
func (p *Pool) Ready(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[key])
}

// Depths returns the number of boxes waiting in every pool, by key, including
// pools that are empty now.
func (p *Pool) Depths() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.profiles))
	for key := range p.profiles {
		out[key] = len(p.ready[key])
	}
	return out
}

// WaitReady blocks until the key's pool holds at least n boxes or ctx ends.
func (p *Pool) WaitReady(ctx context.Context, key string, n int) error {
	for {
		p.mu.Lock()
		have, changed := len(p.ready[key]), p.changed
		p.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Close stops the fillers and destroys the boxes still waiting: nobody owns them.
func (p *Pool) Close(ctx context.Context) error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	p.mu.Lock()
	var all []sandbox.Handle
	for key, boxes := range p.ready {
		all = append(all, boxes...)
		delete(p.ready, key)
	}
	p.mu.Unlock()
	var first error
	for _, h := range all {
		h.Close()
		if err := p.destroy(ctx, h.ID()); err != nil && first == nil {
			first = err
		}
	}
	return first
}
