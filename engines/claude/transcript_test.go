package claude_test

import (
	"bytes"
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
	empty := &fileBox{files: map[string][]byte{}}
	require.NoError(t, claude.RestoreTranscript(ctx, empty, nil, rec.meta.TranscriptPath, nil))
	require.Empty(t, empty.files, "a conversation Claude never wrote has no transcript to restore")
}

// memoryMirror is a TranscriptMirror in memory, as the orchestration's store would be.
type memoryMirror struct {
	entries map[string][]claude.TranscriptEntry
}

func (m *memoryMirror) AppendTranscript(_ context.Context, key string, entries []claude.TranscriptEntry) error {
	for _, e := range entries {
		if e.Index == len(m.entries[key]) {
			m.entries[key] = append(m.entries[key], e)
		}
	}
	return nil
}

func (m *memoryMirror) LoadTranscript(_ context.Context, key string) ([]claude.TranscriptEntry, error) {
	return m.entries[key], nil
}

// TestMirrorTranscriptFromTheClient mirrors a growing transcript through the client in
// two steps and restores exactly the file Claude wrote.
func TestMirrorTranscriptFromTheClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := loadRecording(t, "queued_while_streaming")
	c, box := replayClient(t, rec)
	half := bytes.Count(rec.transcript, []byte("\n")) / 2
	full := box.rec.transcript
	box.rec.transcript = full[:bytes.Index(full, nthLine(full, half))]
	mirror := &memoryMirror{entries: map[string][]claude.TranscriptEntry{}}
	next, err := claude.MirrorTranscript(ctx, c, mirror, 0)
	require.NoError(t, err)
	require.Equal(t, half, next)
	box.rec.transcript = full
	next, err = claude.MirrorTranscript(ctx, c, mirror, next)
	require.NoError(t, err)
	require.Equal(t, bytes.Count(full, []byte("\n")), next)

	saved, err := mirror.LoadTranscript(ctx, c.EngineSessionKey())
	require.NoError(t, err)
	dst := &fileBox{files: map[string][]byte{}}
	require.NoError(t, claude.RestoreTranscript(ctx, dst, nil, c.TranscriptPath(), saved))
	require.Equal(t, string(full), string(dst.files[c.TranscriptPath()]), "Claude writes compact JSON lines, so the restore is byte-identical here")
}

// nthLine returns the n-th line (0-based) of data with its newline.
func nthLine(data []byte, n int) []byte {
	lines := bytes.SplitAfter(data, []byte("\n"))
	return lines[n]
}
