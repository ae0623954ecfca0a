package activities

import (
	"encoding/json"
	"fmt"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// opsFor translates one runtime event into the facts the Relay records; none for
// events that reach no table. A diagnostic is kept for operators, the Session's
// latest keep of them.
func opsFor(ev engines.Event, keep int) ([]store.RelayOp, error) {
	if d, isDiag := ev.(engines.RuntimeDiagnostic); isDiag {
		return []store.RelayOp{{Diagnostic: &store.DiagnosticRecord{EventType: d.EventType, Raw: d.Raw, Keep: keep}}}, nil
	}
	op, ok, err := opFor(ev)
	if err != nil || !ok {
		return nil, err
	}
	ops := []store.RelayOp{op}
	if out, isOutput := ev.(engines.ResponseOutput); isOutput {
		if child := reportedChildRun(out.Frame, op.Part.ResponseID); child != nil {
			ops = append(ops, store.RelayOp{ChildRun: child})
		}
	}
	return ops, nil
}

// reportedChildRun is the child run a data-subagent part with a run reports, or nil
// for any other part. The part names the child by its public id only; a report that
// does not decode is still recorded as a part, it just makes no row.
func reportedChildRun(frame engines.Frame, responseID *string) *store.ChildRunReport {
	if frame.Type() != "data-subagent" {
		return nil
	}
	raw, ok := frame.Field("data")
	if !ok {
		return nil
	}
	var data engines.SubagentData
	if json.Unmarshal(raw, &data) != nil || data.Run == nil || data.ChildRunID == "" {
		return nil
	}
	run := data.Run
	return &store.ChildRunReport{
		ID:               data.ChildRunID,
		ParentID:         optional(data.ParentChildRunID),
		ResponseID:       responseID,
		Name:             run.Title,
		AgentType:        run.AgentType,
		ParentToolCallID: optional(run.ParentToolCallID),
		Status:           run.Status,
		Usage:            run.Usage,
		ControlRef:       optional(run.ControlRef),
	}
}

// optional is s as a nullable column value: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// opFor translates one runtime event into its main fact; ok is false for events that
// reach no table.
func opFor(ev engines.Event) (op store.RelayOp, ok bool, err error) {
	switch e := ev.(type) {
	case engines.InputAdmitted:
		return store.RelayOp{AdmitInput: e.InputID}, true, nil
	case engines.ResponseStarted:
		return store.RelayOp{StartResponse: &store.ResponseStart{ResponseID: e.ResponseID, Origin: string(e.Origin), InputIDs: e.InputIDs}}, true, nil
	case engines.ResponseOutput:
		// The Frame's own encoding, not json.Marshal's copy of it: the log keeps
		// frames as jsonb, so json.Marshal's second pass (checking, compacting and
		// HTML-escaping what MarshalJSON wrote) would change nothing stored.
		frame, err := e.Frame.MarshalJSON()
		if err != nil {
			return op, false, fmt.Errorf("encode frame: %w", err)
		}
		part := store.NewPart{Frame: frame}
		if e.ResponseID != "" {
			id := e.ResponseID
			part.ResponseID = &id
		}
		return store.RelayOp{Part: &part}, true, nil
	case engines.InteractionOpened:
		contract, err := json.Marshal(e.Contract)
		if err != nil {
			return op, false, fmt.Errorf("encode interaction contract: %w", err)
		}
		var responseID *string
		if e.ResponseID != "" {
			responseID = &e.ResponseID
		}
		return store.RelayOp{OpenInteraction: &store.InteractionOpening{InteractionID: e.InteractionID, ResponseID: responseID, Contract: contract}}, true, nil
	case engines.InteractionClosed:
		return store.RelayOp{CloseInteraction: &store.InteractionClosing{InteractionID: e.InteractionID, State: string(e.Reason), Reason: string(e.Reason)}}, true, nil
	case engines.ResponseEnded:
		reason := e.NativeReason
		end := store.ResponseEnd{ResponseID: e.ResponseID, Outcome: string(e.Outcome), NativeReason: &reason, Usage: e.Usage}
		if e.Error != nil {
			raw, err := json.Marshal(e.Error)
			if err != nil {
				return op, false, fmt.Errorf("encode response error: %w", err)
			}
			end.Error = raw
		}
		return store.RelayOp{EndResponse: &end}, true, nil
	case engines.StatusChanged:
		return store.RelayOp{Status: string(e.Status)}, true, nil
	default:
		return op, false, nil
	}
}

// cursorUpdate is the stored form of a runtime cursor.
func cursorUpdate(c engines.RuntimeCursor) *store.CursorUpdate {
	pos := c.Position
	if len(pos) == 0 {
		pos = json.RawMessage("null")
	}
	return &store.CursorUpdate{Generation: c.Generation, Position: pos}
}

// lostResponse is how reconciliation closes a response the runtime can no longer
// end: failed, native_reason runtime_lost, with an error part and a finish part.
func lostResponse(responseID string) (store.FailedResponse, error) {
	frames := engines.ResponseEndFrames(engines.ResponseEnded{
		ResponseID:   responseID,
		Outcome:      engines.OutcomeFailed,
		NativeReason: engines.NativeReasonRuntimeLost,
		Error:        &engines.ResponseError{Code: engines.NativeReasonRuntimeLost, Message: "The Agent program's runtime was lost before the response ended"},
	})
	out := store.FailedResponse{ResponseID: responseID}
	errJSON, err := json.Marshal(engines.ResponseError{Code: engines.NativeReasonRuntimeLost, Message: "runtime lost"})
	if err != nil {
		return out, fmt.Errorf("encode response error: %w", err)
	}
	out.Error = errJSON
	for _, f := range frames {
		raw, err := json.Marshal(f)
		if err != nil {
			return out, fmt.Errorf("encode frame: %w", err)
		}
		id := responseID
		out.Parts = append(out.Parts, store.NewPart{ResponseID: &id, Frame: raw})
	}
	return out, nil
}
