package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// resolveSecrets resolves the named platform secrets the adapter's
// StartupMaterialRequest asks for, from the platform's configuration, into the map
// EngineStartupContext.Secrets carries (which never reaches a JSON encoding, a
// workflow history or a log). A secret that is not configured fails the activation
// non-retryably and says so on the Session, by name only.
func (a *Activities) resolveSecrets(ctx context.Context, sessionID string, adapter engines.EngineAdapter) (map[string]string, error) {
	names := adapter.StartupMaterialRequest().Secrets
	if len(names) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(names))
	var missing []string
	for _, name := range names {
		var v string
		ok := false
		if a.deps.PlatformSecrets != nil {
			v, ok = a.deps.PlatformSecrets(name)
		}
		if !ok {
			missing = append(missing, name)
			continue
		}
		out[name] = v
	}
	if len(missing) == 0 {
		return out, nil
	}
	reason := fmt.Sprintf("the Agent program %s cannot start: the platform secret(s) %s it needs are not configured (secrets.platform)",
		adapter.Capabilities().EngineKind, strings.Join(missing, ", "))
	if err := a.deps.Store.SetSessionRuntimeError(ctx, sessionID, reason); err != nil {
		return nil, err
	}
	return nil, temporal.NewNonRetryableApplicationError(reason, ErrTypeConfiguration, nil)
}

// resolveAgentConfig reads the Agent's extension configuration with its secret values
// in place, for the adapter to write into the box before the program starts. It is
// read at every activation, never when a box is made, so a prewarmed box claimed by
// any Agent of the profile gets that Agent's configuration, and a relaunch gets the
// Agent's current one. A stored configuration that no longer decodes fails the
// activation non-retryably and says so on the Session.
func (a *Activities) resolveAgentConfig(ctx context.Context, sessionID, agentID string) (engines.AgentConfig, error) {
	fail := func(reason string) (engines.AgentConfig, error) {
		if err := a.deps.Store.SetSessionRuntimeError(ctx, sessionID, reason); err != nil {
			return engines.AgentConfig{}, err
		}
		return engines.AgentConfig{}, temporal.NewNonRetryableApplicationError(reason, ErrTypeConfiguration, nil)
	}
	raw, err := a.deps.Store.GetAgentRuntimeConfig(ctx, agentID)
	if errors.Is(err, store.ErrNoSecretsKey) {
		return fail(fmt.Sprintf("the configuration of Agent %s holds secret values but no secrets key is configured (secrets.key)", agentID))
	}
	if err != nil {
		return engines.AgentConfig{}, fmt.Errorf("read configuration of agent %s: %w", agentID, err)
	}
	var cfg engines.AgentConfig
	if len(raw) == 0 {
		return cfg, nil
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fail(fmt.Sprintf("the configuration of Agent %s cannot be read: %v", agentID, err))
	}
	return cfg, nil
}
