// Package pubsub delivers PostgreSQL LISTEN/NOTIFY notifications to subscribers in
// the process over one dedicated pgx connection.
//
// A notification is a hint and Postgres is the truth: a subscriber re-reads the rows
// it follows after each notification and after each Dropped signal. Dropped fires when
// the connection is lost (notifications may be missed until it is back), once more
// after a reconnect when the subscription listens again, and when a notification was
// discarded because the subscriber fell behind: a subscriber never blocks the others,
// and with its queue full a further notification is dropped (its queued ones are
// older, so a consumer of payloads must re-read). Subscribe returns only once the
// channel is listened to, so "subscribe, then read the backlog" misses nothing.
package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// ErrClosed is returned by Subscribe on a closed Listener.
var ErrClosed = errors.New("pubsub listener closed")

// Notification is one NOTIFY received on a subscribed channel.
type Notification struct {
	Channel string
	Payload string
	// output is the payload parsed as an OutputNotice, once for all the subscribers
	// the notification reaches; nil in a Notification made elsewhere.
	output *sharedNotice
}

type sharedNotice struct {
	once   sync.Once
	notice OutputNotice
	err    error
}

// OutputNotice parses the payload of a SessionOutputChannel notification. The copies
// of one notification handed to every subscriber share one parse, and what they
// derive from it (OutputNotice.Derived): each of a Session's streams takes every
// notification, and the frames' JSON was parsed once per stream.
func (n Notification) OutputNotice() (OutputNotice, error) {
	if n.output == nil {
		return ParseOutputNotice(n.Payload)
	}
	n.output.once.Do(func() {
		n.output.notice, n.output.err = ParseOutputNotice(n.Payload)
		n.output.notice.derived = &derivedNotice{}
	})
	return n.output.notice, n.output.err
}

// Options tunes a Listener; the zero value is usable.
type Options struct {
	// ApplicationName is the connection's application_name; default "astrabox-listener".
	ApplicationName string
	// HealthInterval is how long the connection may stay silent before a ping checks
	// it; default 30 s.
	HealthInterval time.Duration
	// MaxBackoff caps the wait between reconnect attempts; default 5 s.
	MaxBackoff time.Duration
	// Buffer is each subscription's queue length; default 64.
	Buffer int
	// Linger is how long a channel stays listened to after its last subscriber
	// left; default 30 s. A client opens a stream per reply it follows, so a
	// Session's channel is left and taken again every turn: lingering spares the
	// UNLISTEN and LISTEN round trips, and the new subscriber's wait for them.
	Linger time.Duration
}

// Listener owns the LISTEN connection and fans notifications out to subscriptions.
type Listener struct {
	cfg    *pgx.ConnConfig
	opts   Options
	logger *zap.Logger

	mu   sync.Mutex
	subs map[string]map[*Subscription]struct{}
	// listening is the connection's LISTEN set (empty while it is down), and idle
	// when each of its channels without subscribers lost its last one.
	listening  map[string]bool
	idle       map[string]time.Time
	dirty      bool               // the LISTEN set must be synced with subs
	waitUntil  time.Time          // when the loop's current wait ends; zero when not waiting
	cancelWait context.CancelFunc // interrupts the loop's wait; nil when not waiting
	closed     bool

	stop context.CancelFunc
	done chan struct{}
}

// Subscription receives the notifications of one channel.
type Subscription struct {
	l         *Listener
	channel   string
	c         chan Notification
	dropped   chan struct{}
	ready     chan struct{}
	readyOnce sync.Once
	closeOnce sync.Once
	// lingering is when the channel's last subscriber had left, if it was lingering
	// when this subscription took it (zero otherwise): Abandon lets it linger on.
	lingering time.Time
}

// Start connects to the database at dsn and serves subscriptions until Close. The
// first connection must succeed; later losses are retried with backoff.
func Start(ctx context.Context, dsn string, logger *zap.Logger, opts Options) (*Listener, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pubsub: parse database url: %w", err)
	}
	if opts.ApplicationName == "" {
		opts.ApplicationName = "astrabox-listener"
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = 30 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 64
	}
	if opts.Linger <= 0 {
		opts.Linger = 30 * time.Second
	}
	cfg.RuntimeParams["application_name"] = opts.ApplicationName
	if logger == nil {
		logger = zap.NewNop()
	}
	l := &Listener{cfg: cfg, opts: opts, logger: logger.Named("pubsub"), subs: map[string]map[*Subscription]struct{}{},
		listening: map[string]bool{}, idle: map[string]time.Time{}, done: make(chan struct{})}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pubsub: connect: %w", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	l.stop = stop
	go l.run(runCtx, conn)
	return l, nil
}

