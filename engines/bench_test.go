package engines_test

import (
	"encoding/json"
	"testing"

	"github.com/astrabox/astrabox/engines"
)

// The relay encodes every event and frame it stores; these report the cost per event.

func BenchmarkMarshalResponseOutput(b *testing.B) {
	cursor := engines.RuntimeCursor{Generation: "runner-1", Position: json.RawMessage(`{"offset":12345,"open":["msg_1"]}`)}
	ev := engines.NewResponseOutput(cursor, "msg_1", engines.MustFrame(engines.TextDeltaChunk{ID: "t1", Delta: "some streamed text of a typical delta size"}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := engines.MarshalEvent(ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalResponseOutput(b *testing.B) {
	cursor := engines.RuntimeCursor{Generation: "runner-1", Position: json.RawMessage(`{"offset":12345,"open":["msg_1"]}`)}
	data, err := engines.MarshalEvent(engines.NewResponseOutput(cursor, "msg_1", engines.MustFrame(engines.ToolInputAvailableChunk{
		ToolCallID: "toolu_1", ToolName: "Bash", Input: json.RawMessage(`{"command":"ls -la","description":"List files"}`)})))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := engines.UnmarshalEvent(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrameMarshalJSON encodes a text delta as the Relay stores it.
func BenchmarkFrameMarshalJSON(b *testing.B) {
	f := engines.MustFrame(engines.TextDeltaChunk{ID: "text-resp-0123456789", Delta: "one more chunk of a streamed reply, about sixty bytes"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewFrame builds a text delta with its provider metadata, as an adapter
// builds most of the frames it translates.
func BenchmarkNewFrame(b *testing.B) {
	delta := engines.TextDeltaChunk{ID: "text-resp-0123456789", Delta: "one more chunk of a streamed reply, about sixty bytes",
		ProviderMetadata: engines.ProviderMetadata{"scriptagent": {"at_us": 1764813600123456}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := engines.NewFrame(delta); err != nil {
			b.Fatal(err)
		}
	}
}
