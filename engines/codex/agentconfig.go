package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/astrabox/astrabox/engines"
)

// Where the Agent's configuration goes in CODEX_HOME: config.toml, whose mcp_servers
// table carries the Agent's MCP servers, AGENTS.md, which Codex reads as global
// instructions, and the skills folder Codex scans for <name>/SKILL.md.
const (
	ConfigDocument   = "config.toml"
	InstructionsFile = "AGENTS.md"
	SkillsDir        = "skills"
)

// protectedConfig are the config.toml keys the platform manages: the model provider
// and everything that picks or moves it (profiles), the approval policy and sandbox
// (set per thread and turn: the box is the sandbox), the MCP servers (taken from the
// Agent's mcp_servers), and what would reach outside the box (update check, analytics,
// telemetry, features such as plugins, login).
var protectedConfig = []string{
	"model", "model_provider", "model_providers", "profile", "profiles",
	"approval_policy", "sandbox_mode", "sandbox_workspace_write",
	"mcp_servers", "check_for_update_on_startup", "analytics", "otel", "features",
	"forced_login_method", "chatgpt_base_url",
}

// extensions is what Codex takes from an Agent's configuration: stdio and streamable
// HTTP MCP servers, Skills, a config.toml block and instructions. Codex has no legacy
// HTTP+SSE client, and plugins are not declared (installing one fetches from a
// marketplace), so an Agent naming either is refused rather than stored as an inert
// setting.
func extensions() engines.EngineExtensions {
	return engines.EngineExtensions{
		MCPTransports: []engines.MCPTransport{engines.MCPTransportStdio, engines.MCPTransportHTTP},
		Skills:        &engines.SkillsDiscovery{Directories: []string{SkillsDir}},
		NativeConfigDocuments: []engines.NativeConfigDocument{{
			Name: ConfigDocument, ProtectedKeys: append([]string{}, protectedConfig...),
		}},
		InstructionsFile: InstructionsFile,
	}
}

// CheckAgentConfig implements engines.AgentConfigChecker: every value of the Agent's
// config.toml block must have a TOML form (JSON null has none), so a block Codex could
// not read is refused on save.
func (a *Adapter) CheckAgentConfig(cfg engines.AgentConfig) []engines.Problem {
	raw, ok := cfg.NativeConfig[ConfigDocument]
	if !ok {
		return nil
	}
	var block map[string]json.RawMessage
	if json.Unmarshal(raw, &block) != nil {
		return nil // the declaration's checks report a block that is no object
	}
	var out []engines.Problem
	for k, v := range block {
		if _, err := tomlValue(v); err != nil {
			out = append(out, engines.Problem{Field: "native_config." + ConfigDocument + "." + k, Message: err.Error()})
		}
	}
	slices.SortFunc(out, func(x, y engines.Problem) int { return strings.Compare(x.Field, y.Field) })
	return out
}

// writeConfig writes CODEX_HOME's config.toml, AGENTS.md and Skills before the
// app-server starts. config.toml and AGENTS.md are written on every start, so a
// relaunch in the same box drops what the Agent no longer configures there; a Skill it
// no longer has keeps its folder until the box is replaced (engines.Box cannot remove
// files).
func (a *Adapter) writeConfig(ctx context.Context, sc engines.EngineStartupContext, box engines.Box, paths Paths) error {
	doc, err := a.configTOML(sc.AgentConfig)
	if err != nil {
		return err
	}
	if err := box.WriteFile(ctx, sc.RuntimeIdentity, path.Join(paths.CodexHome, ConfigDocument), doc, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", ConfigDocument, err)
	}
	if err := box.WriteFile(ctx, sc.RuntimeIdentity, path.Join(paths.CodexHome, InstructionsFile), []byte(sc.AgentConfig.Instructions), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", InstructionsFile, err)
	}
	for _, s := range sc.AgentConfig.Skills {
		file := path.Join(paths.CodexHome, SkillsDir, s.Name, "SKILL.md")
		if err := box.WriteFile(ctx, sc.RuntimeIdentity, file, engines.SkillDocument(s), 0o600); err != nil {
			return fmt.Errorf("write skill %s: %w", s.Name, err)
		}
	}
	return nil
}

// configTOML is the config.toml the adapter writes into CODEX_HOME: the Agent's block
// without protected keys, then the platform's keys: the model provider is the box's
// model forward over the Responses API, nothing else leaves the box (no update check,
// no curated-plugin sync, no analytics), and the Agent's MCP servers. The approval
// policy and sandbox are set per thread and turn instead: in config.toml "untrusted"
// is refused.
func (a *Adapter) configTOML(cfg engines.AgentConfig) ([]byte, error) {
	doc := map[string]any{}
	if raw, ok := cfg.NativeConfig[ConfigDocument]; ok {
		var block map[string]json.RawMessage
		if err := json.Unmarshal(raw, &block); err != nil {
			return nil, fmt.Errorf("agent configuration %s: %w", ConfigDocument, err)
		}
		protected := engines.NativeConfigDocument{Name: ConfigDocument, ProtectedKeys: protectedConfig}
		for k, v := range protected.Unprotected(block) {
			value, err := tomlValue(v)
			if err != nil {
				return nil, fmt.Errorf("agent configuration %s.%s: %w", ConfigDocument, k, err)
			}
			doc[k] = value
		}
	}
	if a.cfg.Model != "" {
		doc["model"] = a.cfg.Model
	}
	doc["model_provider"] = "astrabox"
	doc["check_for_update_on_startup"] = false
	doc["model_providers"] = map[string]any{"astrabox": map[string]any{
		"name": "AstraBox model forward", "base_url": a.cfg.ModelBaseURL, "wire_api": "responses", "env_key": ModelKeyEnv,
	}}
	doc["analytics"] = map[string]any{"enabled": false}
	features := map[string]any{"plugins": false}
	for _, f := range a.cfg.Features {
		if f != "plugins" {
			features[f] = true
		}
	}
	doc["features"] = features
	if len(cfg.MCPServers) > 0 {
		servers := make(map[string]any, len(cfg.MCPServers))
		for _, s := range cfg.MCPServers {
			servers[s.Name] = mcpServer(s)
		}
		doc["mcp_servers"] = servers
	}
	out, err := toml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", ConfigDocument, err)
	}
	return out, nil
}

// mcpServer is one mcp_servers entry in Codex's own field names.
func mcpServer(s engines.MCPServerConfig) map[string]any {
	e := map[string]any{}
	if len(s.Command) > 0 {
		e["command"] = s.Command[0]
		e["args"] = append([]string{}, s.Command[1:]...)
	}
	if len(s.Env) > 0 {
		e["env"] = s.Env
	}
	if s.URL != "" {
		e["url"] = s.URL
	}
	if len(s.Headers) > 0 {
		e["http_headers"] = s.Headers
	}
	return e
}

// tomlValue decodes a JSON value for TOML: integral numbers stay integers (JSON has
// one number type, TOML tells 5 from 5.0 and Codex refuses a float where it wants an
// integer), and null, which TOML cannot hold, is refused.
func tomlValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return tomlNumbers(v)
}

func tomlNumbers(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, fmt.Errorf("null has no TOML form; leave the key out")
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		return x.Float64()
	case map[string]any:
		for k, e := range x {
			n, err := tomlNumbers(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := tomlNumbers(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			x[i] = n
		}
	}
	return v, nil
}
