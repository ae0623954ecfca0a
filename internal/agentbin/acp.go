package agentbin

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// The ACP programs that `make deps-acp-agents` installs into tools/acp-agents at pinned
// releases; tools/acp-agents/package.json pins the same ones.
const (
	ClaudeACPPackage = "@agentclientprotocol/claude-agent-acp"
	ClaudeACPVersion = "0.101.0"
	CodexACPPackage  = "@agentclientprotocol/codex-acp"
	CodexACPVersion  = "2.6.0"
	GeminiPackage    = "@google/gemini-cli"
	GeminiVersion    = "0.61.0"
	QwenPackage      = "@qwen-code/qwen-code"
	QwenVersion      = "0.24.4"
	OpencodePackage  = "opencode-ai"
	OpencodeVersion  = "1.18.33"
)

// ACPInstall is the folder of installed ACP programs.
type ACPInstall struct {
	// Modules is tools/acp-agents/node_modules: what a box binds.
	Modules string
	// Node is the Node.js the programs run on.
	Node string
	// Opencode is opencode's native binary for this machine, relative to Modules: the
	// platform package npm installs, used as it is rather than through the copy
	// opencode-ai's install script makes.
	Opencode string
}

// LocateACP finds the pinned ACP programs under root/tools/acp-agents, checking that
// every one is the pinned release.
func LocateACP(root string) (ACPInstall, error) {
	modules := filepath.Join(root, "tools", "acp-agents", "node_modules")
	for pkg, want := range map[string]string{
		ClaudeACPPackage: ClaudeACPVersion, CodexACPPackage: CodexACPVersion, GeminiPackage: GeminiVersion,
		QwenPackage: QwenVersion, OpencodePackage: OpencodeVersion,
	} {
		if _, err := installedVersion(modules, pkg, want); err != nil {
			return ACPInstall{}, fmt.Errorf("%w (run `make deps-acp-agents`)", err)
		}
	}
	if _, err := os.Stat(SystemNode); err != nil {
		return ACPInstall{}, fmt.Errorf("the ACP programs need node at %s: %w", SystemNode, err)
	}
	out := ACPInstall{Modules: modules, Node: SystemNode}
	for _, pkg := range []string{"opencode-" + runtime.GOOS + "-" + nodeArch(), "opencode-" + runtime.GOOS + "-" + nodeArch() + "-baseline"} {
		if rel := filepath.Join(pkg, "bin", "opencode"); isExecutable(filepath.Join(modules, rel)) {
			out.Opencode = rel
			break
		}
	}
	if out.Opencode == "" {
		return ACPInstall{}, fmt.Errorf("opencode's native binary for %s-%s is not under %s: %w", runtime.GOOS, nodeArch(), modules, ErrNotInstalled)
	}
	return out, nil
}
