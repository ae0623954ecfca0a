package store

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm/clause"
)

// PlaceRuntime records that a new runtime (a new or replacement box) is being placed
// for the Session in sandboxID and returns its runtime generation, one more than the
// last. The host task queue is cleared until ActivateRuntime records the live one.
func (s *Store) PlaceRuntime(ctx context.Context, sessionID, sandboxID string) (int64, error) {
	return s.PlaceRuntimeFor(ctx, sessionID, sandboxID, "")
}

// PlaceRuntimeFor is PlaceRuntime for a runtime placed with a model credential
// delivery owner ("" for none), which the Session records with it.
func (s *Store) PlaceRuntimeFor(ctx context.Context, sessionID, sandboxID, credentialOwner string) (int64, error) {
	var owner *string
	if credentialOwner != "" {
		owner = &credentialOwner
	}
	var rows []Session
	res := s.conn(ctx).Model(&rows).Clauses(clause.Returning{Columns: []clause.Column{{Name: "runtime_generation"}}}).
		Where("id = ? AND lifecycle <> ?", sessionID, LifecycleDeleted).
		Updates(map[string]any{
			"runtime_generation":     gormExpr("runtime_generation + 1"),
			"sandbox_id":             sandboxID,
			"host_task_queue":        nil,
			"model_credential_owner": owner,
			"updated_at":             gormExpr("now()"),
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
	// RuntimeInfo replaces the runtime-info snapshot when not nil.
	RuntimeInfo json.RawMessage
	// ModelName is the model the program reported at activation; empty keeps the
	// stored one until the program reports (a restored conversation usually keeps its
	// model).
	ModelName string
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
		"runtime_error":       nil,
		"updated_at":          gormExpr("now()"),
	}
	if a.ResumeMaterial != nil {
		updates["resume_material"] = a.ResumeMaterial
	}
	if a.RuntimeInfo != nil {
		updates["runtime_info"] = nullableJSON(a.RuntimeInfo)
	}
	if a.ModelName != "" {
		updates["model_name"] = a.ModelName
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

// SetSessionModelName records the model the program reports for its current runtime,
// fenced by the reader's lease generation (a superseded reader writes nothing:
// ErrLeaseLost). It reports whether the stored name changed.
func (s *Store) SetSessionModelName(ctx context.Context, sessionID string, leaseGeneration int64, model string) (bool, error) {
	var changed bool
	err := s.InLeaseTx(ctx, sessionID, leaseGeneration, func(tx *Store) error {
		res := tx.conn(ctx).Model(&Session{}).Where("id = ? AND model_name IS DISTINCT FROM ?", sessionID, model).
			Updates(map[string]any{"model_name": model, "updated_at": gormExpr("now()")})
		changed = res.RowsAffected > 0
		return mapError("set session model name", res.Error)
	})
	return changed, err
}

// SetSessionRuntimeError records why the platform could not start the Session's
// Agent program, for the Session's owner to read.
func (s *Store) SetSessionRuntimeError(ctx context.Context, sessionID, reason string) error {
	res := s.conn(ctx).Model(&Session{}).Where("id = ?", sessionID).
		Updates(map[string]any{"runtime_error": reason, "updated_at": gormExpr("now()")})
	if res.Error != nil {
		return mapError("set session runtime error", res.Error)
	}
	if res.RowsAffected == 0 {
		return errNoRows("set runtime error", sessionID)
	}
	return nil
}

// errNoRows formats a missing-row error for one Session.
func errNoRows(what, sessionID string) error {
	return fmt.Errorf("%s of session %s: %w", what, sessionID, ErrNotFound)
}

// ListPlacedSandboxIDs returns the box of every Session that is not deleted and
// still has one placed: the boxes a restarted platform re-adopts. Any other box
// it finds left running belongs to nobody.
func (s *Store) ListPlacedSandboxIDs(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.conn(ctx).Model(&Session{}).
		Where("sandbox_id IS NOT NULL AND lifecycle <> ?", LifecycleDeleted).
		Pluck("sandbox_id", &ids).Error
	if err != nil {
		return nil, mapError("list placed sandbox ids", err)
	}
	return ids, nil
}
