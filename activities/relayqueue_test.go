package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func queued(n int) eventOrErr { return eventOrErr{read: time.Unix(int64(n), 0)} }

func TestEventQueueHandsOverInOrderAndHoldsNothingOnceTaken(t *testing.T) {
	q := newEventQueue(8)
	for i := range 3 {
		require.True(t, q.push(t.Context(), queued(i)))
	}
	<-q.ready
	batch, done := q.take()
	require.False(t, done)
	require.Len(t, batch, 3)
	for i, it := range batch {
		assert.Equal(t, int64(i), it.read.Unix())
	}
	assert.Nil(t, q.items, "an emptied queue keeps no buffer")

	batch, done = q.take()
	assert.Empty(t, batch)
	assert.False(t, done)
}

func TestEventQueueReaderWaitsWhileABatchIsQueued(t *testing.T) {
	q := newEventQueue(2)
	require.True(t, q.push(t.Context(), queued(0)))
	require.True(t, q.push(t.Context(), queued(1)))
	pushed := make(chan bool)
	go func() { pushed <- q.push(t.Context(), queued(2)) }()
	select {
	case <-pushed:
		t.Fatal("a third event was queued over the limit of two")
	case <-q.ready:
	}
	batch, _ := q.take()
	require.Len(t, batch, 2)
	require.True(t, <-pushed, "the waiting reader goes on once the loop took")
	<-q.ready
	batch, _ = q.take()
	require.Len(t, batch, 1)
	assert.Equal(t, int64(2), batch[0].read.Unix())
}

func TestEventQueueWaitEndsWithItsContext(t *testing.T) {
	q := newEventQueue(1)
	require.True(t, q.push(t.Context(), queued(0)))
	ctx, cancel := context.WithCancel(t.Context())
	pushed := make(chan bool)
	go func() { pushed <- q.push(ctx, queued(1)) }()
	cancel()
	assert.False(t, <-pushed)
}

func TestEventQueueReportsItsEndAfterWhatWasQueued(t *testing.T) {
	q := newEventQueue(4)
	failure := errors.New("stream broke")
	require.True(t, q.push(t.Context(), queued(0)))
	require.True(t, q.push(t.Context(), eventOrErr{err: failure}))
	q.close()

	<-q.ready
	batch, done := q.take()
	require.False(t, done)
	require.Len(t, batch, 2)
	assert.ErrorIs(t, batch[1].err, failure)

	<-q.ready // the end comes with a token of its own
	batch, done = q.take()
	assert.Empty(t, batch)
	assert.True(t, done)
}

func TestEventQueueTakesUntilAnEventItMustLeave(t *testing.T) {
	t.Parallel()
	q := newEventQueue(2)
	for i := range 2 {
		require.True(t, q.push(t.Context(), queued(i)))
	}
	pushed := make(chan bool)
	go func() { pushed <- q.push(t.Context(), queued(2)) }()
	stopAt := func(n int64) func(eventOrErr) bool {
		return func(it eventOrErr) bool { return it.read.Unix() == n }
	}

	batch := q.takeUntil(stopAt(1))
	require.Len(t, batch, 1)
	assert.Equal(t, int64(0), batch[0].read.Unix())
	require.True(t, <-pushed, "what the take left room for is queued")
	assert.Empty(t, q.takeUntil(stopAt(1)), "the event it stops at stays first")

	<-q.ready
	batch, done := q.take()
	require.False(t, done)
	require.Len(t, batch, 2, "the one left, then the one pushed after it")
	assert.Equal(t, int64(1), batch[0].read.Unix())
	assert.Equal(t, int64(2), batch[1].read.Unix())
	assert.Nil(t, q.items, "an emptied queue keeps no buffer")
}
