package activities

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/astrabox/astrabox/engines"
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
