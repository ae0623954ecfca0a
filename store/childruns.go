package store

import (
	"context"
	"encoding/json"

	"gorm.io/gorm/clause"

	"github.com/astrabox/astrabox/engines"
)

// ChildRunID mints the public id of a child run from its Session and native reference.
// The same report always names the same child, and the native reference stays private.
// It is the engines' minting, so a row and the data-subagent parts the program
// reported name the child alike.
func ChildRunID(sessionID, nativeRef string) string {
	return engines.ChildRunID(sessionID, nativeRef)
}

// ChildRunReport is a child run's state as the runtime reported it.
type ChildRunReport struct {
	SessionID string
	NativeRef string
	// ParentNativeRef names the parent child run; nil for a child of the Session.
	ParentNativeRef *string
	ResponseID      *string
	Name            string
	// Status is the engine's own word for the child's state.
	Status     string
	Usage      json.RawMessage
	ControlRef *string
}

// UpsertChildRun records a child run report: the first creates the row, later ones
// update status, usage, name and control reference. A parent must be reported first
// (ErrNotFound otherwise).
func (s *Store) UpsertChildRun(ctx context.Context, r ChildRunReport) (ChildRun, error) {
	row := ChildRun{
		ID:         ChildRunID(r.SessionID, r.NativeRef),
		SessionID:  r.SessionID,
		NativeRef:  r.NativeRef,
		ResponseID: r.ResponseID,
		Name:       r.Name,
		Status:     r.Status,
		Usage:      r.Usage,
		ControlRef: r.ControlRef,
	}
	if r.ParentNativeRef != nil {
		parent := ChildRunID(r.SessionID, *r.ParentNativeRef)
		row.ParentID = &parent
	}
	err := s.conn(ctx).Omit("CreatedAt", "UpdatedAt").Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "id"}},
		DoUpdates: clause.Assignments(map[string]any{
			"status":      row.Status,
			"usage":       gormExpr("COALESCE(excluded.usage, child_runs.usage)"),
			"name":        gormExpr("COALESCE(NULLIF(excluded.name, ''), child_runs.name)"),
			"control_ref": gormExpr("COALESCE(excluded.control_ref, child_runs.control_ref)"),
			"updated_at":  gormExpr("now()"),
		}),
	}).Create(&row).Error
	if err != nil {
		return ChildRun{}, mapError("upsert child run", err)
	}
	return s.GetChildRunByID(ctx, r.SessionID, row.ID)
}

// GetChildRunByID returns one child run of the Session.
func (s *Store) GetChildRunByID(ctx context.Context, sessionID, id string) (ChildRun, error) {
	var c ChildRun
	err := s.conn(ctx).Where("session_id = ? AND id = ?", sessionID, id).Take(&c).Error
	return c, mapError("get child run by id", err)
}

// ListChildRunsBySession returns the Session's child runs in creation order.
func (s *Store) ListChildRunsBySession(ctx context.Context, sessionID string) ([]ChildRun, error) {
	var out []ChildRun
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("created_at, id").Find(&out).Error
	return out, mapError("list child runs", err)
}

// ListChildRunMessageParts returns the output parts that carry messages of one child
// run (data-subagent parts with a message), in seq order.
func (s *Store) ListChildRunMessageParts(ctx context.Context, sessionID, childRunID string) ([]OutputPart, error) {
	var out []OutputPart
	err := s.conn(ctx).Where("session_id = ? AND frame->>'type' = 'data-subagent' AND frame->'data'->>'child_run_id' = ? AND jsonb_typeof(frame->'data'->'message') = 'object'", sessionID, childRunID).
		Order("seq").Find(&out).Error
	return out, mapError("list child run messages", err)
}
