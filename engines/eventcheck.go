package engines

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Validate implements Event.
func (e InputAdmitted) Validate() error {
	return joinCheck(e.Cursor, requireID("input_id", e.InputID))
}

// Validate implements Event.
func (e ResponseStarted) Validate() error {
	var errs []error
	errs = append(errs, requireID("response_id", e.ResponseID))
	switch e.Origin {
	case OriginInput:
		if len(e.InputIDs) == 0 {
			errs = append(errs, errors.New("origin input requires input_ids"))
		}
	case OriginEngine:
	default:
		errs = append(errs, fmt.Errorf("origin %q is not input or engine", e.Origin))
	}
	return joinCheck(e.Cursor, errs...)
}

// Validate implements Event.
func (e ResponseOutput) Validate() error {
	var errs []error
	if e.Frame.Type() == "" {
		errs = append(errs, errors.New("frame has no type"))
	} else if err := ValidateFrame(e.Frame); err != nil {
		errs = append(errs, err)
	}
	return joinCheck(e.Cursor, errs...)
}

// Validate implements Event.
func (e InteractionOpened) Validate() error {
	var errs []error
	errs = append(errs, requireID("response_id", e.ResponseID), requireID("interaction_id", e.InteractionID))
	if err := ValidateInteractionContract(e.Contract); err != nil {
		errs = append(errs, err)
	}
	return joinCheck(e.Cursor, errs...)
}

// Validate implements Event.
func (e InteractionClosed) Validate() error {
	var errs []error
	errs = append(errs, requireID("interaction_id", e.InteractionID))
	switch e.Reason {
	case ClosureAnswered, ClosureWithdrawn, ClosureExpired:
	default:
		errs = append(errs, fmt.Errorf("closure reason %q is not answered, withdrawn or expired", e.Reason))
	}
	return joinCheck(e.Cursor, errs...)
}

// Validate implements Event.
func (e ResponseEnded) Validate() error {
	var errs []error
	errs = append(errs, requireID("response_id", e.ResponseID))
	switch e.Outcome {
	case OutcomeCompleted, OutcomeFailed, OutcomeCancelled:
	default:
		errs = append(errs, fmt.Errorf("outcome %q is not completed, failed or cancelled", e.Outcome))
	}
	if len(e.Usage) > 0 && !json.Valid(e.Usage) {
		errs = append(errs, errors.New("usage is not JSON"))
	}
	return joinCheck(e.Cursor, errs...)
}

// Validate implements Event.
func (e StatusChanged) Validate() error {
	var errs []error
	switch e.Status {
	case StatusWorking, StatusWaiting, StatusIdle:
	default:
		errs = append(errs, fmt.Errorf("status %q is not working, waiting or idle", e.Status))
	}
	return joinCheck(e.Cursor, errs...)
}

// Validate implements Event.
func (e RuntimeDiagnostic) Validate() error {
	var errs []error
	errs = append(errs, requireID("event_type", e.EventType))
	if len(e.Raw) > 0 && !json.Valid(e.Raw) {
		errs = append(errs, errors.New("raw is not JSON"))
	}
	return joinCheck(e.Cursor, errs...)
}

func requireID(name, value string) error {
	if value == "" {
		return fmt.Errorf("%s is empty", name)
	}
	return nil
}

func joinCheck(c RuntimeCursor, errs ...error) error {
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
