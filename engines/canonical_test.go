package engines_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

// sampleFrames are frames of each shape the output log holds: plain members, nested
// objects and arrays, escapes and non-ASCII text in values, numbers, booleans, null.
var sampleFrames = []string{
	`{"type":"text-delta","id":"t-1","delta":"Hello, \"world\" \\ \u00e9\u2028 <b>&</b>\n"}`,
	`{"type":"start","messageId":"m-1","messageMetadata":{"sessionId":"s","inputIds":["a","b"],"n":1.5e3,"ok":true,"none":null}}`,
	`{"type":"tool-input-available","toolCallId":"c-1","toolName":"Bash","input":{"command":"ls -la","nested":[{"k":[1,2,{"z":"}"}]}]},"providerExecuted":false}`,
	`{"type":"finish","finishReason":"stop","messageMetadata":{}}`,
	`{"type":"finish","finishReason":"tool-calls"}`,
	`{"type":"data-file-changes","id":"fc","data":{"files":[{"path":"a b.txt","op":"write"}]},"transient":true}`,
	`{"type":"error","errorText":"{not json, a string: ]}"}`,
	`{"zeta":1,"alpha":[],"type":"data-x","beta":{},"a":""}`,
}

// jsonbText writes a frame the way PostgreSQL's jsonb prints it: keys ordered by
// length and then bytes, at every level, with ", " and ": " between.
func jsonbText(t testing.TB, raw []byte) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&v))
	var buf bytes.Buffer
	writeJSONB(t, &buf, v)
	return buf.Bytes()
}

func writeJSONB(t testing.TB, buf *bytes.Buffer, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			if len(a) != len(b) {
				return len(a) - len(b)
			}
			return strings.Compare(a, b)
		})
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteString(", ")
			}
			kb, err := json.Marshal(k)
			require.NoError(t, err)
			buf.Write(kb)
			buf.WriteString(": ")
			writeJSONB(t, buf, x[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteString(", ")
			}
			writeJSONB(t, buf, e)
		}
		buf.WriteByte(']')
	default:
		b, err := json.Marshal(x)
		require.NoError(t, err)
		buf.Write(b)
	}
}

// TestCanonicalFrameJSONIsTheFramesEncoding: a frame as jsonb prints it (keys
// reordered at every level, spaces) comes back in the Frame's own encoding, with its
// type, as parsing it into a Frame and encoding that gives.
func TestCanonicalFrameJSONIsTheFramesEncoding(t *testing.T) {
	for _, s := range sampleFrames {
		for _, stored := range [][]byte{[]byte(s), jsonbText(t, []byte(s))} {
			f, err := engines.ParseFrame(stored)
			require.NoError(t, err)
			want, err := f.MarshalJSON()
			require.NoError(t, err)
			got, typ, err := engines.CanonicalFrameJSON(stored)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "from %s", stored)
			require.Equal(t, f.Type(), typ)
		}
	}
}

// TestCanonicalFrameJSONRefusesWhatAFrameRefuses, and takes the Frame's path for names
// that need escaping or repeat, with the same result.
func TestCanonicalFrameJSONRefusesWhatAFrameRefuses(t *testing.T) {
	for _, bad := range []string{``, `[]`, `{}`, `{"type":""}`, `{"type":1}`, `{"id":"x"}`, `{"type":"a",}`,
		`{"type":"a"} x`, `{"type":"a","b":}`, `{"type":"a","b":[1}`, `{"type":"a" "b":1}`, `{"type":"a","b":"x`} {
		_, _, err := engines.CanonicalFrameJSON([]byte(bad))
		require.Error(t, err, bad)
		_, err = engines.ParseFrame([]byte(bad))
		require.Error(t, err, "the Frame refuses it too: %s", bad)
	}
	for _, odd := range []string{`{"type":"a","<b>":1,"\u00e9":2,"c\"d":3}`, `{"type":"a","b":1,"b":2}`, `{"type":"x\u0041"}`} {
		f, err := engines.ParseFrame([]byte(odd))
		require.NoError(t, err)
		want, _ := f.MarshalJSON()
		got, typ, err := engines.CanonicalFrameJSON([]byte(odd))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), odd)
		require.Equal(t, f.Type(), typ)
	}
}

// FuzzCanonicalFrameJSON: for any bytes, the fast encoding agrees with the Frame's.
func FuzzCanonicalFrameJSON(f *testing.F) {
	for _, s := range sampleFrames {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"a","b":{"c":"}","d":["]"]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, perr := engines.ParseFrame(data)
		got, typ, err := engines.CanonicalFrameJSON(data)
		if perr != nil {
			if err == nil {
				t.Fatalf("accepted %q, which a Frame refuses (%v)", data, perr)
			}
			return
		}
		want, merr := frame.MarshalJSON()
		if merr != nil {
			if err == nil {
				t.Fatalf("encoded %q, which a Frame cannot (%v)", data, merr)
			}
			return
		}
		if err != nil || !bytes.Equal(got, want) || typ != frame.Type() {
			t.Fatalf("%q: got %q %q %v, want %q %q", data, got, typ, err, want, frame.Type())
		}
	})
}

// BenchmarkCanonicalFrameJSON encodes a jsonb-printed text delta the stream's way,
// beside parsing it into a Frame and encoding that.
func BenchmarkCanonicalFrameJSON(b *testing.B) {
	stored := jsonbText(b, []byte(`{"type":"text-delta","id":"text-resp-0123456789","delta":"one more chunk of a streamed reply, about sixty bytes"}`))
	b.Run("frame", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := engines.ParseFrame(stored)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
			_ = f.Type()
		}
	})
	b.Run("canonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := engines.CanonicalFrameJSON(stored); err != nil {
				b.Fatal(err)
			}
		}
	})
}
