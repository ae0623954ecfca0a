package codex

import "github.com/astrabox/astrabox/engines"

// ConfigTOML is the config.toml the adapter writes for an Agent's configuration.
func (a *Adapter) ConfigTOML(cfg engines.AgentConfig) ([]byte, error) { return a.configTOML(cfg) }
