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

// serve keeps conn's LISTEN set equal to the subscribed channels and dispatches
// notifications until the connection fails or ctx ends.
func (l *Listener) serve(ctx context.Context, conn *pgx.Conn, reconnected bool) error {
	listening := map[string]bool{}
	for {
		if err := l.syncListens(ctx, conn, listening); err != nil {
			return err
		}
		l.mu.Lock()
		for channel, set := range l.subs {
			if !listening[channel] {
				continue
			}
			for sub := range set {
				sub.markReady()
				if reconnected {
					// Listening again: whatever was sent while down must be re-read now.
					sub.signalDropped()
				}
			}
		}
		reconnected = false
		if l.dirty {
			l.mu.Unlock()
			continue
		}
		waitCtx, cancel := context.WithTimeout(ctx, l.opts.HealthInterval)
		l.cancelWait = cancel
		l.mu.Unlock()

		n, err := conn.WaitForNotification(waitCtx)
		timedOut := errors.Is(waitCtx.Err(), context.DeadlineExceeded)
		l.mu.Lock()
		l.cancelWait = nil
		l.mu.Unlock()
		cancel()

		switch {
		case err == nil:
			l.dispatch(Notification{Channel: n.Channel, Payload: n.Payload, output: &sharedNotice{}})
		case ctx.Err() != nil:
			return ctx.Err()
		case conn.IsClosed():
			return fmt.Errorf("wait for notification: %w", err)
		case timedOut:
			// A quiet connection may be a dead one; only a round trip tells.
			pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping listen connection: %w", err)
			}
		case errors.Is(err, context.Canceled) || pgconn.Timeout(err):
			// Interrupted by kickLocked: loop to sync the LISTEN set.
		default:
			return fmt.Errorf("wait for notification: %w", err)
		}
	}
}

// syncListens issues LISTEN and UNLISTEN so the connection hears exactly the
// subscribed channels.
func (l *Listener) syncListens(ctx context.Context, conn *pgx.Conn, listening map[string]bool) error {
	l.mu.Lock()
	l.dirty = false
	var add, remove []string
	for channel := range l.subs {
		if !listening[channel] {
			add = append(add, channel)
		}
	}
	for channel := range listening {
		if _, ok := l.subs[channel]; !ok {
			remove = append(remove, channel)
		}
	}
	l.mu.Unlock()
	for _, channel := range add {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", channel, err)
		}
		listening[channel] = true
	}
	for _, channel := range remove {
		if _, err := conn.Exec(ctx, "UNLISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return fmt.Errorf("unlisten %s: %w", channel, err)
		}
		delete(listening, channel)
	}
	return nil
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
