package faultstack

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A child that dies on its own is told apart from one the stack stopped, and
// its report names the failure of its own run even when a long trace follows.
func TestAChildsOwnExitNamesItsFirstFailure(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "server.log")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(script string) *child {
		c, err := startChild("server", []string{"/bin/sh", "-c", script}, nil, logPath)
		require.NoError(t, err)
		select {
		case <-c.done:
		case <-ctx.Done():
			t.Fatal("the child did not exit")
		}
		return c
	}

	crashed := run(`echo starting; echo 'panic: listen tcp 127.0.0.1:7233: bind: address already in use'; ` +
		`for i in $(seq 1 400); do echo "	trace line $i of a long stack"; done; exit 2`)
	err := crashed.exitedUnexpectedly()
	require.ErrorIs(t, err, errExitedOnItsOwn)
	assert.Contains(t, err.Error(), "first failure in its log: panic: listen tcp 127.0.0.1:7233: bind: address already in use")
	assert.Contains(t, err.Error(), "trace line 400 of a long stack")

	// The next run appends to the same log; its report reads only its own run.
	quit := run(`echo quitting`)
	err = quit.exitedUnexpectedly()
	require.ErrorIs(t, err, errExitedOnItsOwn)
	assert.Contains(t, err.Error(), "no failure line in its log")

	stopped, err := startChild("server", []string{"/bin/sh", "-c", "exec sleep 60"}, nil, logPath)
	require.NoError(t, err)
	require.NoError(t, stopped.stop(ctx))
	assert.NoError(t, stopped.exitedUnexpectedly(), "a child the stack stopped did not exit on its own")
}
