package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"
)

// NewRuntimeProfile is what CreateRuntimeProfile needs. JSON fields left nil store {}.
type NewRuntimeProfile struct {
	Name           string
	EngineKind     string
	Image          string
	Enabled        bool
	SandboxBackend string
	// SandboxTenancy defaults to TenancyConversation.
	SandboxTenancy string
	Resources      json.RawMessage
	NetworkPolicy  json.RawMessage
	Tracing        json.RawMessage
	PrewarmSize    int
	// ACPProgram is the program a profile of the generic ACP kind defines; nil stores
	// none (NULL).
	ACPProgram json.RawMessage
}

// CreateRuntimeProfile inserts a RuntimeProfile; a taken name is ErrDuplicate.
func (s *Store) CreateRuntimeProfile(ctx context.Context, in NewRuntimeProfile) (RuntimeProfile, error) {
	p := RuntimeProfile{
		ID:             uuid.NewString(),
		Name:           in.Name,
		EngineKind:     in.EngineKind,
		Image:          in.Image,
		Enabled:        in.Enabled,
		SandboxBackend: in.SandboxBackend,
		SandboxTenancy: in.SandboxTenancy,
		Resources:      jsonObjectOrEmpty(in.Resources),
		NetworkPolicy:  jsonObjectOrEmpty(in.NetworkPolicy),
		Tracing:        jsonObjectOrEmpty(in.Tracing),
		PrewarmSize:    in.PrewarmSize,
		ACPProgram:     in.ACPProgram,
	}
	if p.SandboxTenancy == "" {
		p.SandboxTenancy = TenancyConversation
	}
	if err := s.conn(ctx).Create(&p).Error; err != nil {
		return RuntimeProfile{}, mapError("create runtime profile", err)
	}
	return p, nil
}

// GetRuntimeProfileByID returns one RuntimeProfile.
func (s *Store) GetRuntimeProfileByID(ctx context.Context, id string) (RuntimeProfile, error) {
	var p RuntimeProfile
	err := s.conn(ctx).Where("id = ?", id).Take(&p).Error
	return p, mapError("get runtime profile by id", err)
}

// ListRuntimeProfiles returns RuntimeProfiles by name, only the enabled ones when
// enabledOnly is set (the Agent form lists those; administration lists all).
func (s *Store) ListRuntimeProfiles(ctx context.Context, enabledOnly bool) ([]RuntimeProfile, error) {
	q := s.conn(ctx).Order("name, id")
	if enabledOnly {
		q = q.Where("enabled")
	}
	var out []RuntimeProfile
	err := q.Find(&out).Error
	return out, mapError("list runtime profiles", err)
}

// SetRuntimeProfileEnabled enables or disables a RuntimeProfile.
func (s *Store) SetRuntimeProfileEnabled(ctx context.Context, id string, enabled bool) error {
	res := s.conn(ctx).Model(&RuntimeProfile{}).Where("id = ?", id).
		Updates(map[string]any{"enabled": enabled, "updated_at": gormExpr("now()")})
	if res.Error != nil {
		return mapError("set runtime profile enabled", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("set runtime profile %s enabled: %w", id, ErrNotFound)
	}
	return nil
}

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
	// ACPProgram replaces the defined program when set.
	ACPProgram json.RawMessage
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
	if upd.ACPProgram != nil {
		changes["acp_program"] = upd.ACPProgram
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
