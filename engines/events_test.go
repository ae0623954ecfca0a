package engines_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

func cursorAt(t *testing.T, gen string, pos any) engines.RuntimeCursor {
	t.Helper()
	c, err := engines.NewCursor(gen, pos)
	require.NoError(t, err)
	return c
}

// sampleEvents returns one valid event of every type.
func sampleEvents(t *testing.T) []engines.Event {
	t.Helper()
	c := func(n int) engines.RuntimeCursor { return cursorAt(t, "gen-1", map[string]int{"offset": n}) }
	contract := engines.ToolApprovalContract(engines.NativeRequest{Type: "can_use_tool", ID: "r1", Payload: json.RawMessage(`{"a":1}`)},
		"call-1", "Bash", json.RawMessage(`{"command":"ls"}`))
	return []engines.Event{
		engines.InputAdmitted{Cursor: c(1), InputID: "in-1"},
		engines.ResponseStarted{Cursor: c(2), ResponseID: "resp-1", Origin: engines.OriginInput, InputIDs: []string{"in-1"}},
		engines.NewResponseOutput(c(3), "resp-1", engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: "call-1", ToolName: "Bash"})),
		engines.NewResponseOutput(c(4), "", engines.ResumeCursorFrame(1)),
		engines.InteractionOpened{Cursor: c(5), ResponseID: "resp-1", InteractionID: "int-1", Contract: contract},
		engines.StatusChanged{Cursor: c(6), Status: engines.StatusWaiting},
		engines.InteractionClosed{Cursor: c(7), InteractionID: "int-1", Reason: engines.ClosureAnswered},
		engines.ResponseEnded{Cursor: c(8), ResponseID: "resp-1", Outcome: engines.OutcomeFailed, NativeReason: "api_error",
			Usage: json.RawMessage(`{"input_tokens":3}`), Error: &engines.ResponseError{Message: "API Error: 400"}},
		engines.ResponseEnded{Cursor: c(9), ResponseID: "resp-2", Outcome: engines.OutcomeCompleted, NativeReason: "end_turn"},
		engines.RuntimeDiagnostic{Cursor: c(10), EventType: "stderr", Raw: json.RawMessage(`"warning"`)},
	}
}

func TestEventEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	seen := map[engines.EventType]bool{}
	for _, ev := range sampleEvents(t) {
		require.NoError(t, ev.Validate(), "%T", ev)
		data, err := engines.MarshalEvent(ev)
		require.NoError(t, err)
		var head struct {
			Type   string          `json:"type"`
			Cursor json.RawMessage `json:"cursor"`
		}
		require.NoError(t, json.Unmarshal(data, &head))
		require.Equal(t, string(ev.Type()), head.Type)
		require.JSONEq(t, fmt.Sprintf(`{"generation":"gen-1","position":%s}`, ev.EventCursor().Position), string(head.Cursor))

		back, err := engines.UnmarshalEvent(data)
		require.NoError(t, err)
		again, err := engines.MarshalEvent(back)
		require.NoError(t, err)
		require.Equal(t, string(data), string(again), "encoding must be stable across a round trip")
		require.True(t, back.EventCursor().Equal(ev.EventCursor()))
		seen[ev.Type()] = true
	}
	require.Len(t, seen, 8, "the sample must cover the closed event set")
}

func TestEventEncodingIsPinned(t *testing.T) {
	t.Parallel()
	ev := engines.ResponseStarted{Cursor: engines.RuntimeCursor{Generation: "g", Position: json.RawMessage(`{ "n" : 1 }`)},
		ResponseID: "r", Origin: engines.OriginEngine}
	data, err := engines.MarshalEvent(ev)
	require.NoError(t, err)
	require.Equal(t, `{"type":"response_started","cursor":{"generation":"g","position":{"n":1}},"response_id":"r","origin":"engine","input_ids":[]}`, string(data))
	out := engines.NewResponseOutput(engines.RuntimeCursor{Generation: "g", Position: json.RawMessage(`2`)}, "r",
		engines.MustFrame(engines.TextDeltaChunk{ID: "t", Delta: "hi"}))
	data, err = engines.MarshalEvent(out)
	require.NoError(t, err)
	require.Equal(t, `{"type":"response_output","cursor":{"generation":"g","position":2},"response_id":"r","frame":{"type":"text-delta","delta":"hi","id":"t"}}`, string(data))
}

func TestEventEnvelopeInsideAnotherDocument(t *testing.T) {
	t.Parallel()
	type line struct {
		Seq   int                   `json:"seq"`
		Event engines.EventEnvelope `json:"event"`
	}
	in := line{Seq: 3, Event: engines.EventEnvelope{Event: sampleEvents(t)[0]}}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	var out line
	require.NoError(t, json.Unmarshal(data, &out))
	require.Equal(t, in.Event.Event, out.Event.Event)
}

