package store

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm/clause"
)

// RuntimeProfileUpdate changes the fields that are set; nil fields stay as they are.
type RuntimeProfileUpdate struct {
	Name           *string
	Image          *string
	SandboxBackend *string
	SandboxTenancy *string
	Resources      json.RawMessage
	NetworkPolicy  json.RawMessage
	Tracing        json.RawMessage
	PrewarmSize    *int
}

// UpdateRuntimeProfile applies upd and returns the saved RuntimeProfile. Its engine
// kind never changes: Agents reference the profile together with its engine kind.
func (s *Store) UpdateRuntimeProfile(ctx context.Context, id string, upd RuntimeProfileUpdate) (RuntimeProfile, error) {
	changes := map[string]any{"updated_at": gormExpr("now()")}
	if upd.Name != nil {
		changes["name"] = *upd.Name
	}
	if upd.Image != nil {
		changes["image"] = *upd.Image
	}
	if upd.SandboxBackend != nil {
		changes["sandbox_backend"] = *upd.SandboxBackend
	}
	if upd.SandboxTenancy != nil {
		changes["sandbox_tenancy"] = *upd.SandboxTenancy
	}
	if upd.Resources != nil {
		changes["resources"] = upd.Resources
	}
	if upd.NetworkPolicy != nil {
		changes["network_policy"] = upd.NetworkPolicy
	}
	if upd.Tracing != nil {
		changes["tracing"] = upd.Tracing
	}
	if upd.PrewarmSize != nil {
		changes["prewarm_size"] = *upd.PrewarmSize
	}
	var saved []RuntimeProfile
	res := s.conn(ctx).Model(&saved).Clauses(clause.Returning{}).Where("id = ?", id).Updates(changes)
	if res.Error != nil {
		return RuntimeProfile{}, mapError("update runtime profile", res.Error)
	}
	if len(saved) == 0 {
		return RuntimeProfile{}, fmt.Errorf("update runtime profile %s: %w", id, ErrNotFound)
	}
	return saved[0], nil
}
