package activities

import (
	"context"
	"sync"
)

// eventQueue hands a runtime's events from the Relay's reading goroutine to its
// recording loop, up to limit at a time: the reader waits while a batch's worth
// is queued. Unlike a buffered channel it holds no buffer while empty, so a live
// Session whose program is quiet keeps nothing queued (a channel of a batch's
// capacity was a Relay's largest allocation), while a burst still fills a whole
// batch as the loop records the one before.
type eventQueue struct {
	limit int
	// ready has a token when events were queued or the queue closed since the loop
	// last took; space has one when the loop took since the reader last waited.
	ready chan struct{}
	space chan struct{}

	mu     sync.Mutex
	items  []eventOrErr
	closed bool
}

func newEventQueue(limit int) *eventQueue {
	return &eventQueue{limit: max(limit, 1), ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// push queues it, waiting while limit events are queued; it reports false when ctx
// ends first.
func (q *eventQueue) push(ctx context.Context, it eventOrErr) bool {
	for {
		q.mu.Lock()
		if len(q.items) < q.limit {
			q.items = append(q.items, it)
			q.mu.Unlock()
			wake(q.ready)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-ctx.Done():
			return false
		}
	}
}

// close says no event follows what is queued.
func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	wake(q.ready)
}

// take removes and returns everything queued, in order; done is true once the
// queue is closed and nothing is left. Wait on ready before taking.
func (q *eventQueue) take() (batch []eventOrErr, done bool) {
	q.mu.Lock()
	batch, q.items = q.items, nil
	closed := q.closed
	q.mu.Unlock()
	if len(batch) == 0 {
		return nil, closed
	}
	wake(q.space)
	if closed {
		wake(q.ready) // the next take reports the end
	}
	return batch, false
}

// takeUntil removes and returns the events queued before the first for which stop
// holds, in order, without waiting; that one and those after it stay queued.
func (q *eventQueue) takeUntil(stop func(eventOrErr) bool) []eventOrErr {
	q.mu.Lock()
	n := 0
	for n < len(q.items) && !stop(q.items[n]) {
		n++
	}
	batch := q.items[:n:n]
	q.items = q.items[n:]
	if len(q.items) == 0 {
		q.items = nil
	}
	q.mu.Unlock()
	if n > 0 {
		wake(q.space)
	}
	return batch
}

// wake leaves a token on a one-slot channel unless one is there already.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
