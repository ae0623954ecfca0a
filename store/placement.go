package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// PlaceRuntime records that a new runtime (a new or replacement box) is being placed
// for the Session in sandboxID and returns its runtime generation, one more than the
// last. The host task queue is cleared until ActivateRuntime records the live one.
func (s *Store) PlaceRuntime(ctx context.Context, sessionID, sandboxID string) (int64, error) {
	var rows []Session
	res := s.conn(ctx).Model(&rows).Clauses(clause.Returning{Columns: []clause.Column{{Name: "runtime_generation"}}}).
		Where("id = ? AND lifecycle <> ?", sessionID, LifecycleDeleted).
		Updates(map[string]any{
			"runtime_generation": gormExpr("runtime_generation + 1"),
			"sandbox_id":         sandboxID,
			"host_task_queue":    nil,
			"updated_at":         gormExpr("now()"),
		})
	if res.Error != nil {
		return 0, mapError("place runtime", res.Error)
	}
	if len(rows) == 0 {
		return 0, errNoRows("place runtime", sessionID)
	}
	return rows[0].RuntimeGeneration, nil
}

// RuntimeActivation is what ActivateRuntime records about a live runtime.
type RuntimeActivation struct {
	SessionID         string
	RuntimeGeneration int64
	HostTaskQueue     string
	EngineSessionKey  string
	// ResumeMaterial replaces the stored material when not nil.
	ResumeMaterial []byte
}

// RecordRuntimeActive records that the runtime of a generation is live on a host task
// queue: the Session becomes active and its runtime available. A superseded generation
// (a newer placement exists) records nothing and returns ErrLeaseLost.
func (s *Store) RecordRuntimeActive(ctx context.Context, a RuntimeActivation) error {
	updates := map[string]any{
		"lifecycle":           LifecycleActive,
		"runtime_unavailable": false,
		"host_task_queue":     a.HostTaskQueue,
		"engine_session_key":  a.EngineSessionKey,
		"updated_at":          gormExpr("now()"),
	}
	if a.ResumeMaterial != nil {
		updates["resume_material"] = a.ResumeMaterial
	}
	res := s.conn(ctx).Model(&Session{}).
		Where("id = ? AND runtime_generation = ? AND lifecycle IN ?", a.SessionID, a.RuntimeGeneration,
			[]string{LifecycleCreating, LifecycleActive, LifecycleTerminated}).
		Updates(updates)
	if res.Error != nil {
		return mapError("record runtime active", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("record runtime generation %d of session %s: %w", a.RuntimeGeneration, a.SessionID, ErrLeaseLost)
	}
	return nil
}

// MarkRuntimeUnavailable records that the Session's box is gone or released: the
// placement is cleared and runtime_unavailable set. The conversation stays; the next
// input starts a new box that resumes it.
func (s *Store) MarkRuntimeUnavailable(ctx context.Context, sessionID string) error {
	res := s.conn(ctx).Model(&Session{}).Where("id = ?", sessionID).Updates(map[string]any{
		"runtime_unavailable": true,
		"sandbox_id":          nil,
		"host_task_queue":     nil,
		"runtime_status":      nil,
		"updated_at":          gormExpr("now()"),
	})
	if res.Error != nil {
		return mapError("mark runtime unavailable", res.Error)
	}
	if res.RowsAffected == 0 {
		return errNoRows("mark runtime unavailable", sessionID)
	}
	return nil
}

// SetSessionLifecycle moves the Session's stored lifecycle (creating, active,
// terminated, deleted). A deleted Session stays deleted.
func (s *Store) SetSessionLifecycle(ctx context.Context, sessionID, lifecycle string) error {
	updates := map[string]any{"lifecycle": lifecycle, "updated_at": gormExpr("now()")}
	if lifecycle == LifecycleDeleted {
		updates["deleted_at"] = gormExpr("COALESCE(deleted_at, now())")
	}
	res := s.conn(ctx).Model(&Session{}).Where("id = ? AND lifecycle <> ?", sessionID, LifecycleDeleted).Updates(updates)
	if res.Error != nil {
		return mapError("set session lifecycle", res.Error)
	}
	if res.RowsAffected == 0 && lifecycle != LifecycleDeleted {
		return errNoRows("set session lifecycle", sessionID)
	}
	return nil
}

// SessionActivity is what decides whether a Session's box may be released for idleness.
type SessionActivity struct {
	RuntimeStatus    *string
	OpenResponses    int64
	OpenInteractions int64
	HeldInputs       int64
	LastOutputAt     *time.Time
}

// Busy reports whether anything runs or waits: a working or waiting runtime, an open
// response or interaction, or a held input.
func (a SessionActivity) Busy() bool {
	if a.RuntimeStatus != nil && *a.RuntimeStatus != "idle" {
		return true
	}
	return a.OpenResponses > 0 || a.OpenInteractions > 0 || a.HeldInputs > 0
}

// GetSessionActivity reads the facts SessionActivity.Busy decides on, in one query.
func (s *Store) GetSessionActivity(ctx context.Context, sessionID string) (SessionActivity, error) {
	var rows []SessionActivity
	err := s.conn(ctx).Raw(`
		SELECT s.runtime_status, s.last_output_at,
		  (SELECT count(*) FROM responses r WHERE r.session_id = s.id AND r.outcome IS NULL) AS open_responses,
		  (SELECT count(*) FROM interactions i WHERE i.session_id = s.id AND i.state = 'open') AS open_interactions,
		  (SELECT count(*) FROM inputs n WHERE n.session_id = s.id AND n.state IN ('pending', 'delivered')) AS held_inputs
		FROM sessions s WHERE s.id = ?`, sessionID).Scan(&rows).Error
	if err != nil {
		return SessionActivity{}, mapError("get session activity", err)
	}
	if len(rows) == 0 {
		return SessionActivity{}, errNoRows("get session activity", sessionID)
	}
	return rows[0], nil
}
