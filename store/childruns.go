package store

import (
	"context"
	"encoding/json"
	"errors"

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

// ChildRunReport is a child run's state as the runtime reported it. A report names
// the child by its public ID, or by its private NativeRef when the caller holds one
// (the ID is then minted from it); the parent likewise.
type ChildRunReport struct {
	SessionID string
	// ID is the child's public id; empty means ChildRunID(SessionID, NativeRef).
	ID string
	// NativeRef is the native reference, empty when the report carries only the
	// public id (as data-subagent parts do).
	NativeRef string
	// ParentID is the parent child run's public id; nil for a child of the Session
	// (or when ParentNativeRef names the parent).
	ParentID *string
	// ParentNativeRef names the parent child run by its native reference.
	ParentNativeRef *string
	ResponseID      *string
	// Name is the child's title.
	Name      string
	AgentType string
	// ParentToolCallID is the tool call that started the child, if any.
	ParentToolCallID *string
	// Status is the engine's own word for the child's state.
	Status     string
	Usage      json.RawMessage
	ControlRef *string
}

// UpsertChildRun records a child run report: the first creates the row, later ones
// update it (see upsertChildRun for what a later report keeps). A parent must be
// reported first (ErrNotFound otherwise).
func (s *Store) UpsertChildRun(ctx context.Context, r ChildRunReport) (ChildRun, error) {
	id, err := s.upsertChildRun(ctx, r)
	if err != nil {
		return ChildRun{}, err
	}
	return s.GetChildRunByID(ctx, r.SessionID, id)
}

// upsertChildRun writes a report and returns the child's public id. The last report
// wins: status and control reference are taken as reported (a child that can no
// longer be stopped reports no control reference); title, agent type, parent tool
// call and usage are kept when a report leaves them out; the parent and the response
// the child started in are kept once known; updated_at bumps. A report can only
// update a row of its own Session.
func (s *Store) upsertChildRun(ctx context.Context, r ChildRunReport) (string, error) {
	row := ChildRun{
		ID:               r.ID,
		SessionID:        r.SessionID,
		ParentID:         r.ParentID,
		ResponseID:       r.ResponseID,
		Name:             r.Name,
		AgentType:        r.AgentType,
		ParentToolCallID: r.ParentToolCallID,
		Status:           r.Status,
		Usage:            r.Usage,
		ControlRef:       r.ControlRef,
	}
	if r.NativeRef != "" {
		ref := r.NativeRef
		row.NativeRef = &ref
		if row.ID == "" {
			row.ID = ChildRunID(r.SessionID, r.NativeRef)
		}
	}
	if row.ID == "" {
		return "", errors.New("upsert child run: neither public id nor native reference")
	}
	if r.ParentNativeRef != nil {
		parent := ChildRunID(r.SessionID, *r.ParentNativeRef)
		row.ParentID = &parent
	}
	if row.ControlRef != nil && *row.ControlRef == "" {
		row.ControlRef = nil
	}
	err := s.conn(ctx).Omit("CreatedAt", "UpdatedAt").Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "id"}},
		Where:   clause.Where{Exprs: []clause.Expression{gormExpr("child_runs.session_id = excluded.session_id")}},
		DoUpdates: clause.Assignments(map[string]any{
			"status":              gormExpr("excluded.status"),
			"control_ref":         gormExpr("excluded.control_ref"),
			"usage":               gormExpr("COALESCE(excluded.usage, child_runs.usage)"),
			"name":                gormExpr("COALESCE(NULLIF(excluded.name, ''), child_runs.name)"),
			"agent_type":          gormExpr("COALESCE(NULLIF(excluded.agent_type, ''), child_runs.agent_type)"),
			"parent_tool_call_id": gormExpr("COALESCE(excluded.parent_tool_call_id, child_runs.parent_tool_call_id)"),
			"parent_id":           gormExpr("COALESCE(child_runs.parent_id, excluded.parent_id)"),
			"response_id":         gormExpr("COALESCE(child_runs.response_id, excluded.response_id)"),
			"native_ref":          gormExpr("COALESCE(child_runs.native_ref, excluded.native_ref)"),
			"updated_at":          gormExpr("now()"),
		}),
	}).Create(&row).Error
	if err != nil {
		return "", mapError("upsert child run", err)
	}
	return row.ID, nil
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
