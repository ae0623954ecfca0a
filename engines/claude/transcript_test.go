package claude_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
)

// fileBox is a box of files only, for the transcript mirror.
type fileBox struct{ files map[string][]byte }

func (b *fileBox) ID() string { return "files" }
func (b *fileBox) StartProcess(context.Context, engines.ProcessSpec) (engines.ProcessSession, error) {
	return nil, errors.New("no processes")
}
func (b *fileBox) ReadFile(_ context.Context, _ *engines.RuntimeIdentity, p string) ([]byte, error) {
	d, ok := b.files[p]
	if !ok {
		return nil, os.ErrNotExist
	}
	return d, nil
}
func (b *fileBox) WriteFile(_ context.Context, _ *engines.RuntimeIdentity, p string, d []byte, _ uint32) error {
	b.files[p] = d
	return nil
}
func (b *fileBox) DialPort(context.Context, int) (net.Conn, error) {
	return nil, errors.New("no ports")
}

// TestTranscriptMirrorRoundTrip mirrors a recorded transcript and restores it into an
// empty box: entries keep their order and content, a line still being written is left
// for later, and a gap is refused.
func TestTranscriptMirrorRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := loadRecording(t, "message_during_tool")
	src := &fileBox{files: map[string][]byte{rec.meta.TranscriptPath: append(append([]byte{}, rec.transcript...), `{"type":"partial`...)}}
	entries, err := claude.ReadTranscript(ctx, src, nil, rec.meta.TranscriptPath, 0)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	tail, err := claude.ReadTranscript(ctx, src, nil, rec.meta.TranscriptPath, len(entries)-1)
	require.NoError(t, err)
	require.Len(t, tail, 1, "reading from an index returns only what follows")

	dst := &fileBox{files: map[string][]byte{}}
	require.NoError(t, claude.RestoreTranscript(ctx, dst, nil, rec.meta.TranscriptPath, entries))
	again, err := claude.ReadTranscript(ctx, dst, nil, rec.meta.TranscriptPath, 0)
	require.NoError(t, err)
	require.Len(t, again, len(entries))
	for i := range entries {
		var a, b any
		require.NoError(t, json.Unmarshal(entries[i].Entry, &a))
		require.NoError(t, json.Unmarshal(again[i].Entry, &b))
		require.Equal(t, a, b, "entry %d", i)
	}
	require.Error(t, claude.RestoreTranscript(ctx, &fileBox{files: map[string][]byte{}}, nil, rec.meta.TranscriptPath, entries[1:]),
		"a transcript with a gap would resume another conversation")
}
