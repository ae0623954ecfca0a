package enginebox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

func newBox(t *testing.T) (context.Context, *enginebox.Box) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	backend := localtest.NewBackend(t, localtest.Options(t))
	h, err := backend.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return ctx, enginebox.New(h)
}

func collect(t *testing.T, ctx context.Context, p engines.ProcessSession, offset int64, n int) []engines.OutputLine {
	t.Helper()
	var out []engines.OutputLine
	for line, err := range p.ReadOutput(ctx, offset, true) {
		require.NoError(t, err)
		out = append(out, line)
		if len(out) == n {
			break
		}
	}
	require.Len(t, out, n)
	return out
}

// TestProcessSessionThroughTheBridge drives a real process in a real box through
// the engines.Box contract: idempotent stdin, replay from an offset, attach by
// name, signals and exit status.
func TestProcessSessionThroughTheBridge(t *testing.T) {
	ctx, box := newBox(t)
	spec := engines.ProcessSpec{Name: "echo", Command: []string{"/bin/sh", "-c", `while read -r l; do echo "got $l"; done`}}
	p, err := box.StartProcess(ctx, spec)
	require.NoError(t, err)

	require.NoError(t, p.WriteStdin(ctx, "w1", []byte("one\n")))
	require.NoError(t, p.WriteStdin(ctx, "w1", []byte("one\n")), "a repeated write id is acknowledged")
	require.NoError(t, p.WriteStdin(ctx, "w2", []byte("two\n")))

	lines := collect(t, ctx, p, 0, 2)
	assert.Equal(t, "got one", string(lines[0].Data))
	assert.Equal(t, "got two", string(lines[1].Data), "the duplicate write was not written again")
	assert.Equal(t, engines.Stdout, lines[0].Stream)

	// Reading from a line's offset+1 resumes after it, with nothing repeated.
	again := collect(t, ctx, p, lines[0].Offset+1, 1)
	assert.Equal(t, lines[1], again[0])

	// Starting the same name attaches to the running process.
	attached, err := box.StartProcess(ctx, spec)
	require.NoError(t, err)
	require.NoError(t, attached.WriteStdin(ctx, "w3", []byte("three\n")))
	assert.Equal(t, "got three", string(collect(t, ctx, p, lines[1].Offset+1, 1)[0].Data))

	status, err := p.ExitStatus(ctx)
	require.NoError(t, err)
	assert.Nil(t, status, "still running")

	require.NoError(t, p.Signal(ctx, "TERM"))
	for _, err := range p.ReadOutput(ctx, lines[1].Offset+2, true) {
		require.NoError(t, err) // drains until the process has exited
	}
	status, err = p.ExitStatus(ctx)
	require.NoError(t, err)
	require.NotNil(t, status)
	assert.Equal(t, -1, status.Code)
	assert.Equal(t, "TERM", status.Signal)
}

func TestFilesAndIdentity(t *testing.T) {
	ctx, box := newBox(t)
	require.NoError(t, box.WriteFile(ctx, nil, "/tmp/note.txt", []byte("hello"), 0o600))
	data, err := box.ReadFile(ctx, nil, "/tmp/note.txt")
	require.NoError(t, err)
	assert.Equal(t, "hello", string(data))

	incomplete := &engines.RuntimeIdentity{Account: "conversation"}
	err = box.WriteFile(ctx, incomplete, "/tmp/other.txt", []byte("x"), 0o600)
	require.Error(t, err, "an incomplete identity is refused before any write")
	_, err = box.ReadFile(ctx, nil, "/tmp/other.txt")
	require.Error(t, err, "nothing was written")

	_, err = box.StartProcess(ctx, engines.ProcessSpec{Name: "p", Command: []string{"/bin/true"}, Identity: incomplete})
	require.Error(t, err)
}

// TestCommitOutputFreesRecordedLines checks the bridge serves runtime clients
// that free the journal once the platform recorded it (engines/claude does).
func TestCommitOutputFreesRecordedLines(t *testing.T) {
	ctx, box := newBox(t)
	p, err := box.StartProcess(ctx, engines.ProcessSpec{Name: "seq", Command: []string{"/bin/sh", "-c", "seq 1 5; exec cat"}})
	require.NoError(t, err)
	lines := collect(t, ctx, p, 0, 5)

	var committer claude.OutputCommitter
	require.Implements(t, &committer, p)
	committer = p.(claude.OutputCommitter)
	require.NoError(t, committer.CommitOutput(ctx, lines[2].Offset))

	var readErr error
	for _, err := range p.ReadOutput(ctx, lines[0].Offset, false) {
		readErr = err
		break
	}
	require.ErrorIs(t, readErr, sandbox.ErrOutputReleased, "freed lines cannot be read again")
	rest := collect(t, ctx, p, lines[2].Offset+1, 2)
	assert.Equal(t, "4", string(rest[0].Data))
	assert.Equal(t, "5", string(rest[1].Data))
}
