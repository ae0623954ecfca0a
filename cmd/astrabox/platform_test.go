package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIdleReleaseZeroKeepsBoxes: sandbox.idle_release 0 means boxes stay until the
// Session is archived or deleted, which the activities spell as a negative period
// (their zero takes the 30-minute default).
func TestIdleReleaseZeroKeepsBoxes(t *testing.T) {
	t.Parallel()
	require.Negative(t, idleRelease(0))
	require.Equal(t, 10*time.Minute, idleRelease(10*time.Minute))
}
