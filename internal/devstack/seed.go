package devstack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/store"
)

// The seeded identities. The Agent's name is the deployment name the product
// documents' examples show.
const (
	seedAdminEmail  = "admin@astrabox.local"
	seedProfileName = "local-claude"
	seedAgentName   = "code-reviewer"
	seedEngineKind  = claude.EngineKind
)

// SeedOptions says where dev.env goes and what it points at.
type SeedOptions struct {
	EnvFile       string
	ServiceURL    string
	TemporalUIURL string
}

// Seeded is what the seed made or found.
type Seeded struct {
	UserID    string
	AgentID   string
	AgentName string
	Token     string
}

// Seed makes sure the dev stack has an admin user with a working API token, a
// RuntimeProfile and an Agent, then writes dev.env. It is idempotent: on later
// starts it finds them, and keeps the token in dev.env while it still works.
func Seed(ctx context.Context, st *store.Store, opts SeedOptions) (*Seeded, error) {
	env, err := readEnvFile(opts.EnvFile)
	if err != nil {
		return nil, err
	}
	user, err := st.GetUserByEmail(ctx, seedAdminEmail)
	if errors.Is(err, store.ErrNotFound) {
		user, err = st.CreateUser(ctx, store.NewUser{Email: seedAdminEmail, DisplayName: "Admin", Role: store.RoleAdmin})
	}
	if err != nil {
		return nil, fmt.Errorf("seed admin user: %w", err)
	}

	token := env["ACCESS_TOKEN"]
	if owner, _, err := st.GetUserByAPIToken(ctx, token, time.Now()); token == "" || err != nil || owner.ID != user.ID {
		if _, token, err = st.CreateAPIToken(ctx, user.ID, "dev", nil); err != nil {
			return nil, fmt.Errorf("seed admin token: %w", err)
		}
	}

	profile, err := findOrCreateProfile(ctx, st)
	if err != nil {
		return nil, err
	}
	agent, err := findOrCreateAgent(ctx, st, profile.ID, user.ID)
	if err != nil {
		return nil, err
	}
	err = writeEnvFile(opts.EnvFile, map[string]string{
		"SERVICE_URL":     opts.ServiceURL,
		"ACCESS_TOKEN":    token,
		"AGENT_ID":        agent.ID,
		"TEMPORAL_UI_URL": opts.TemporalUIURL,
	})
	if err != nil {
		return nil, err
	}
	return &Seeded{UserID: user.ID, AgentID: agent.ID, AgentName: agent.Name, Token: token}, nil
}

func findOrCreateProfile(ctx context.Context, st *store.Store) (store.RuntimeProfile, error) {
	profiles, err := st.ListRuntimeProfiles(ctx, false)
	if err != nil {
		return store.RuntimeProfile{}, fmt.Errorf("seed runtime profile: %w", err)
	}
	for _, p := range profiles {
		if p.Name == seedProfileName {
			return p, nil
		}
	}
	p, err := st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{
		Name:           seedProfileName,
		EngineKind:     seedEngineKind,
		Enabled:        true,
		SandboxBackend: "local",
		SandboxTenancy: store.TenancyConversation,
	})
	if err != nil {
		return store.RuntimeProfile{}, fmt.Errorf("seed runtime profile: %w", err)
	}
	return p, nil
}

func findOrCreateAgent(ctx context.Context, st *store.Store, profileID, userID string) (store.Agent, error) {
	agents, err := st.ListAgents(ctx)
	if err != nil {
		return store.Agent{}, fmt.Errorf("seed agent: %w", err)
	}
	for _, a := range agents {
		if a.Name == seedAgentName {
			return a, nil
		}
	}
	a, err := st.CreateAgent(ctx, store.NewAgent{
		Name:             seedAgentName,
		Description:      "Reviews code in its workspace.",
		EngineKind:       seedEngineKind,
		RuntimeProfileID: profileID,
		CreatedBy:        &userID,
	})
	if err != nil {
		return store.Agent{}, fmt.Errorf("seed agent: %w", err)
	}
	return a, nil
}
