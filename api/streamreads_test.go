package api

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestASharedReadIsJoinedAfterItEndedByStreamsThatLearnedOfItsPartsBefore: the
// streams of one Session wake on one notification but may run one after another, so
// a read or encoding that ended is still joined, for sharedReadLinger, by a stream
// that learned of the parts before it started; a stream that learned of parts after
// it started, and every stream after a failed read, starts a read of its own.
func TestASharedReadIsJoinedAfterItEndedByStreamsThatLearnedOfItsPartsBefore(t *testing.T) {
	var r partReads
	runs := 0
	read := func(fail bool) func(*partRead) {
		return func(c *partRead) {
			runs++
			if fail {
				c.err = errors.New("read failed")
			}
		}
	}
	woke := time.Now()
	first := r.join("s/4", woke, read(false))
	<-first.done
	again := r.join("s/4", woke, read(false))
	<-again.done
	require.Same(t, first, again, "a stream that learned of the parts before the read started joins it after it ended")
	require.Equal(t, 1, runs)

	later := r.join("s/4", time.Now(), read(false))
	<-later.done
	require.NotSame(t, first, later, "a stream that learned of parts after the read started reads again")
	require.Equal(t, 2, runs)

	failed := r.join("s/9", time.Time{}, read(true))
	<-failed.done
	retried := r.join("s/9", time.Time{}, read(false))
	<-retried.done
	require.NotSame(t, failed, retried, "a failed read is not shared once it ended")
	require.NoError(t, retried.err)
	require.Equal(t, 4, runs)
}
