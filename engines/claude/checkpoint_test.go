package claude_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
)

// freeingBox is a replay box whose runner frees recorded output, as the runner's
// CommitOutput does: reading from a freed line fails.
type freeingBox struct {
	*replayBox
	files map[string][]byte
	freed int64
}

func (b *freeingBox) ReadFile(ctx context.Context, id *engines.RuntimeIdentity, p string) ([]byte, error) {
	if d, ok := b.files[p]; ok {
		return d, nil
	}
	return b.replayBox.ReadFile(ctx, id, p)
}

func (b *freeingBox) WriteFile(_ context.Context, _ *engines.RuntimeIdentity, p string, d []byte, _ uint32) error {
	b.files[p] = d
	return nil
}

func (b *freeingBox) CommitOutput(_ context.Context, through int64) error {
	b.freed = max(b.freed, through)
	return nil
}

func (b *freeingBox) OutputEnd(context.Context) (int64, error) {
	end := b.freed + 1
	for _, l := range b.rec.journal {
		end = max(end, l.Offset+1)
	}
	return end, nil
}

func (b *freeingBox) ReadOutput(ctx context.Context, offset int64, follow bool) iter.Seq2[engines.OutputLine, error] {
	return func(yield func(engines.OutputLine, error) bool) {
		if b.freed > 0 && offset <= b.freed {
			yield(engines.OutputLine{}, fmt.Errorf("output through %d was released", b.freed))
			return
		}
		for l, err := range b.replayBox.ReadOutput(ctx, offset, follow) {
			if !yield(l, err) {
				return
			}
		}
	}
}

var _ claude.OutputCommitter = (*freeingBox)(nil)

// TestCommittedFreesOutputBehindACheckpoint lets the box free recorded output and
// checks that reading after the committed cursor, State, and a new reader's State are
// unchanged, while a cursor before the freed lines is expired.
func TestCommittedFreesOutputBehindACheckpoint(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec := loadRecording(t, "queued_while_streaming")
	box := &freeingBox{replayBox: &replayBox{rec: rec}, files: map[string][]byte{}}
	checkpointPath := claude.CheckpointPath(rec.meta.ConfigDir, box.Name())
	connect := func() *claude.Client {
		c, err := claude.NewClient(claude.ClientConfig{Box: box, Process: box, SessionID: "session-freeing",
			ClaudeSession: rec.meta.SessionID, TranscriptPath: rec.meta.TranscriptPath, CheckpointPath: checkpointPath,
			CommitEvery: 10, Capabilities: claude.NewAdapter(claude.Config{}).Capabilities()})
		require.NoError(t, err)
		return c
	}
	c := connect()
	all := readAll(t, c)
	before, err := c.State(ctx)
	require.NoError(t, err)

	// Commit at an event whose line is well past the first ten.
	at := -1
	for i, ev := range all {
		var pos struct{ Line int64 }
		require.NoError(t, json.Unmarshal(ev.EventCursor().Position, &pos))
		if pos.Line > 30 {
			at = i
			break
		}
	}
	require.Positive(t, at)
	committed := all[at].EventCursor()
	require.NoError(t, c.Committed(ctx, committed))
	require.Positive(t, box.freed, "the box freed the recorded lines")
	require.Contains(t, box.files, checkpointPath, "after saving the checkpoint")

	var rest []engines.Event
	for ev, err := range c.Events(ctx, &committed) {
		if err != nil {
			require.ErrorIs(t, err, engines.ErrRuntimeConnectionLost)
			break
		}
		rest = append(rest, ev)
	}
	require.Len(t, rest, len(all)-at-1)
	for i, ev := range rest {
		got, _ := engines.MarshalEvent(ev)
		want, _ := engines.MarshalEvent(all[at+1+i])
		require.JSONEq(t, string(want), string(got), "event %d after the committed cursor", at+1+i)
	}
	for _, from := range []*engines.RuntimeCursor{nil, ptr(all[0].EventCursor())} {
		for _, err := range c.Events(ctx, from) {
			require.ErrorIs(t, err, engines.ErrRuntimeCursorExpired, "freed lines cannot be read again")
			break
		}
	}

	for _, reader := range []*claude.Client{c, connect()} {
		after, err := reader.State(ctx)
		require.NoError(t, err)
		want, _ := json.Marshal(before)
		got, _ := json.Marshal(after)
		require.JSONEq(t, string(want), string(got), "State translates from the checkpoint to the same account")
	}
}

func ptr[T any](v T) *T { return &v }
