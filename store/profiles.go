package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
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
