package scriptengine

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/astrabox/astrabox/engines"
)

// vendorEvent is one line of scriptagent's output.
type vendorEvent struct {
	Ev           string   `json:"ev"`
	InputID      string   `json:"input_id"`
	InputIDs     []string `json:"input_ids"`
	ResponseID   string   `json:"response_id"`
	Status       string   `json:"status"`
	Text         string   `json:"text"`
	Outcome      string   `json:"outcome"`
	NativeReason string   `json:"native_reason"`
	AtMicros     int64    `json:"at_us"`
	TextID       string   `json:"text_id"`
	Interaction  string   `json:"interaction_id"`
	Decision     string   `json:"decision"`
	Child        string   `json:"child"`
	ControlRef   string   `json:"control_ref"`
}

// textID is the text part id of the event's segment.
func (v vendorEvent) textID() string {
	if v.TextID == "" {
		return "t"
	}
	return v.TextID
}

// askContract is the contract of scriptagent's question, carrying its request verbatim.
func askContract(interactionID string, raw []byte) engines.InteractionContract {
	return engines.DecisionContract(engines.NativeRequest{Type: "ask", ID: interactionID, Payload: json.RawMessage(raw)},
		"Continue?", engines.DecisionOption{ID: "yes", Label: "Yes"}, engines.DecisionOption{ID: "no", Label: "No"})
}

// translate turns one journal line into its runtime events; each event's cursor is
// (line offset, index), so a reader resumes inside a line that yields several.
func (c *Client) translate(line engines.OutputLine) []engines.Event {
	var v vendorEvent
	if err := json.Unmarshal(line.Data, &v); err != nil {
		raw, _ := json.Marshal(string(line.Data))
		return c.withCursors(line.Offset, engines.RuntimeDiagnostic{EventType: "unparsed_line", Raw: raw})
	}
	r := v.ResponseID
	switch v.Ev {
	case "admitted":
		return c.withCursors(line.Offset, engines.InputAdmitted{InputID: v.InputID})
	case "status":
		return c.withCursors(line.Offset, engines.StatusChanged{Status: engines.RuntimeStatus(v.Status)})
	case "started":
		return c.withCursors(line.Offset,
			engines.ResponseStarted{ResponseID: r, Origin: engines.OriginInput, InputIDs: v.InputIDs},
			engines.NewResponseOutput(engines.RuntimeCursor{}, r, engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: r, InputIDs: v.InputIDs, Origin: engines.OriginInput})),
			engines.NewResponseOutput(engines.RuntimeCursor{}, r, engines.MustFrame(engines.TextStartChunk{ID: v.textID()})))
	case "ask":
		contract := askContract(v.Interaction, line.Data)
		evs := []engines.Event{
			engines.NewResponseOutput(engines.RuntimeCursor{}, r, engines.MustFrame(engines.TextEndChunk{ID: v.textID()})),
			engines.InteractionOpened{ResponseID: r, InteractionID: v.Interaction, Contract: contract},
		}
		frames, err := engines.InteractionSegmentFrames(r, v.Interaction, contract)
		if err != nil {
			panic(fmt.Errorf("scriptengine: %w", err))
		}
		for _, f := range frames {
			evs = append(evs, engines.NewResponseOutput(engines.RuntimeCursor{}, r, f))
		}
		return c.withCursors(line.Offset, append(evs, engines.StatusChanged{Status: engines.StatusWaiting})...)
	case "answered":
		return c.withCursors(line.Offset,
			engines.InteractionClosed{InteractionID: v.Interaction, Reason: engines.ClosureAnswered},
			engines.StatusChanged{Status: engines.StatusWorking},
			engines.NewResponseOutput(engines.RuntimeCursor{}, r, engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: r, InputIDs: v.InputIDs, Origin: engines.OriginInput})),
			engines.NewResponseOutput(engines.RuntimeCursor{}, r, engines.MustFrame(engines.TextStartChunk{ID: v.textID()})))
	case "delta":
		delta := engines.TextDeltaChunk{ID: v.textID(), Delta: v.Text}
		if v.AtMicros > 0 {
			delta.ProviderMetadata = engines.ProviderMetadata{"scriptagent": {"at_us": v.AtMicros}}
		}
		return c.withCursors(line.Offset, engines.NewResponseOutput(engines.RuntimeCursor{}, r, engines.MustFrame(delta)))
	case "child":
		// A child's running report belongs to the response that started it; later
		// reports belong to no response.
		f, err := engines.SubagentFrame(c.sessionID, engines.ChildRun{NativeRef: v.Child, Status: v.Status, Title: v.Text, ControlRef: v.ControlRef})
		if err != nil {
			panic(fmt.Errorf("scriptengine: %w", err))
		}
		return c.withCursors(line.Offset, engines.NewResponseOutput(engines.RuntimeCursor{}, r, f))
	case "ended":
		ended := engines.ResponseEnded{ResponseID: r, Outcome: engines.ResponseOutcome(v.Outcome), NativeReason: v.NativeReason}
		evs := []engines.Event{engines.NewResponseOutput(engines.RuntimeCursor{}, r, engines.MustFrame(engines.TextEndChunk{ID: v.textID()}))}
		for _, f := range engines.ResponseEndFrames(ended) {
			evs = append(evs, engines.NewResponseOutput(engines.RuntimeCursor{}, r, f))
		}
		return c.withCursors(line.Offset, append(evs, ended)...)
	}
	raw := json.RawMessage(line.Data)
	return c.withCursors(line.Offset, engines.RuntimeDiagnostic{EventType: v.Ev, Raw: raw})
}

// withCursors sets each event's cursor to (offset, its index).
func (c *Client) withCursors(offset int64, evs ...engines.Event) []engines.Event {
	out := make([]engines.Event, len(evs))
	for i, ev := range evs {
		cur, _ := engines.NewCursor(c.generation, position{Offset: offset, Index: i})
		out[i] = setCursor(ev, cur)
	}
	return out
}

func setCursor(ev engines.Event, cur engines.RuntimeCursor) engines.Event {
	switch e := ev.(type) {
	case engines.InputAdmitted:
		e.Cursor = cur
		return e
	case engines.ResponseStarted:
		e.Cursor = cur
		return e
	case engines.ResponseOutput:
		e.Cursor = cur
		return e
	case engines.ResponseEnded:
		e.Cursor = cur
		return e
	case engines.StatusChanged:
		e.Cursor = cur
		return e
	case engines.InteractionOpened:
		e.Cursor = cur
		return e
	case engines.InteractionClosed:
		e.Cursor = cur
		return e
	case engines.RuntimeDiagnostic:
		e.Cursor = cur
		return e
	}
	panic(errors.New("scriptengine: unexpected event type"))
}
