package engines

import (
	"errors"
	"fmt"
)

// Validate checks a runtime's account of itself before the reader reconciles with it:
// known origins, statuses and closure reasons, valid contracts, no interaction both
// pending and closed, and a valid cursor when present.
func (s RuntimeState) Validate() error {
	var errs []error
	switch s.Status {
	case StatusWorking, StatusWaiting, StatusIdle:
	default:
		errs = append(errs, fmt.Errorf("status %q is not working, waiting or idle", s.Status))
	}
	for _, r := range s.OpenResponses {
		if r.ResponseID == "" {
			errs = append(errs, errors.New("open response without id"))
		}
		if r.Origin != OriginInput && r.Origin != OriginEngine {
			errs = append(errs, fmt.Errorf("open response %s has origin %q", r.ResponseID, r.Origin))
		}
	}
	pending := map[string]bool{}
	for _, p := range s.PendingInteractions {
		pending[p.InteractionID] = true
		if p.InteractionID == "" || p.ResponseID == "" {
			errs = append(errs, errors.New("pending interaction without interaction or response id"))
		}
		if err := ValidateInteractionContract(p.Contract); err != nil {
			errs = append(errs, fmt.Errorf("pending interaction %s: %w", p.InteractionID, err))
		}
	}
	for _, c := range s.ClosedInteractions {
		switch c.Reason {
		case ClosureAnswered, ClosureWithdrawn, ClosureExpired:
		default:
			errs = append(errs, fmt.Errorf("closed interaction %s has reason %q", c.InteractionID, c.Reason))
		}
		if pending[c.InteractionID] {
			errs = append(errs, fmt.Errorf("interaction %s is both pending and closed", c.InteractionID))
		}
	}
	if s.Cursor != nil {
		if err := s.Cursor.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
