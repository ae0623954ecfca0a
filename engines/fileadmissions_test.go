package engines_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

// tailBox is a memBox that also reads from an offset, recording each offset asked.
type tailBox struct {
	memBox
	offsets []int64
}

func (b *tailBox) ReadFileFrom(ctx context.Context, id *engines.RuntimeIdentity, path string, offset int64) ([]byte, int64, error) {
	b.offsets = append(b.offsets, offset)
	data, err := b.ReadFile(ctx, id, path)
	if err != nil {
		return nil, 0, err
	}
	size := int64(len(data))
	return data[min(offset, size):], size, nil
}

// inputsOfLine reads a test line "in:<id>" as admitting <id>.
func inputsOfLine(line []byte) []string {
	if id, ok := strings.CutPrefix(string(line), "in:"); ok {
		return []string{id}
	}
	return nil
}

// TestFileAdmissionsReadOnlyWhatTheFileGained: each look at a growing file asks for
// the bytes after the last complete line it read; a line still being written is
// asked for again; a file replaced by a shorter one admits nothing new.
func TestFileAdmissionsReadOnlyWhatTheFileGained(t *testing.T) {
	ctx := context.Background()
	const path = "/home/log.jsonl"
	box := &tailBox{memBox: memBox{files: map[string][]byte{}}}
	adm := engines.NewFileAdmissions(box, nil, path, inputsOfLine)

	require.Empty(t, adm.All(ctx), "no file yet")
	box.files[path] = []byte("in:a\nother\nin:b")
	require.Equal(t, []string{"a"}, adm.All(ctx), "in:b is not a complete line yet")
	box.files[path] = []byte("in:a\nother\nin:b\nin:c\n")
	require.Equal(t, []string{"a", "b", "c"}, adm.All(ctx))
	require.Equal(t, []int64{0, 0, 11}, box.offsets, "the second read starts after other\\n")
	require.Equal(t, []string{"a", "b", "c"}, adm.All(ctx))
	require.Equal(t, int64(21), box.offsets[3], "nothing new: asked from the end")

	box.files[path] = []byte("in:z\n")
	require.Equal(t, []string{"a", "b", "c"}, adm.All(ctx), "a replaced file admits nothing")
	require.True(t, adm.Holds(ctx, "b"), "what was found stays found")
}

// TestReadFileFromCutsAWholeReadForABoxWithoutOffsets: a Box that reads only whole
// files gives the same bytes and size.
func TestReadFileFromCutsAWholeReadForABoxWithoutOffsets(t *testing.T) {
	ctx := context.Background()
	box := &memBox{files: map[string][]byte{"/f": []byte("0123456789")}}
	data, size, err := engines.ReadFileFrom(ctx, box, nil, "/f", 4)
	require.NoError(t, err)
	require.Equal(t, "456789", string(data))
	require.Equal(t, int64(10), size)
	data, size, err = engines.ReadFileFrom(ctx, box, nil, "/f", 12)
	require.NoError(t, err)
	require.Empty(t, data)
	require.Equal(t, int64(10), size, "a size below the offset: the file shrank")
	_, _, err = engines.ReadFileFrom(ctx, box, nil, "/missing", 0)
	require.Error(t, err)
}
