package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	"github.com/astrabox/astrabox/engines"
)

// Where the Agent's configuration goes in Claude Code's configuration directory
// (CLAUDE_CONFIG_DIR): the user settings, the user memory Claude reads as standing
// instructions, the Skills folder it scans, and the MCP configuration handed to it with
// --mcp-config.
const (
	SettingsDocument = "settings.json"
	InstructionsFile = "CLAUDE.md"
	SkillsDir        = "skills"
	MCPConfigFile    = "astrabox-mcp.json"
	flagMCPConfig    = "--mcp-config"
)

// protectedSettings are the settings.json keys the platform manages: where Claude
// reaches the model, how it asks for approval and which policy applies. An Agent's
// settings may not move them.
var protectedSettings = []string{"apiKeyHelper", "env", "permissions", "defaultMode", "forceLoginMethod", "model", "hooks", "sandbox"}

// extensions is what Claude Code takes from an Agent's configuration. Native packages
// (plugins) are not declared: installing one needs a marketplace fetch when a Session
// starts, which a prepared box must not do, so an Agent naming one is refused.
func extensions() engines.EngineExtensions {
	return engines.EngineExtensions{
		MCPTransports: []engines.MCPTransport{engines.MCPTransportStdio, engines.MCPTransportHTTP, engines.MCPTransportSSE},
		Skills:        &engines.SkillsDiscovery{Directories: []string{SkillsDir}},
		NativeConfigDocuments: []engines.NativeConfigDocument{{
			Name: SettingsDocument, ProtectedKeys: append([]string{}, protectedSettings...),
		}},
		InstructionsFile: InstructionsFile,
		Tracing:          true,
	}
}

// writeAgentConfig turns the Agent's configuration into Claude Code's own files before
// the program starts, and returns the flags that point Claude at them. Every file is
// written on each start, so a relaunch in the same box drops settings, instructions and
// MCP servers the Agent no longer configures; a Skill it no longer has keeps its folder
// until the box is replaced (engines.Box cannot remove files).
func writeAgentConfig(ctx context.Context, sc engines.EngineStartupContext, box engines.Box, paths Paths) ([]string, error) {
	cfg := sc.AgentConfig
	write := func(name string, data []byte) error {
		if err := box.WriteFile(ctx, sc.RuntimeIdentity, name, data, 0o600); err != nil {
			return fmt.Errorf("write agent configuration %s: %w", name, err)
		}
		return nil
	}
	settings, err := settingsDocument(cfg)
	if err != nil {
		return nil, err
	}
	if err := write(path.Join(paths.ConfigDir, SettingsDocument), settings); err != nil {
		return nil, err
	}
	if err := write(path.Join(paths.ConfigDir, InstructionsFile), []byte(cfg.Instructions)); err != nil {
		return nil, err
	}
	for _, s := range cfg.Skills {
		if err := write(path.Join(paths.ConfigDir, SkillsDir, s.Name, "SKILL.md"), engines.SkillDocument(s)); err != nil {
			return nil, err
		}
	}
	if len(cfg.MCPServers) == 0 {
		return nil, nil
	}
	mcp, err := mcpConfig(cfg.MCPServers)
	if err != nil {
		return nil, err
	}
	file := path.Join(paths.ConfigDir, MCPConfigFile)
	if err := write(file, mcp); err != nil {
		return nil, err
	}
	return []string{flagMCPConfig, file}, nil
}

// settingsDocument is the user settings.json: the Agent's block without any protected
// key, or an empty object.
func settingsDocument(cfg engines.AgentConfig) ([]byte, error) {
	block := map[string]json.RawMessage{}
	if raw, ok := cfg.NativeConfig[SettingsDocument]; ok {
		if err := json.Unmarshal(raw, &block); err != nil {
			return nil, fmt.Errorf("agent configuration %s: %w", SettingsDocument, err)
		}
	}
	doc := engines.NativeConfigDocument{Name: SettingsDocument, ProtectedKeys: protectedSettings}
	out, err := json.MarshalIndent(doc.Unprotected(block), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("agent configuration %s: %w", SettingsDocument, err)
	}
	return out, nil
}

// mcpServer is one entry of Claude Code's mcpServers object, in its own field names.
type mcpServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// mcpConfig is the --mcp-config document: {"mcpServers": {name: server}}.
func mcpConfig(servers []engines.MCPServerConfig) ([]byte, error) {
	entries := make(map[string]mcpServer, len(servers))
	for _, s := range servers {
		e := mcpServer{Type: string(s.Transport), Env: s.Env, URL: s.URL, Headers: s.Headers}
		if len(s.Command) > 0 {
			e.Command, e.Args = s.Command[0], s.Command[1:]
		}
		entries[s.Name] = e
	}
	out, err := json.MarshalIndent(map[string]any{"mcpServers": entries}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("agent configuration mcp servers: %w", err)
	}
	return out, nil
}
