// Package uicheck validates AI SDK UI Message Streams with the real browser client: it
// runs tools/aisdk/validate-ui-stream.mjs, which parses with the pinned `ai` package's
// own parseJsonEventStream and uiMessageChunkSchema and assembles UI messages with
// readUIMessageStream, and returns the per-chunk errors and assembled messages to Go.
//
// Tests across the project use it to prove that what the server sends is what a
// browser accepts. It needs node and `make deps-npm` (tools/aisdk/node_modules); when
// either is missing it returns an error saying so, and tests fail rather than skip.
package uicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/internal/reporoot"
)

// ScriptPath is the validator script's path relative to the repository root.
const ScriptPath = "tools/aisdk/validate-ui-stream.mjs"

// Report is the validator's result for one stream.
type Report struct {
	// ChunkCount is the number of SSE events other than [DONE].
	ChunkCount int `json:"chunk_count"`
	// ChunkErrors are the chunks the schema rejected (useChat would stop at the first).
	ChunkErrors []ChunkError `json:"chunk_errors"`
	// FramingErrors are SSE framing faults, such as a last event the client drops.
	FramingErrors []string `json:"framing_errors"`
	// Done reports whether the stream ended with `data: [DONE]`.
	Done bool `json:"done"`
	// StreamError is the first protocol error while assembling messages (e.g. a delta
	// without its start), with the index of the chunk that caused it.
	StreamError *StreamError `json:"stream_error"`
	// ErrorChunks are the texts of error chunks the stream carried.
	ErrorChunks []string `json:"error_chunks"`
	// Messages are the UI messages a browser would hold, in order of first appearance.
	Messages []UIMessage `json:"messages"`
}

// ChunkError is a chunk the `ai` schema rejected.
type ChunkError struct {
	Index   int             `json:"index"`
	Message string          `json:"message"`
	Raw     json.RawMessage `json:"raw"`
}

// StreamError is a protocol error raised while assembling messages.
type StreamError struct {
	Index   int    `json:"index"`
	Message string `json:"message"`
}

// UIMessage is an assembled AI SDK UI message.
type UIMessage struct {
	ID       string           `json:"id"`
	Role     string           `json:"role"`
	Metadata json.RawMessage  `json:"metadata,omitempty"`
	Parts    []map[string]any `json:"parts"`
}

// PartsOfType returns the message's parts whose type is typ.
func (m UIMessage) PartsOfType(typ string) []map[string]any {
	var out []map[string]any
	for _, p := range m.Parts {
		if p["type"] == typ {
			out = append(out, p)
		}
	}
	return out
}

// Err returns an error listing every chunk, framing and stream error, or nil.
func (r Report) Err() error {
	var errs []error
	for _, e := range r.ChunkErrors {
		errs = append(errs, fmt.Errorf("chunk %d %s: %s", e.Index, e.Raw, e.Message))
	}
	for _, e := range r.FramingErrors {
		errs = append(errs, fmt.Errorf("framing: %s", e))
	}
	if r.StreamError != nil {
		errs = append(errs, fmt.Errorf("chunk %d: %s", r.StreamError.Index, r.StreamError.Message))
	}
	return errors.Join(errs...)
}

// Validator runs the validator script from one repository root.
type Validator struct {
	root string
	node string
}

// New locates the repository root (ASTRABOX_REPO_ROOT, or the nearest directory above
// the working directory holding go.mod) and checks node and the npm install.
func New() (*Validator, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return NewAt(root)
}

// NewAt checks node and the npm install under root.
func NewAt(root string) (*Validator, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("uicheck: node is not installed (needed to run the `ai` client): %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, ScriptPath)); err != nil {
		return nil, fmt.Errorf("uicheck: validator script missing: %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, "tools/aisdk/node_modules/ai/package.json")); err != nil {
		return nil, fmt.Errorf("uicheck: tools/aisdk/node_modules is missing under %s: run `make deps-npm`", root)
	}
	return &Validator{root: root, node: node}, nil
}

// RepoRoot returns ASTRABOX_REPO_ROOT or the nearest ancestor of the working
// directory that holds go.mod.
func RepoRoot() (string, error) { return reporoot.Find() }

// Chunks validates chunk objects (anything that encodes as one JSON chunk object, such
// as engines.Frame), framed as the SDK frames them and ended with `data: [DONE]`.
// continuation, when not nil, is the assistant message a continuation stream appends to.
func (v *Validator) Chunks(ctx context.Context, chunks []json.RawMessage, continuation json.RawMessage) (Report, error) {
	if chunks == nil {
		chunks = []json.RawMessage{}
	}
	return v.run(ctx, map[string]any{"chunks": chunks, "message": nullable(continuation)})
}

// SSE validates raw SSE bytes as a server sent them.
func (v *Validator) SSE(ctx context.Context, sse []byte, continuation json.RawMessage) (Report, error) {
	return v.run(ctx, map[string]any{"sse": string(sse), "message": nullable(continuation)})
}

func nullable(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func (v *Validator) run(ctx context.Context, input map[string]any) (Report, error) {
	body, err := json.Marshal(input)
	if err != nil {
		return Report{}, fmt.Errorf("uicheck: encode input: %w", err)
	}
	cmd := exec.CommandContext(ctx, v.node, filepath.Join(v.root, ScriptPath))
	cmd.Dir = filepath.Join(v.root, "tools/aisdk")
	cmd.Stdin = bytes.NewReader(body)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Report{}, fmt.Errorf("uicheck: run validator: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var r Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return Report{}, fmt.Errorf("uicheck: decode report: %w", err)
	}
	return r, nil
}

// Encode turns values that encode as chunk objects into raw chunks.
func Encode[T any](items []T) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(items))
	for i, item := range items {
		raw, err := json.Marshal(item)
		if err != nil {
			return nil, fmt.Errorf("uicheck: encode chunk %d: %w", i, err)
		}
		out[i] = raw
	}
	return out, nil
}

// RequireValidChunks validates chunks in a test and fails it (never skips) when the
// validator is unavailable or the stream is invalid. It returns the report.
func RequireValidChunks[T any](t testing.TB, chunks []T) Report {
	t.Helper()
	r := Check(t, chunks, nil)
	if err := r.Err(); err != nil {
		t.Fatalf("the ai client rejects the stream:\n%v", err)
	}
	return r
}

// Check validates chunks in a test, failing it only when validation cannot run; the
// caller inspects the report (for example to assert a rejection).
func Check[T any](t testing.TB, chunks []T, continuation json.RawMessage) Report {
	t.Helper()
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Encode(chunks)
	if err != nil {
		t.Fatal(err)
	}
	r, err := v.Chunks(t.Context(), raw, continuation)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// SSE frames chunks exactly as the SDK does: `data: <json>\n\n` per chunk, then
// `data: [DONE]\n\n`.
func SSE(chunks []json.RawMessage) []byte {
	var b bytes.Buffer
	for _, c := range chunks {
		b.WriteString("data: ")
		_ = json.Compact(&b, c)
		b.WriteString("\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}
