package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"
)

// NewAgent is what CreateAgent needs.
type NewAgent struct {
	Name             string
	Description      string
	EngineKind       string
	RuntimeProfileID string
	// Config is the engine-specific JSON object; nil stores {}. Secret values in it are
	// already replaced by a marker.
	Config json.RawMessage
	// Secrets are the secret values taken out of Config, sealed before they are
	// stored; storing any needs the store's secrets key (ErrNoSecretsKey).
	Secrets        AgentSecrets
	PermissionMode *string
	CreatedBy      *string
}

// AgentUpdate changes the fields that are set; nil fields stay as they are.
type AgentUpdate struct {
	Name             *string
	Description      *string
	RuntimeProfileID *string
	EngineKind       *string
	Config           json.RawMessage
	// Secrets replace the Agent's secret values whenever Config is set (nil: none).
	Secrets AgentSecrets
	// PermissionMode set to a pointer to "" clears the default mode.
	PermissionMode *string
}

// CreateAgent inserts an Agent at version 1. Its RuntimeProfile must exist and
// select the same engine_kind (ErrNotFound otherwise); a taken name is ErrDuplicate.
func (s *Store) CreateAgent(ctx context.Context, in NewAgent) (Agent, error) {
	a := Agent{
		ID:               uuid.NewString(),
		Name:             in.Name,
		Description:      in.Description,
		EngineKind:       in.EngineKind,
		RuntimeProfileID: in.RuntimeProfileID,
		Config:           jsonObjectOrEmpty(in.Config),
		PermissionMode:   in.PermissionMode,
		CreatedBy:        in.CreatedBy,
		Version:          1,
	}
	sealed, err := s.sealAgentSecrets(a.ID, in.Secrets)
	if err != nil {
		return Agent{}, fmt.Errorf("create agent: %w", err)
	}
	a.SealedSecrets = sealed
	if err := s.conn(ctx).Create(&a).Error; err != nil {
		return Agent{}, mapError("create agent", err)
	}
	return a, nil
}

// GetAgentByID returns one Agent.
func (s *Store) GetAgentByID(ctx context.Context, id string) (Agent, error) {
	var a Agent
	err := s.conn(ctx).Where("id = ?", id).Take(&a).Error
	return a, mapError("get agent by id", err)
}

// ListAgents returns every Agent by name.
func (s *Store) ListAgents(ctx context.Context) ([]Agent, error) {
	var out []Agent
	err := s.conn(ctx).Order("name, id").Find(&out).Error
	return out, mapError("list agents", err)
}

// UpdateAgent applies upd if the Agent is still at expectedVersion and returns the
// saved Agent at the next version. Another writer's save first gives
// ErrVersionConflict; an unknown id gives ErrNotFound.
func (s *Store) UpdateAgent(ctx context.Context, id string, expectedVersion int64, upd AgentUpdate) (Agent, error) {
	changes := map[string]any{
		"version":    gormExpr("version + 1"),
		"updated_at": gormExpr("now()"),
	}
	if upd.Name != nil {
		changes["name"] = *upd.Name
	}
	if upd.Description != nil {
		changes["description"] = *upd.Description
	}
	if upd.RuntimeProfileID != nil {
		changes["runtime_profile_id"] = *upd.RuntimeProfileID
	}
	if upd.EngineKind != nil {
		changes["engine_kind"] = *upd.EngineKind
	}
	if upd.Config != nil {
		changes["config"] = jsonObjectOrEmpty(upd.Config)
		sealed, err := s.sealAgentSecrets(id, upd.Secrets)
		if err != nil {
			return Agent{}, fmt.Errorf("update agent: %w", err)
		}
		changes["secrets"] = sealed
	}
	if upd.PermissionMode != nil {
		if *upd.PermissionMode == "" {
			changes["permission_mode"] = nil
		} else {
			changes["permission_mode"] = *upd.PermissionMode
		}
	}
	var saved []Agent
	res := s.conn(ctx).Model(&saved).Clauses(clause.Returning{}).
		Where("id = ? AND version = ?", id, expectedVersion).Updates(changes)
	if res.Error != nil {
		return Agent{}, mapError("update agent", res.Error)
	}
	if res.RowsAffected == 1 && len(saved) == 1 {
		return saved[0], nil
	}
	current, err := s.GetAgentByID(ctx, id)
	if err != nil {
		return Agent{}, err
	}
	return Agent{}, fmt.Errorf("update agent %s: expected version %d, found %d: %w", id, expectedVersion, current.Version, ErrVersionConflict)
}

// jsonObjectOrEmpty stores {} for a missing JSON object.
func jsonObjectOrEmpty(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage(`{}`)
	}
	return v
}
