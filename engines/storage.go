package engines

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
)

// Frames, cursors and event envelopes are stored as JSON (jsonb) columns; these
// implement database/sql's Valuer and Scanner with the same stable encodings.

// Value implements driver.Valuer.
func (f Frame) Value() (driver.Value, error) { return f.MarshalJSON() }

// Scan implements sql.Scanner.
func (f *Frame) Scan(src any) error {
	data, err := scanBytes(src)
	if err != nil {
		return fmt.Errorf("scan frame: %w", err)
	}
	return f.UnmarshalJSON(data)
}

// Value implements driver.Valuer.
func (c RuntimeCursor) Value() (driver.Value, error) { return c.MarshalJSON() }

// Scan implements sql.Scanner.
func (c *RuntimeCursor) Scan(src any) error {
	data, err := scanBytes(src)
	if err != nil {
		return fmt.Errorf("scan cursor: %w", err)
	}
	if err := json.Unmarshal(data, c); err != nil {
		return fmt.Errorf("scan cursor: %w", err)
	}
	return nil
}

// Value implements driver.Valuer.
func (e EventEnvelope) Value() (driver.Value, error) { return MarshalEvent(e.Event) }

// Scan implements sql.Scanner.
func (e *EventEnvelope) Scan(src any) error {
	data, err := scanBytes(src)
	if err != nil {
		return fmt.Errorf("scan event: %w", err)
	}
	return e.UnmarshalJSON(data)
}

func scanBytes(src any) ([]byte, error) {
	switch v := src.(type) {
	case []byte:
		return append([]byte(nil), v...), nil
	case string:
		return []byte(v), nil
	default:
		return nil, fmt.Errorf("unsupported source type %T", src)
	}
}

// FinishesResponse reports whether a frame is the finish part that ends a response's
// UI message, as opposed to the finish with finishReason "tool-calls" that closes an
// interaction segment of a response that will continue under the same messageId.
func FinishesResponse(f Frame) bool {
	return f.Type() == "finish" && f.StringField("finishReason") != string(FinishToolCalls)
}
