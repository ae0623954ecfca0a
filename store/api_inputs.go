package store

import (
	"context"
	"fmt"
)

// ListHeldInputsBySession returns the Session's accepted inputs the program has not admitted
// yet (pending or delivered), in accepted order.
func (s *Store) ListHeldInputsBySession(ctx context.Context, sessionID string) ([]Input, error) {
	var out []Input
	err := s.conn(ctx).Where("session_id = ? AND state IN ?", sessionID, []string{InputPending, InputDelivered}).
		Order("seq").Find(&out).Error
	return out, mapError("list held inputs", err)
}

// CountHeldInputs counts the Session's held inputs (for admission policies).
func (s *Store) CountHeldInputs(ctx context.Context, sessionID string) (int, error) {
	var n int64
	err := s.conn(ctx).Model(&Input{}).Where("session_id = ? AND state IN ?", sessionID, []string{InputPending, InputDelivered}).Count(&n).Error
	return int(n), mapError("count held inputs", err)
}

// GetInputByClientMessageID returns the Session's input with this client_message_id.
func (s *Store) GetInputByClientMessageID(ctx context.Context, sessionID, clientMessageID string) (Input, error) {
	found, err := s.findInputByClientMessageID(ctx, sessionID, clientMessageID)
	if err != nil {
		return Input{}, err
	}
	if found == nil {
		return Input{}, fmt.Errorf("get input %q of session %s: %w", clientMessageID, sessionID, ErrNotFound)
	}
	return *found, nil
}

// ListInputsByIDs returns the Session's inputs with these ids, in accepted order.
func (s *Store) ListInputsByIDs(ctx context.Context, sessionID string, ids []string) ([]Input, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []Input
	err := s.conn(ctx).Where("session_id = ? AND id IN ?", sessionID, ids).Order("seq").Find(&out).Error
	return out, mapError("list inputs by ids", err)
}
