package store

import (
	"context"
	"encoding/json"
	"fmt"
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

// appendDiagnosticSQL stores a diagnostic ($2: its event type, $3: its evidence)
// after the Session's last one and drops the oldest beyond $4 (0 keeps all). It runs
// under the Session's row lock (a Relay batch's), so the next seq is not contended.
const appendDiagnosticSQL = `
WITH next AS (
	SELECT COALESCE(max(seq), 0) + 1 AS seq FROM runtime_diagnostics WHERE session_id = $1
), added AS (
	INSERT INTO runtime_diagnostics (session_id, seq, event_type, raw) SELECT $1, next.seq, $2, CAST($3 AS jsonb) FROM next
)
DELETE FROM runtime_diagnostics WHERE session_id = $1 AND $4 > 0 AND seq <= (SELECT seq FROM next) - $4`

// appendDiagnosticArgs are appendDiagnosticSQL's arguments. Evidence that is not JSON
// is kept as a JSON string rather than lost.
func appendDiagnosticArgs(sessionID string, d DiagnosticRecord) ([]any, error) {
	raw := d.Raw
	if !json.Valid(raw) {
		quoted, err := json.Marshal(string(raw))
		if err != nil {
			return nil, fmt.Errorf("encode diagnostic: %w", err)
		}
		raw = quoted
	}
	return []any{sessionID, d.EventType, string(raw), d.Keep}, nil
}

// ListRuntimeDiagnostics returns a Session's stored diagnostics, oldest first.
func (s *Store) ListRuntimeDiagnostics(ctx context.Context, sessionID string) ([]RuntimeDiagnostic, error) {
	var out []RuntimeDiagnostic
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("seq").Find(&out).Error
	return out, mapError("list runtime diagnostics", err)
}