// Subscribe listens to channel and returns once PostgreSQL delivers its notifications
// to this Listener (or ctx ends while the connection is down).
func (l *Listener) Subscribe(ctx context.Context, channel string) (*Subscription, error) {
	if err := validChannel(channel); err != nil {
		return nil, fmt.Errorf("pubsub: subscribe: %w", err)
	}
	sub := &Subscription{
		l:       l,
		channel: channel,
		c:       make(chan Notification, l.opts.Buffer),
		dropped: make(chan struct{}, 1),
		ready:   make(chan struct{}),
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	if l.subs[channel] == nil {
		l.subs[channel] = map[*Subscription]struct{}{}
	}
	l.subs[channel][sub] = struct{}{}
	sub.lingering = l.idle[channel]
	delete(l.idle, channel)
	if l.listening[channel] {
		// Listened to already (another subscriber's, or lingering): nothing to wait for.
		sub.markReady()
	} else {
		l.kickLocked()
	}
	l.mu.Unlock()

	select {
	case <-sub.ready:
		return sub, nil
	case <-ctx.Done():
		sub.Close()
		return nil, fmt.Errorf("pubsub: subscribe %s: %w", channel, ctx.Err())
	case <-l.done:
		sub.Close()
		return nil, ErrClosed
	}
}

// C delivers the channel's notifications; it is closed when the subscription or the
// Listener closes.
func (s *Subscription) C() <-chan Notification { return s.c }

// Dropped receives a signal when the connection was lost (notifications may have been
// missed), again when the subscription listens again, and when a notification was
// discarded for a full queue; re-read the truth from Postgres on each. Signals
// coalesce: one pending signal covers many.
func (s *Subscription) Dropped() <-chan struct{} { return s.dropped }

// Channel is the subscribed channel's name.
func (s *Subscription) Channel() string { return s.channel }

// Close ends the subscription; the channel is unlistened when no one else has
// needed it for Options.Linger.
func (s *Subscription) Close() { s.end(true) }

// Abandon ends the subscription as Close does, but its channel is unlistened at once
// when no one else needs it (or lingers on as it did before the subscription took
// it): for a subscription taken before its subscriber was known to be allowed it (a
// refused stream's), so no caller keeps channels listened to at will.
func (s *Subscription) Abandon() { s.end(false) }

func (s *Subscription) end(linger bool) {
	s.closeOnce.Do(func() {
		l := s.l
		l.mu.Lock()
		defer l.mu.Unlock()
		if set, ok := l.subs[s.channel]; ok {
			delete(set, s)
			if len(set) == 0 {
				delete(l.subs, s.channel)
				if l.listening[s.channel] {
					now := time.Now()
					switch {
					case linger:
					case !s.lingering.IsZero():
						now = s.lingering
					default:
						now = now.Add(-l.opts.Linger) // due now
					}
					l.idle[s.channel] = now
					if l.cancelWait != nil && now.Add(l.opts.Linger).Before(l.waitUntil) {
						l.kickLocked() // due before the loop would look again
					}
				}
			}
		}
		close(s.c)
	})
}

// Listening returns the channels the connection listens to now, lingering ones
// included, for diagnostics and tests.
func (l *Listener) Listening() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.listening))
	for channel := range l.listening {
		out = append(out, channel)
	}
	return out
}

// Close stops the Listener, closes its connection and every subscription's C.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.stop()
	<-l.done
	l.mu.Lock()
	var all []*Subscription
	for _, set := range l.subs {
		for sub := range set {
			all = append(all, sub)
		}
	}
	l.mu.Unlock()
	for _, sub := range all {
		sub.Close()
	}
	return nil
}

// kickLocked asks the loop to sync its LISTEN set now. Callers hold l.mu.
func (l *Listener) kickLocked() {
	l.dirty = true
	if l.cancelWait != nil {
		l.cancelWait()
	}
}

func (s *Subscription) signalDropped() {
	select {
	case s.dropped <- struct{}{}:
	default:
	}
}

func (s *Subscription) markReady() { s.readyOnce.Do(func() { close(s.ready) }) }
