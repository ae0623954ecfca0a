package devstack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/codex"
	"github.com/astrabox/astrabox/engines/pi"
	"github.com/astrabox/astrabox/store"
)

// seedAdminEmail is the seeded admin user.
const seedAdminEmail = "admin@astrabox.local"

// builtinAgent is the RuntimeProfile and Agent seeded for one built-in program, and the
// dev.env variable that names the Agent.
type builtinAgent struct {
	envKey, profileName, agentName, engineKind, description string
}

// builtinAgents are seeded in this order; the first is the default Agent (AGENT_ID),
// whose name is the deployment name the product documents' examples show.
var builtinAgents = []builtinAgent{
	{envKey: "AGENT_ID_CLAUDE_CODE", profileName: "local-claude", agentName: "code-reviewer",
		engineKind: claude.EngineKind, description: "Reviews code in its workspace."},
	{envKey: "AGENT_ID_CODEX", profileName: "local-codex", agentName: "codex-reviewer",
		engineKind: codex.EngineKind, description: "Reviews code in its workspace, with the Codex CLI."},
	{envKey: "AGENT_ID_PI", profileName: "local-pi", agentName: "pi-reviewer",
		engineKind: pi.EngineKind, description: "Reviews code in its workspace, with Pi."},
	{envKey: "AGENT_ID_CLAUDE_ACP", profileName: "local-claude-acp", agentName: "claude-acp-reviewer",
		engineKind: acp.KindClaude, description: "Reviews code in its workspace, with Claude Code over the Agent Client Protocol."},
	{envKey: "AGENT_ID_CODEX_ACP", profileName: "local-codex-acp", agentName: "codex-acp-reviewer",
		engineKind: acp.KindCodex, description: "Reviews code in its workspace, with the Codex CLI over the Agent Client Protocol."},
	{envKey: "AGENT_ID_QWEN", profileName: "local-qwen", agentName: "qwen-reviewer",
		engineKind: acp.KindQwen, description: "Reviews code in its workspace, with Qwen Code."},
	{envKey: "AGENT_ID_OPENCODE", profileName: "local-opencode", agentName: "opencode-reviewer",
		engineKind: acp.KindOpencode, description: "Reviews code in its workspace, with opencode."},
	{envKey: "AGENT_ID_GEMINI", profileName: "local-gemini", agentName: "gemini-reviewer",
		engineKind: acp.KindGemini, description: "Reviews code in its workspace, with Gemini CLI."},
	{envKey: "AGENT_ID_DEEPSEEK_HARNESS", profileName: "local-deepseek-harness", agentName: "deepseek-harness-reviewer",
		engineKind: acp.KindDeepSeekHarness, description: "Reviews code in its workspace, with DeepSeek Harness."},
}

// SeedOptions says where dev.env goes and what it points at.
type SeedOptions struct {
	EnvFile       string
	ServiceURL    string
	TemporalUIURL string
	// ConfiguredKinds are the engine kinds of the Agent programs the configuration
	// adds (engines.acp_programs): each gets a RuntimeProfile local-<kind>, an Agent
	// <kind>-reviewer and AGENT_ID_<KIND> in dev.env, after the built-in ones.
	ConfiguredKinds []string
}

// configuredAgent is the seed entry of a program the configuration adds.
func configuredAgent(kind string) builtinAgent {
	return builtinAgent{envKey: "AGENT_ID_" + strings.ToUpper(strings.NewReplacer("-", "_").Replace(kind)),
		profileName: "local-" + kind, agentName: kind + "-reviewer", engineKind: kind,
		description: "Reviews code in its workspace, with the Agent program " + kind + " the configuration adds."}
}

// Seeded is what the seed made or found.
type Seeded struct {
	UserID    string
	AgentID   string
	AgentName string
	Token     string
}

// Seed makes sure the dev stack has an admin user with a working API token, and a
// RuntimeProfile and an Agent per built-in program, then writes dev.env. It is idempotent: on later
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

	vars := map[string]string{
		"SERVICE_URL":     opts.ServiceURL,
		"ACCESS_TOKEN":    token,
		"TEMPORAL_UI_URL": opts.TemporalUIURL,
	}
	var first store.Agent
	agents := slices.Clone(builtinAgents)
	for _, kind := range opts.ConfiguredKinds {
		agents = append(agents, configuredAgent(kind))
	}
	for i, b := range agents {
		profile, err := findOrCreateProfile(ctx, st, b)
		if err != nil {
			return nil, err
		}
		agent, err := findOrCreateAgent(ctx, st, b, profile.ID, user.ID)
		if err != nil {
			return nil, err
		}
		vars[b.envKey] = agent.ID
		if i == 0 {
			first = agent
			vars["AGENT_ID"] = agent.ID
		}
	}
	if err := writeEnvFile(opts.EnvFile, vars); err != nil {
		return nil, err
	}
	return &Seeded{UserID: user.ID, AgentID: first.ID, AgentName: first.Name, Token: token}, nil
}

func findOrCreateProfile(ctx context.Context, st *store.Store, b builtinAgent) (store.RuntimeProfile, error) {
	profiles, err := st.ListRuntimeProfiles(ctx, false)
	if err != nil {
		return store.RuntimeProfile{}, fmt.Errorf("seed runtime profile %s: %w", b.profileName, err)
	}
	for _, p := range profiles {
		if p.Name == b.profileName {
			return p, nil
		}
	}
	p, err := st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{
		Name:           b.profileName,
		EngineKind:     b.engineKind,
		Enabled:        true,
		SandboxBackend: "local",
		SandboxTenancy: store.TenancyConversation,
	})
	if err != nil {
		return store.RuntimeProfile{}, fmt.Errorf("seed runtime profile: %w", err)
	}
	return p, nil
}

func findOrCreateAgent(ctx context.Context, st *store.Store, b builtinAgent, profileID, userID string) (store.Agent, error) {
	agents, err := st.ListAgents(ctx)
	if err != nil {
		return store.Agent{}, fmt.Errorf("seed agent: %w", err)
	}
	for _, a := range agents {
		if a.Name == b.agentName {
			return a, nil
		}
	}
	a, err := st.CreateAgent(ctx, store.NewAgent{
		Name:             b.agentName,
		Description:      b.description,
		EngineKind:       b.engineKind,
		RuntimeProfileID: profileID,
		CreatedBy:        &userID,
	})
	if err != nil {
		return store.Agent{}, fmt.Errorf("seed agent: %w", err)
	}
	return a, nil
}
