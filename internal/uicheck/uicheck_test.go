package uicheck

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func raws(t *testing.T, chunks ...string) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(chunks))
	for i, c := range chunks {
		if !json.Valid([]byte(c)) {
			t.Fatalf("test chunk %d is not JSON: %s", i, c)
		}
		out[i] = json.RawMessage(c)
	}
	return out
}

func validator(t *testing.T) *Validator {
	t.Helper()
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestValidStreamAssemblesMessage(t *testing.T) {
	t.Parallel()
	r, err := validator(t).Chunks(ctx(t), raws(t,
		`{"type":"start","messageId":"resp-1","messageMetadata":{"response_id":"resp-1"}}`,
		`{"type":"text-start","id":"t1"}`,
		`{"type":"text-delta","id":"t1","delta":"Hello"}`,
		`{"type":"text-end","id":"t1"}`,
		`{"type":"finish","finishReason":"stop"}`,
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("valid stream rejected: %v", err)
	}
	if !r.Done || r.ChunkCount != 5 {
		t.Fatalf("done=%v count=%d, want true 5", r.Done, r.ChunkCount)
	}
	if len(r.Messages) != 1 || r.Messages[0].ID != "resp-1" {
		t.Fatalf("messages = %+v, want one message resp-1", r.Messages)
	}
	texts := r.Messages[0].PartsOfType("text")
	if len(texts) != 1 || texts[0]["text"] != "Hello" {
		t.Fatalf("text parts = %v", texts)
	}
}

func TestRejectsChunkMissingRequiredKey(t *testing.T) {
	t.Parallel()
	r, err := validator(t).Chunks(ctx(t), raws(t,
		`{"type":"start","messageId":"m"}`,
		`{"type":"tool-input-available","toolCallId":"c1","toolName":"Bash","input":{},"dynamic":true}`,
		`{"type":"tool-output-available","toolCallId":"c1"}`,
		`{"type":"finish"}`,
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ChunkErrors) != 1 || r.ChunkErrors[0].Index != 2 || !strings.Contains(r.ChunkErrors[0].Message, "output") {
		t.Fatalf("chunk errors = %+v, want one at index 2 about output", r.ChunkErrors)
	}
}

func TestLocatesProtocolError(t *testing.T) {
	t.Parallel()
	r, err := validator(t).Chunks(ctx(t), raws(t,
		`{"type":"start","messageId":"m"}`,
		`{"type":"text-start","id":"a"}`,
		`{"type":"text-delta","id":"b","delta":"x"}`,
		`{"type":"finish"}`,
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.StreamError == nil || r.StreamError.Index != 2 {
		t.Fatalf("stream error = %+v, want one at chunk 2", r.StreamError)
	}
	if r.Err() == nil {
		t.Fatal("Err() is nil for a stream with a protocol error")
	}
}

func TestSSEFraming(t *testing.T) {
	t.Parallel()
	chunks := raws(t, `{"type":"start","messageId":"m"}`, `{"type":"finish"}`)
	good := SSE(chunks)
	if !strings.HasSuffix(string(good), "data: [DONE]\n\n") {
		t.Fatalf("SSE() does not end with [DONE]: %q", good)
	}
	r, err := validator(t).SSE(ctx(t), good, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil || !r.Done {
		t.Fatalf("good SSE: err=%v done=%v", err, r.Done)
	}
	// A last event without its blank line is dropped by the client.
	bad := []byte("data: {\"type\":\"start\"}\n\ndata: {\"type\":\"finish\"}")
	r, err = validator(t).SSE(ctx(t), bad, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Done || len(r.FramingErrors) == 0 {
		t.Fatalf("unterminated SSE: done=%v framing=%v, want not done and a framing error", r.Done, r.FramingErrors)
	}
}

func TestMissingNodeModulesSaysWhatToRun(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	script := filepath.Join(root, ScriptPath)
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("// empty\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewAt(root)
	if err == nil || !strings.Contains(err.Error(), "make deps-npm") {
		t.Fatalf("NewAt on a root without node_modules: %v, want a hint to run make deps-npm", err)
	}
}

func TestRepoRootFromEnvironment(t *testing.T) {
	want := t.TempDir()
	t.Setenv("ASTRABOX_REPO_ROOT", want)
	got, err := RepoRoot()
	if err != nil || got != want {
		t.Fatalf("RepoRoot() = %q, %v; want %q", got, err, want)
	}
}

// fatalTB records a Fatalf and ends its goroutine, so RequireValidChunks can be shown to
// fail a test on an invalid stream.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatal(args ...any) {
	f.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestRequireValidChunksFailsOnInvalidStream(t *testing.T) {
	t.Parallel()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RequireValidChunks(tb, []map[string]any{{"type": "start"}, {"type": "data-x"}})
	}()
	<-done
	if !strings.Contains(tb.fatal, "data") {
		t.Fatalf("RequireValidChunks did not fail on a data part without data: %q", tb.fatal)
	}
}
