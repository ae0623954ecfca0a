package pubsub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// run owns the connection: it serves it until it fails, reports the drop, reconnects.
func (l *Listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	reconnected := false
	for {
		err := l.serve(ctx, conn, reconnected)
		// Nothing is listened to until the next connection listens again.
		l.mu.Lock()
		clear(l.listening)
		clear(l.idle)
		l.mu.Unlock()
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.logger.Warn("listen connection lost; reconnecting", zap.Error(err))
		l.signalAllDropped()
		if conn = l.reconnect(ctx); conn == nil {
			return
		}
		reconnected = true
	}
}

// reconnect retries with exponential backoff until it connects or ctx ends.
func (l *Listener) reconnect(ctx context.Context) *pgx.Conn {
	delay := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		attemptCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := pgx.ConnectConfig(attemptCtx, l.cfg)
		cancel()
		if err == nil {
			l.logger.Info("listen connection restored", zap.Int("attempts", attempt))
			return conn
		}
		l.logger.Debug("listen reconnect failed", zap.Int("attempt", attempt), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, l.opts.MaxBackoff)
	}
}

// serve keeps conn's LISTEN set equal to the subscribed channels and those
// lingering after their last subscriber, and dispatches notifications until the
// connection fails or ctx ends.
func (l *Listener) serve(ctx context.Context, conn *pgx.Conn, reconnected bool) error {
	// The connection is pinged once it has been silent for HealthInterval: waits that
	// end early (a kick, a lingering channel due) do not put the ping off.
	healthDue := time.Now().Add(l.opts.HealthInterval)
	// A wake by a notification leaves the LISTEN set as it was: a new channel's
	// subscriber kicks the loop (dirty), a lingering channel falls due at the wait's
	// deadline, and a subscriber of a channel listened to already is ready at once. So
	// only other wakes sync the set and walk every subscription, which would otherwise
	// cost each notification a pass over all of them.
	needSync := true
	for {
		if needSync {
			if err := l.syncListens(ctx, conn); err != nil {
				return err
			}
			l.markListenedReady(reconnected)
			reconnected = false
		}
		l.mu.Lock()
		if l.dirty {
			l.mu.Unlock()
			needSync = true
			continue
		}
		until, health := healthDue, true
		if next, ok := l.nextUnlistenLocked(); ok && next.Before(until) {
			until, health = next, false
		}
		waitCtx, cancel := context.WithDeadline(ctx, until)
		l.cancelWait, l.waitUntil = cancel, until
		l.mu.Unlock()

		n, err := conn.WaitForNotification(waitCtx)
		timedOut := errors.Is(waitCtx.Err(), context.DeadlineExceeded)
		l.mu.Lock()
		l.cancelWait, l.waitUntil = nil, time.Time{}
		l.mu.Unlock()
		cancel()
		needSync = err != nil

		switch {
		case err == nil:
			healthDue = time.Now().Add(l.opts.HealthInterval)
			l.dispatch(Notification{Channel: n.Channel, Payload: n.Payload, output: &sharedNotice{}})
		case ctx.Err() != nil:
			return ctx.Err()
		case conn.IsClosed():
			return fmt.Errorf("wait for notification: %w", err)
		case timedOut && !health:
			// A lingering channel is due to be unlistened: the loop's sync does it.
		case timedOut:
			// A quiet connection may be a dead one; only a round trip tells.
			pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping listen connection: %w", err)
			}
			healthDue = time.Now().Add(l.opts.HealthInterval)
		case errors.Is(err, context.Canceled) || pgconn.Timeout(err):
			// Interrupted by kickLocked: loop to sync the LISTEN set.
		default:
			return fmt.Errorf("wait for notification: %w", err)
		}
	}
}

// markListenedReady marks every subscription of a listened channel ready; after a
// reconnection it also tells each to re-read what was sent while the connection was
// down.
func (l *Listener) markListenedReady(reconnected bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for channel, set := range l.subs {
		if !l.listening[channel] {
			continue
		}
		for sub := range set {
			sub.markReady()
			if reconnected {
				sub.signalDropped()
			}
		}
	}
}

// syncListens issues LISTEN and UNLISTEN so the connection hears exactly the
// subscribed channels and those lingering after their last subscriber.
func (l *Listener) syncListens(ctx context.Context, conn *pgx.Conn) error {
	l.mu.Lock()
	l.dirty = false
	var add, remove []string
	for channel := range l.subs {
		if !l.listening[channel] {
			add = append(add, channel)
		}
	}
	now := time.Now()
	for channel := range l.listening {
		if _, ok := l.subs[channel]; ok {
			continue
		}
		since, ok := l.idle[channel]
		if !ok {
			// Its last subscriber left while its LISTEN was under way.
			l.idle[channel] = now
			continue
		}
		if now.Sub(since) >= l.opts.Linger {
			remove = append(remove, channel)
		}
	}
	l.mu.Unlock()
	for _, channel := range add {
		if err := execBounded(ctx, conn, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", channel, err)
		}
		l.mu.Lock()
		l.listening[channel] = true
		l.mu.Unlock()
	}
	for _, channel := range remove {
		l.mu.Lock()
		_, taken := l.subs[channel]
		if !taken {
			// Unlistened from here on: a new subscriber waits for its own LISTEN.
			delete(l.listening, channel)
			delete(l.idle, channel)
		}
		l.mu.Unlock()
		if taken {
			continue // subscribed again meanwhile
		}
		if err := execBounded(ctx, conn, "UNLISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return fmt.Errorf("unlisten %s: %w", channel, err)
		}
	}
	return nil
}

// execTimeout bounds a LISTEN or UNLISTEN: one that does not answer means a dead
// connection, which is then replaced.
const execTimeout = 10 * time.Second

func execBounded(ctx context.Context, conn *pgx.Conn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	_, err := conn.Exec(ctx, sql)
	return err
}

// nextUnlistenLocked is when the first lingering channel is due to be unlistened.
// Callers hold l.mu.
func (l *Listener) nextUnlistenLocked() (time.Time, bool) {
	var next time.Time
	for _, since := range l.idle {
		if due := since.Add(l.opts.Linger); next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next, !next.IsZero()
}

// dispatch queues n for every subscriber of its channel without blocking the loop.
// When a subscriber's queue is full, n is discarded and the subscriber's Dropped
// fires: its queued notifications are all older than n, so one whose consumer uses
// the payload (an output notification's frames) would otherwise never learn of n.
func (l *Listener) dispatch(n Notification) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for sub := range l.subs[n.Channel] {
		select {
		case sub.c <- n:
		default:
			l.logger.Debug("subscriber queue full; notification discarded, subscriber told to re-read", zap.String("channel", n.Channel))
			sub.signalDropped()
		}
	}
}

func (l *Listener) signalAllDropped() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, set := range l.subs {
		for sub := range set {
			sub.signalDropped()
		}
	}
}
