package store

import (
	"context"
	"encoding/json"
	"time"
)

// RuntimeDiagnostic is one stored runtime diagnostic: raw vendor evidence for
// operators, never part of a browser stream.
type RuntimeDiagnostic struct {
	SessionID string          `gorm:"column:session_id;primaryKey"`
	Seq       int64           `gorm:"column:seq;primaryKey"`
	EventType string          `gorm:"column:event_type"`
	Raw       json.RawMessage `gorm:"column:raw"`
	CreatedAt time.Time       `gorm:"column:created_at"`
}

// TableName is the runtime_diagnostics table.
func (RuntimeDiagnostic) TableName() string { return "runtime_diagnostics" }

// DiagnosticRecord is a diagnostic a Relay records with its batch, and how many of
// the Session's most recent diagnostics to keep.
type DiagnosticRecord struct {
	EventType string
	Raw       json.RawMessage
	// Keep bounds the Session's stored diagnostics; the oldest go first. 0 keeps all.
	Keep int
}

// appendDiagnostic stores d after the Session's last diagnostic and drops the oldest
// beyond d.Keep. The caller holds the Session's row lock (ApplyRelayBatch), so the
// next seq is not contended.
func (s *Store) appendDiagnostic(ctx context.Context, sessionID string, d DiagnosticRecord) error {
	raw := d.Raw
	if !json.Valid(raw) {
		// Evidence that is not JSON is kept as a JSON string rather than lost.
		quoted, err := json.Marshal(string(raw))
		if err != nil {
			return mapError("encode diagnostic", err)
		}
		raw = quoted
	}
	var last int64
	err := s.conn(ctx).Model(&RuntimeDiagnostic{}).Where("session_id = ?", sessionID).
		Select("COALESCE(MAX(seq), 0)").Scan(&last).Error
	if err != nil {
		return mapError("read last diagnostic", err)
	}
	row := RuntimeDiagnostic{SessionID: sessionID, Seq: last + 1, EventType: d.EventType, Raw: raw}
	if err := s.conn(ctx).Omit("CreatedAt").Create(&row).Error; err != nil {
		return mapError("insert diagnostic", err)
	}
	if d.Keep <= 0 {
		return nil
	}
	err = s.conn(ctx).Where("session_id = ? AND seq <= ?", sessionID, row.Seq-int64(d.Keep)).Delete(&RuntimeDiagnostic{}).Error
	return mapError("drop oldest diagnostics", err)
}

// ListRuntimeDiagnostics returns a Session's stored diagnostics, oldest first.
func (s *Store) ListRuntimeDiagnostics(ctx context.Context, sessionID string) ([]RuntimeDiagnostic, error) {
	var out []RuntimeDiagnostic
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("seq").Find(&out).Error
	return out, mapError("list runtime diagnostics", err)
}
