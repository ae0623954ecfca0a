package engines_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

// mapChunk is a chunk whose members are whatever its map holds, names that need
// escaping and a "type" of its own among them.
type mapChunk map[string]any

func (mapChunk) ChunkType() string { return "data-test" }

// decodedFrame is the frame NewFrame is specified to build: the chunk's JSON members,
// decoded one by one, with its ChunkType as "type".
func decodedFrame(t testing.TB, c engines.Chunk) engines.Frame {
	body, err := json.Marshal(c)
	require.NoError(t, err)
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &fields))
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	fields["type"], err = json.Marshal(c.ChunkType())
	require.NoError(t, err)
	data, err := json.Marshal(fields)
	require.NoError(t, err)
	f, err := engines.ParseFrame(data)
	require.NoError(t, err)
	return f
}

// requireSameFrame compares two frames member by member as well as by encoding.
func requireSameFrame(t testing.TB, want, got engines.Frame) {
	require.Equal(t, want.Keys(), got.Keys())
	for _, k := range want.Keys() {
		w, _ := want.Field(k)
		g, _ := got.Field(k)
		require.JSONEq(t, string(w), string(g), "member %s", k)
	}
	require.True(t, want.Equal(got), "%s against %s", got, want)
}

// TestNewFrameHoldsTheChunksMembers: a frame built from a typed chunk holds exactly the
// members its JSON encoding has, whether their names are plain or need escaping,
// values nested or escaped, with the chunk's own type.
func TestNewFrameHoldsTheChunksMembers(t *testing.T) {
	for _, c := range []engines.Chunk{
		engines.TextDeltaChunk{ID: "t-1", Delta: "Hello, \"world\" \\ é\u2028 <b>&</b>\n}{,]"},
		engines.TextDeltaChunk{ID: "t-2", Delta: "x", ProviderMetadata: engines.ProviderMetadata{"vendor": {"at_us": 17, "nested": []any{"}", map[string]any{"k": ","}}}}},
		engines.TextStartChunk{ID: "p"},
		engines.ToolInputAvailableChunk{ToolCallID: "c-1", ToolName: "Bash", Input: json.RawMessage(`{ "command" : "ls -la", "a": [1, 2] }`)},
		mapChunk{},
		mapChunk(nil),
		mapChunk{"type": "ignored", "plain": 1.5, "<b>": true, "é": nil, `c"d`: "v", `back\slash`: []any{}},
	} {
		got, err := engines.NewFrame(c)
		require.NoError(t, err)
		requireSameFrame(t, decodedFrame(t, c), got)
		require.Equal(t, c.ChunkType(), got.Type())
	}
}

// FuzzNewFrame: for any object a chunk's members can hold, and any text in a delta, the
// frame NewFrame builds is the decoded one.
func FuzzNewFrame(f *testing.F) {
	for _, s := range sampleFrames {
		f.Add([]byte(s), "a delta")
	}
	f.Add([]byte(`{"a\"b":{"c":"}"},"\u003c":[",",{}]}`), "}\",\\")
	f.Fuzz(func(t *testing.T, members []byte, delta string) {
		var m map[string]any
		if json.Unmarshal(members, &m) == nil {
			got, err := engines.NewFrame(mapChunk(m))
			require.NoError(t, err)
			requireSameFrame(t, decodedFrame(t, mapChunk(m)), got)
		}
		c := engines.TextDeltaChunk{ID: delta, Delta: delta, ProviderMetadata: engines.ProviderMetadata{delta: {delta: delta}}}
		got, err := engines.NewFrame(c)
		require.NoError(t, err)
		requireSameFrame(t, decodedFrame(t, c), got)
	})
}
