package engines

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Frame is one AI SDK UI Message Stream chunk (ai@7) as stored in a Session's output
// log and sent on its SSE stream. It holds the chunk's members as raw JSON so it
// round-trips losslessly through the database, and encodes deterministically: "type"
// first, then the other members in key order.
//
// Build frames with NewFrame from the typed chunk structs (TextDeltaChunk,
// ToolInputAvailableChunk...) or with the helpers for AstraBox's shared rules
// (ResponseStartFrame, InteractionSegmentFrames, FileChangesFrame...). A Frame is
// immutable: the With methods return a modified copy.
type Frame struct {
	fields map[string]json.RawMessage
}

// Type returns the chunk type, e.g. "text-delta" or "data-file-changes"; empty for the
// zero Frame.
func (f Frame) Type() string {
	var t string
	if raw, ok := f.fields["type"]; ok {
		_ = json.Unmarshal(raw, &t)
	}
	return t
}

// Field returns a member's raw JSON.
func (f Frame) Field(key string) (json.RawMessage, bool) {
	raw, ok := f.fields[key]
	return raw, ok
}

// StringField returns a string member, or "" when absent or not a string.
func (f Frame) StringField(key string) string {
	var s string
	if raw, ok := f.fields[key]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// Keys returns the member names in encoding order.
func (f Frame) Keys() []string {
	keys := make([]string, 0, len(f.fields))
	for k := range f.fields {
		if k != "type" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if _, ok := f.fields["type"]; ok {
		keys = slices.Insert(keys, 0, "type") // within the capacity "type" left
	}
	return keys
}

// IsZero reports whether f is the zero Frame.
func (f Frame) IsZero() bool { return len(f.fields) == 0 }

// WithRaw returns a copy of f with member key set to raw JSON (null when raw is empty).
func (f Frame) WithRaw(key string, raw json.RawMessage) Frame {
	out := f.clone()
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	out.fields[key] = slices.Clone(raw)
	return out
}

// With returns a copy of f with member key set to the JSON encoding of value.
func (f Frame) With(key string, value any) (Frame, error) {
	raw, err := json.Marshal(value)
	if err != nil {
		return Frame{}, fmt.Errorf("frame member %s: %w", key, err)
	}
	return f.WithRaw(key, raw), nil
}

// Without returns a copy of f without member key.
func (f Frame) Without(key string) Frame {
	out := f.clone()
	delete(out.fields, key)
	return out
}

// Equal reports whether two frames encode to the same JSON.
func (f Frame) Equal(o Frame) bool {
	a, errA := f.MarshalJSON()
	b, errB := o.MarshalJSON()
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

func (f Frame) clone() Frame {
	out := Frame{fields: make(map[string]json.RawMessage, len(f.fields)+1)}
	for k, v := range f.fields {
		out.fields[k] = v
	}
	return out
}

// MarshalJSON encodes the frame compactly with "type" first and members in key order;
// the zero Frame encodes as null.
func (f Frame) MarshalJSON() ([]byte, error) {
	if f.IsZero() {
		return []byte("null"), nil
	}
	size := 2
	for k, v := range f.fields {
		size += len(k) + len(v) + 4
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteByte('{')
	for i, k := range f.Keys() {
		if i > 0 {
			buf.WriteByte(',')
		}
		if plainName(k) {
			buf.WriteByte('"')
			buf.WriteString(k)
			buf.WriteByte('"')
		} else {
			key, _ := json.Marshal(k)
			buf.Write(key)
		}
		buf.WriteByte(':')
		if err := json.Compact(buf, f.fields[k]); err != nil {
			return nil, fmt.Errorf("frame member %s: %w", k, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// plainName reports whether a member name encodes as itself in quotes: printable
// ASCII that json.Marshal would not escape.
func plainName[T string | []byte](name T) bool {
	for i := range len(name) {
		if c := name[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// UnmarshalJSON decodes a chunk object; it must have a nonempty string "type".
func (f *Frame) UnmarshalJSON(data []byte) error {
	parsed, err := ParseFrame(data)
	if err != nil {
		return err
	}
	*f = parsed
	return nil
}

// String returns the frame's JSON, for logs and test failures.
func (f Frame) String() string {
	b, err := f.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("<invalid frame: %v>", err)
	}
	return string(b)
}

// ParseFrame decodes one chunk object as stored in the output log.
func ParseFrame(data []byte) (Frame, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return Frame{}, fmt.Errorf("parse frame: %w", err)
	}
	if fields == nil {
		return Frame{}, errors.New("parse frame: not an object")
	}
	var t string
	if err := json.Unmarshal(fields["type"], &t); err != nil || t == "" {
		return Frame{}, errors.New("parse frame: missing string type")
	}
	return Frame{fields: fields}, nil
}

// Chunk is a typed UI Message Stream chunk that NewFrame can encode.
type Chunk interface {
	// ChunkType returns the chunk's "type" member.
	ChunkType() string
}

// NewFrame encodes a typed chunk as a Frame.
func NewFrame(c Chunk) (Frame, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return Frame{}, fmt.Errorf("encode %s chunk: %w", c.ChunkType(), err)
	}
	fields, err := chunkMembers(body)
	if err != nil {
		return Frame{}, fmt.Errorf("encode %s chunk: %w", c.ChunkType(), err)
	}
	tag, _ := json.Marshal(c.ChunkType())
	fields["type"] = tag
	return Frame{fields: fields}, nil
}

// chunkMembers splits a chunk's encoding into its members. json.Marshal's output is
// valid and compact, so the members of a chunk whose names are plain are the encoding's
// own bytes, found in one pass (decoding into a map checked and copied every value
// again: most of an adapter's cost per streamed delta); other names are decoded.
func chunkMembers(body []byte) (map[string]json.RawMessage, error) {
	var stack [8]objectMember
	if members, ok := plainMembers(body, stack[:0]); ok {
		fields := make(map[string]json.RawMessage, len(members)+1)
		for _, m := range members {
			fields[string(m.name)] = m.value
		}
		return fields, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	return fields, nil
}

// MustFrame is NewFrame for chunks whose members are known to encode (string fields,
// valid raw JSON); it panics on an encoding error, which is a programming error.
func MustFrame(c Chunk) Frame {
	f, err := NewFrame(c)
	if err != nil {
		panic(err)
	}
	return f
}

// PublicFrame applies the presentation rule every Agent program shares: tool input
// parts (tool-input-start, tool-input-available, tool-input-error) carry dynamic: true,
// so the browser's AI SDK builds a generic dynamic-tool part that any console renders
// (without it the SDK builds a typed tool-<name> part every console reader ignores).
// Tool output parts do not carry it: the SDK matches them by toolCallId to the part the
// input parts created, so PublicFrame removes a dynamic flag from them. Other frames
// pass unchanged. NewResponseOutput applies it; adapters need no copy of the rule.
func PublicFrame(f Frame) Frame {
	switch f.Type() {
	case "tool-input-start", "tool-input-available", "tool-input-error":
		return f.WithRaw("dynamic", json.RawMessage("true"))
	case "tool-output-available", "tool-output-error":
		if _, ok := f.fields["dynamic"]; ok {
			return f.Without("dynamic")
		}
	}
	return f
}