func TestUnmarshalEventRejects(t *testing.T) {
	t.Parallel()
	for name, data := range map[string]string{
		"unknown type":     `{"type":"response_paused","cursor":{"generation":"g","position":1}}`,
		"not an object":    `[1]`,
		"no generation":    `{"type":"input_admitted","cursor":{"generation":"","position":1},"input_id":"i"}`,
		"bad origin":       `{"type":"response_started","cursor":{"generation":"g","position":1},"response_id":"r","origin":"person","input_ids":["i"]}`,
		"input no ids":     `{"type":"response_started","cursor":{"generation":"g","position":1},"response_id":"r","origin":"input","input_ids":[]}`,
		"bad closure":      `{"type":"interaction_closed","cursor":{"generation":"g","position":1},"interaction_id":"x","reason":"ignored"}`,
		"bad outcome":      `{"type":"response_ended","cursor":{"generation":"g","position":1},"response_id":"r","outcome":"succeeded"}`,
		"bad status":       `{"type":"status_changed","cursor":{"generation":"g","position":1},"status":"busy"}`,
		"frame no type":    `{"type":"response_output","cursor":{"generation":"g","position":1},"frame":{"id":"x"}}`,
		"frame no output":  `{"type":"response_output","cursor":{"generation":"g","position":1},"frame":{"type":"tool-output-available","toolCallId":"c"}}`,
		"bad contract":     `{"type":"interaction_opened","cursor":{"generation":"g","position":1},"response_id":"r","interaction_id":"i","contract":{"presentation":"chat"}}`,
		"missing input id": `{"type":"input_admitted","cursor":{"generation":"g","position":1}}`,
	} {
		_, err := engines.UnmarshalEvent([]byte(data))
		require.Error(t, err, name)
	}
}

func TestCursor(t *testing.T) {
	t.Parallel()
	a := engines.RuntimeCursor{Generation: "g", Position: json.RawMessage(`{"a": 1, "b": [1, 2]}`)}
	b := engines.RuntimeCursor{Generation: "g", Position: json.RawMessage(`{"a":1,"b":[1,2]}`)}
	require.True(t, a.Equal(b))
	require.False(t, a.Equal(engines.RuntimeCursor{Generation: "h", Position: b.Position}))
	var pos struct{ A int }
	require.NoError(t, a.DecodePosition(&pos))
	require.Equal(t, 1, pos.A)
	data, err := json.Marshal(a)
	require.NoError(t, err)
	require.Equal(t, `{"generation":"g","position":{"a":1,"b":[1,2]}}`, string(data))
	require.Error(t, engines.RuntimeCursor{Generation: "g"}.Validate())
	require.Error(t, engines.RuntimeCursor{Position: json.RawMessage(`1`)}.Validate())
	data, err = json.Marshal(engines.RuntimeCursor{Generation: "g"})
	require.NoError(t, err)
	require.Equal(t, `{"generation":"g","position":null}`, string(data))
}

func TestErrorsMatchWithIsAndAs(t *testing.T) {
	t.Parallel()
	var err error = fmt.Errorf("submit: %w", &engines.RuntimeInputRefused{Code: "invalid_mode", Message: "no", StatusCode: 409})
	require.ErrorIs(t, err, engines.ErrRuntimeInputRefused)
	var refused *engines.RuntimeInputRefused
	require.ErrorAs(t, err, &refused)
	require.Equal(t, 409, refused.Status())
	require.Equal(t, 422, (&engines.RuntimeInputRefused{}).Status())

	err = fmt.Errorf("events: %w", &engines.RuntimeCursorExpired{Cursor: engines.RuntimeCursor{Generation: "old"}, Reason: "new runner"})
	require.ErrorIs(t, err, engines.ErrRuntimeCursorExpired)
	require.NotErrorIs(t, err, engines.ErrInteractionNotOpen)
	var expired *engines.RuntimeCursorExpired
	require.ErrorAs(t, err, &expired)
	require.Equal(t, "old", expired.Cursor.Generation)

	err = fmt.Errorf("answer: %w", &engines.InteractionNotOpen{InteractionID: "int-1"})
	require.ErrorIs(t, err, engines.ErrInteractionNotOpen)
	var notOpen *engines.InteractionNotOpen
	require.ErrorAs(t, err, &notOpen)

	cause := errors.New("store down")
	err = &engines.RuntimeStateSaveRequired{SandboxID: "sb-1", RuntimeIdentity: engines.RuntimeIdentity{Account: "u1"}, Cause: cause}
	require.ErrorIs(t, err, cause)
	require.Contains(t, err.Error(), "sb-1")
}
