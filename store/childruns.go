package store

import (
	"context"
	"encoding/json"
	"errors"

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

// upsertChildRunSQL writes a child run report. The last report wins: status and
// control reference are taken as reported (a child that can no longer be stopped
// reports no control reference); title, agent type, parent tool call and usage are
// kept when a report leaves them out; the parent and the response the child started
// in are kept once known; updated_at bumps. A report can only update a row of its own
// Session. The parent is $4, which must exist (the foreign key), or else $5 if that
// child run is recorded already (NULL otherwise).
const upsertChildRunSQL = `
INSERT INTO child_runs AS c (id, session_id, native_ref, parent_id, response_id, name, agent_type, parent_tool_call_id, status, usage, control_ref)
VALUES ($1, $2, $3, COALESCE($4, (SELECT k.id FROM child_runs k WHERE k.session_id = $2 AND k.id = $5)), $6, $7, $8, $9, $10, CAST($11 AS jsonb), $12)
ON CONFLICT (id) DO UPDATE SET
	status = excluded.status,
	control_ref = excluded.control_ref,
	usage = COALESCE(excluded.usage, c.usage),
	name = COALESCE(NULLIF(excluded.name, ''), c.name),
	agent_type = COALESCE(NULLIF(excluded.agent_type, ''), c.agent_type),
	parent_tool_call_id = COALESCE(excluded.parent_tool_call_id, c.parent_tool_call_id),
	parent_id = COALESCE(c.parent_id, excluded.parent_id),
	response_id = COALESCE(c.response_id, excluded.response_id),
	native_ref = COALESCE(c.native_ref, excluded.native_ref),
	updated_at = now()
WHERE c.session_id = excluded.session_id`

// upsertChildRunArgs are upsertChildRunSQL's arguments for a report, with the child's
// public id. A parent named by its native reference must be recorded; one named by
// its public id must be too unless parentIfKnown, which leaves out a parent not
// recorded yet: a Relay records reports in the program's order, and every report of
// the child names its parent, so a later one fills it in.
func upsertChildRunArgs(r ChildRunReport, parentIfKnown bool) ([]any, string, error) {
	id := r.ID
	var nativeRef *string
	if r.NativeRef != "" {
		ref := r.NativeRef
		nativeRef = &ref
		if id == "" {
			id = ChildRunID(r.SessionID, r.NativeRef)
		}
	}
	if id == "" {
		return nil, "", errors.New("upsert child run: neither public id nor native reference")
	}
	parent, knownParent := r.ParentID, (*string)(nil)
	if parentIfKnown {
		parent, knownParent = nil, r.ParentID
	}
	if r.ParentNativeRef != nil {
		minted := ChildRunID(r.SessionID, *r.ParentNativeRef)
		parent, knownParent = &minted, nil
	}
	controlRef := r.ControlRef
	if controlRef != nil && *controlRef == "" {
		controlRef = nil
	}
	return []any{id, r.SessionID, nativeRef, parent, knownParent, r.ResponseID, r.Name, r.AgentType, r.ParentToolCallID,
		r.Status, nullableJSONText(r.Usage), controlRef}, id, nil
}

// upsertChildRun writes a report (upsertChildRunSQL) and returns the child's public id.
func (s *Store) upsertChildRun(ctx context.Context, r ChildRunReport) (string, error) {
	args, id, err := upsertChildRunArgs(r, false)
	if err != nil {
		return "", err
	}
	if err := s.conn(ctx).Exec(upsertChildRunSQL, args...).Error; err != nil {
		return "", mapError("upsert child run", err)
	}
	return id, nil
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
