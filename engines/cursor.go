package engines

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// RuntimeCursor is the position to resume reading events after. Every event carries
// the cursor to resume after it; the platform stores it in the same transaction as the
// parts it relayed and a reader that takes over resumes from it.
type RuntimeCursor struct {
	// Generation names the runtime incarnation the position belongs to: a runner
	// process, a backend epoch, a vendor session.
	Generation string `json:"generation"`
	// Position is the adapter's own resume state as JSON. AstraBox stores it and never
	// interprets it. Put there any translation state the vendor's record cannot rebuild.
	Position json.RawMessage `json:"position"`
}

// NewCursor builds a cursor whose position is the JSON encoding of position.
func NewCursor(generation string, position any) (RuntimeCursor, error) {
	raw, err := json.Marshal(position)
	if err != nil {
		return RuntimeCursor{}, fmt.Errorf("encode cursor position: %w", err)
	}
	return RuntimeCursor{Generation: generation, Position: raw}, nil
}

// DecodePosition decodes the cursor's position into v.
func (c RuntimeCursor) DecodePosition(v any) error {
	if err := json.Unmarshal(c.Position, v); err != nil {
		return fmt.Errorf("decode cursor position: %w", err)
	}
	return nil
}

// Equal reports whether two cursors name the same position: the same generation and
// positions whose JSON is equal once insignificant whitespace is removed.
func (c RuntimeCursor) Equal(o RuntimeCursor) bool {
	if c.Generation != o.Generation {
		return false
	}
	return bytes.Equal(compactJSON(c.Position), compactJSON(o.Position))
}

// Validate checks that the cursor has a generation and a JSON position.
func (c RuntimeCursor) Validate() error {
	if c.Generation == "" {
		return fmt.Errorf("cursor has no generation")
	}
	if len(c.Position) == 0 || !json.Valid(c.Position) {
		return fmt.Errorf("cursor position is not JSON")
	}
	return nil
}

// MarshalJSON encodes the cursor with a compact position (null when empty), so that a
// cursor read back from the database encodes to the same bytes.
func (c RuntimeCursor) MarshalJSON() ([]byte, error) {
	pos := compactJSON(c.Position)
	if len(pos) == 0 {
		pos = []byte("null")
	}
	type plain struct {
		Generation string          `json:"generation"`
		Position   json.RawMessage `json:"position"`
	}
	return json.Marshal(plain{Generation: c.Generation, Position: pos})
}

func compactJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}
