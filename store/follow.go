package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/astrabox/astrabox/store/pubsub"
)

// ErrListenerDropped: the LISTEN connection was lost while following (or the
// subscriber fell behind and a notification was discarded), so a commit may
// have gone unannounced. End the stream; the client resumes from its cursor.
var ErrListenerDropped = errors.New("output listener dropped")

// followBatch is how many parts one read of the log fetches.
const followBatch = 256

// OutputFollower reads a Session's output log in seq order as parts are committed:
// it subscribes before reading, reads the backlog after the cursor, and re-reads the
// log after each notification. Postgres is the truth; a notification only wakes it.
type OutputFollower struct {
	st        *Store
	sub       *pubsub.Subscription
	sessionID string
	after     int64
	buf       []OutputPart
}

// FollowOutput starts following the Session's parts after afterSeq. The subscription
// is active when it returns, so no part committed from then on goes unnoticed.
func (s *Store) FollowOutput(ctx context.Context, l *pubsub.Listener, sessionID string, afterSeq int64) (*OutputFollower, error) {
	sub, err := l.Subscribe(ctx, pubsub.SessionOutputChannel(sessionID))
	if err != nil {
		return nil, fmt.Errorf("follow output of session %s: %w", sessionID, err)
	}
	return &OutputFollower{st: s, sub: sub, sessionID: sessionID, after: afterSeq}, nil
}

// Next returns the next part, waiting until one is committed. It fails with
// ErrListenerDropped when the listener lost its connection, or with ctx's error.
func (f *OutputFollower) Next(ctx context.Context) (OutputPart, error) {
	for {
		if len(f.buf) > 0 {
			p := f.buf[0]
			f.buf = f.buf[1:]
			f.after = p.Seq
			return p, nil
		}
		parts, err := f.st.ListOutputPartsAfter(ctx, f.sessionID, f.after, followBatch)
		if err != nil {
			return OutputPart{}, fmt.Errorf("follow output: %w", err)
		}
		if len(parts) > 0 {
			f.buf = parts
			continue
		}
		select {
		case _, open := <-f.sub.C():
			if !open {
				return OutputPart{}, ErrListenerDropped
			}
		case <-f.sub.Dropped():
			return OutputPart{}, ErrListenerDropped
		case <-ctx.Done():
			return OutputPart{}, ctx.Err()
		}
	}
}

// Seq is the seq of the last part Next returned (or the starting cursor): the
// position a client resumes after.
func (f *OutputFollower) Seq() int64 { return f.after }

// Close ends the subscription.
func (f *OutputFollower) Close() { f.sub.Close() }
