package store

import "context"

// ListResponses returns every response of a Session in the order they started.
func (s *Store) ListResponses(ctx context.Context, sessionID string) ([]ResponseRecord, error) {
	var out []ResponseRecord
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("started_seq").Find(&out).Error
	return out, mapError("list responses", err)
}

// ListResponseParts returns the output parts recorded for the Session's responses
// responseIDs, in seq order.
func (s *Store) ListResponseParts(ctx context.Context, sessionID string, responseIDs []string) ([]OutputPart, error) {
	if len(responseIDs) == 0 {
		return nil, nil
	}
	var out []OutputPart
	err := s.conn(ctx).Where("session_id = ? AND response_id IN ?", sessionID, responseIDs).Order("seq").Find(&out).Error
	return out, mapError("list response parts", err)
}

// ResponseOpenAt reports whether one of the Session's responses had started but not
// ended at output position seq: a stream resuming there is inside that response.
func (s *Store) ResponseOpenAt(ctx context.Context, sessionID string, seq int64) (bool, error) {
	var n int64
	err := s.conn(ctx).Model(&ResponseRecord{}).
		Where("session_id = ? AND started_seq <= ? AND (ended_seq IS NULL OR ended_seq > ?)", sessionID, seq, seq).
		Count(&n).Error
	return n > 0, mapError("response open at", err)
}
