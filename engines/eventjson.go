package engines

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MarshalEvent encodes an event as its stable tagged envelope: one JSON object whose
// "type" member is the EventType followed by the event's own fields, e.g.
//
//	{"type":"input_admitted","cursor":{"generation":"g1","position":7},"input_id":"in_1"}
//
// Recordings and the platform database store this form.
func MarshalEvent(ev Event) ([]byte, error) {
	if ev == nil {
		return nil, fmt.Errorf("marshal event: nil event")
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("marshal %s event: %w", ev.Type(), err)
	}
	tag, err := json.Marshal(ev.Type())
	if err != nil {
		return nil, fmt.Errorf("marshal %s event tag: %w", ev.Type(), err)
	}
	// Every event encodes as a non-empty JSON object, so the tag is spliced in front of
	// its first member; this keeps the member order stable and readable.
	var out bytes.Buffer
	out.Grow(len(body) + len(tag) + 10)
	out.WriteString(`{"type":`)
	out.Write(tag)
	out.WriteByte(',')
	out.Write(body[1:])
	return out.Bytes(), nil
}

// UnmarshalEvent decodes an envelope written by MarshalEvent and validates the event.
func UnmarshalEvent(data []byte) (Event, error) {
	var head struct {
		Type EventType `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("unmarshal event envelope: %w", err)
	}
	var ev Event
	var err error
	switch head.Type {
	case EventInputAdmitted:
		ev, err = decodeAs[InputAdmitted](data)
	case EventResponseStarted:
		ev, err = decodeAs[ResponseStarted](data)
	case EventResponseOutput:
		ev, err = decodeAs[ResponseOutput](data)
	case EventInteractionOpened:
		ev, err = decodeAs[InteractionOpened](data)
	case EventInteractionClosed:
		ev, err = decodeAs[InteractionClosed](data)
	case EventResponseEnded:
		ev, err = decodeAs[ResponseEnded](data)
	case EventStatusChanged:
		ev, err = decodeAs[StatusChanged](data)
	case EventRuntimeDiagnostic:
		ev, err = decodeAs[RuntimeDiagnostic](data)
	default:
		return nil, fmt.Errorf("unmarshal event: unknown type %q", head.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("unmarshal %s event: %w", head.Type, err)
	}
	if err := ev.Validate(); err != nil {
		return nil, fmt.Errorf("unmarshal %s event: %w", head.Type, err)
	}
	return ev, nil
}

func decodeAs[T Event](data []byte) (Event, error) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// EventEnvelope wraps an Event so it can be a field of another JSON document (a
// recording line, a database row, a Temporal payload) with the tagged encoding.
type EventEnvelope struct {
	Event Event
}

// MarshalJSON implements json.Marshaler.
func (e EventEnvelope) MarshalJSON() ([]byte, error) { return MarshalEvent(e.Event) }

// UnmarshalJSON implements json.Unmarshaler.
func (e *EventEnvelope) UnmarshalJSON(data []byte) error {
	ev, err := UnmarshalEvent(data)
	if err != nil {
		return err
	}
	e.Event = ev
	return nil
}
