// Package resignal owns the sweep that signals a Session's workflow again about the
// inputs it holds in custody. The API writes an input to PostgreSQL first and signals
// the workflow afterwards; while Temporal is unreachable that signal fails and is only
// logged. A Session with a live Relay still gets the input (the Relay follows the
// database's notices), but one without (box released, CREATING, or no workflow at all)
// would hold it until some later signal. PostgreSQL is the truth and the signal a
// hint, so the sweep re-sends the hint, with SignalWithStart, for every Session whose
// inputs are still pending a grace period after they were accepted.
package resignal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// Defaults for Options left zero.
const (
	// DefaultLimit bounds the Sessions one sweep signals; the oldest go first and the
	// rest follow on the next sweeps.
	DefaultLimit = 100
	// signalTimeout bounds one signal, so an unreachable frontend does not hold the
	// sweep beyond it; the next sweep tries again.
	signalTimeout = 10 * time.Second
)

// Store lists the Sessions whose inputs nobody picked up (store.Store).
type Store interface {
	ListSessionsWithUnclaimedInputs(ctx context.Context, acceptedBefore time.Time, limit int) ([]store.UnclaimedInputs, error)
}

// Signaler sends a signal to a Session's workflow, starting the workflow when it is
// not running (api.TemporalSignaler).
type Signaler interface {
	SignalSession(ctx context.Context, sessionID, signalName string, payload any) error
}

var _ Store = (*store.Store)(nil)

// Options configures a Sweeper.
type Options struct {
	Store    Store
	Signaler Signaler
	// Period is the time between sweeps.
	Period time.Duration
	// Grace is how long an input may stay pending before the sweep signals again: long
	// enough for the API's own signal and a live Relay to take it.
	Grace time.Duration
	// Limit bounds one sweep; zero is DefaultLimit.
	Limit int
	// Now is the clock; nil is time.Now.
	Now    func() time.Time
	Logger *zap.Logger
}

// Sweeper re-signals the workflows of Sessions holding unclaimed inputs. Every worker
// process runs one: a Session signalled twice re-reads its inputs twice, which is
// harmless, and no coordination is needed between workers.
type Sweeper struct {
	opts Options
}

// New validates opts and returns a Sweeper.
func New(opts Options) (*Sweeper, error) {
	switch {
	case opts.Store == nil || opts.Signaler == nil || opts.Logger == nil:
		return nil, errors.New("resignal: store, signaler and logger are required")
	case opts.Period <= 0 || opts.Grace <= 0:
		return nil, fmt.Errorf("resignal: period %s and grace %s must be positive", opts.Period, opts.Grace)
	}
	if opts.Limit <= 0 {
		opts.Limit = DefaultLimit
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Sweeper{opts: opts}, nil
}

// Run sweeps every Period until ctx is done. A failed sweep is logged and the next
// one tries again: the database or Temporal may be down for a while.
func (s *Sweeper) Run(ctx context.Context) error {
	tick := time.NewTicker(s.opts.Period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn("re-signal sweep failed", zap.Error(err))
		}
	}
}

// Sweep signals, once, every Session (up to Limit) holding an input pending for longer
// than Grace, and returns how many signals Temporal accepted. A failed signal is logged
// and the others are still sent; only a failed query is returned.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	held, err := s.opts.Store.ListSessionsWithUnclaimedInputs(ctx, s.opts.Now().Add(-s.opts.Grace), s.opts.Limit)
	if err != nil {
		return 0, fmt.Errorf("sweep unclaimed inputs: %w", err)
	}
	sent := 0
	for _, h := range held {
		log := s.opts.Logger.With(zap.String("session_id", h.SessionID), zap.String("input_id", h.OldestInputID),
			zap.Int("pending_inputs", h.Pending), zap.Time("accepted_at", h.OldestAcceptedAt))
		sctx, cancel := context.WithTimeout(ctx, signalTimeout)
		err := s.opts.Signaler.SignalSession(sctx, h.SessionID, workflows.SignalInputAccepted, workflows.InputAccepted{InputID: h.OldestInputID, Resent: true})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return sent, fmt.Errorf("sweep unclaimed inputs: %w", ctx.Err())
			}
			log.Warn("re-signal pending inputs", zap.Error(err))
			continue
		}
		log.Info("re-signalled pending inputs")
		sent++
	}
	return sent, nil
}
