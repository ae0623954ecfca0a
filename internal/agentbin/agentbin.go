// Package agentbin finds the Agent programs (Claude Code, Codex CLI, Pi) that
// `make deps-agents` installs from the npm registry at pinned releases into
// tools/agents/node_modules, and says how to start each one.
package agentbin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/astrabox/astrabox/internal/reporoot"
)

// Names of the programs Locate knows.
const (
	Claude = "claude"
	Codex  = "codex"
	Pi     = "pi"
)

// Pinned versions; tools/agents/package.json pins the same ones, and Locate
// refuses an install of any other release so recordings and tests stay true to
// the pinned program.
const (
	ClaudeVersion = "2.1.328"
	CodexVersion  = "0.169.0"
	PiVersion     = "0.73.1"
)

// ErrNotInstalled is wrapped by Locate when a program is missing.
var ErrNotInstalled = errors.New("agent program not installed (run `make deps-agents`)")

// Program is an installed Agent program.
type Program struct {
	// Name is Claude, Codex or Pi.
	Name string
	// Package is the npm package name.
	Package string
	// Version is the installed release.
	Version string
	// Command is the argv prefix that starts the program: the executable, plus
	// the entry script for programs that run on Node.
	Command []string
	// Dir is the folder holding the executable (what a sandbox must bind).
	Dir string
	// PathDirs are folders the program expects on PATH (Codex's bundled rg).
	PathDirs []string
}

// Root returns the repository root: $ASTRABOX_REPO_ROOT (set by make) or the
// nearest parent of the working directory holding go.mod.
func Root() (string, error) { return reporoot.Find() }

// Locate finds program name under root/tools/agents/node_modules.
func Locate(root, name string) (Program, error) {
	modules := filepath.Join(root, "tools", "agents", "node_modules")
	switch name {
	case Claude:
		return locateClaude(modules)
	case Codex:
		return locateCodex(modules)
	case Pi:
		return locatePi(modules)
	default:
		return Program{}, fmt.Errorf("unknown agent program %q", name)
	}
}

// locateClaude finds the native binary. The registry package ships it in a
// per-platform optional dependency (@anthropic-ai/claude-code-linux-x64/claude);
// its postinstall also links it as @anthropic-ai/claude-code/bin/claude.exe.
func locateClaude(modules string) (Program, error) {
	const pkg = "@anthropic-ai/claude-code"
	version, err := installedVersion(modules, pkg, ClaudeVersion)
	if err != nil {
		return Program{}, err
	}
	var candidates []string
	for _, platform := range nativePlatforms() {
		candidates = append(candidates, filepath.Join(modules, pkg+"-"+platform, "claude"))
	}
	candidates = append(candidates, filepath.Join(modules, pkg, "bin", "claude.exe"))
	for _, path := range candidates {
		if isExecutable(path) {
			return Program{Name: Claude, Package: pkg, Version: version, Command: []string{path}, Dir: filepath.Dir(path)}, nil
		}
	}
	return Program{}, fmt.Errorf("claude code native binary not found (looked at %s): %w", strings.Join(candidates, ", "), ErrNotInstalled)
}

// locateCodex finds the native binary in @openai/codex-<platform>/vendor/<triple>/bin.
func locateCodex(modules string) (Program, error) {
	const pkg = "@openai/codex"
	version, err := installedVersion(modules, pkg, CodexVersion)
	if err != nil {
		return Program{}, err
	}
	var triple string
	switch runtime.GOARCH {
	case "amd64":
		triple = "x86_64-unknown-linux-musl"
	case "arm64":
		triple = "aarch64-unknown-linux-musl"
	}
	vendor := filepath.Join(modules, pkg+"-"+runtime.GOOS+"-"+nodeArch(), "vendor", triple)
	path := filepath.Join(vendor, "bin", "codex")
	if !isExecutable(path) {
		return Program{}, fmt.Errorf("codex native binary not found at %s: %w", path, ErrNotInstalled)
	}
	return Program{Name: Codex, Package: pkg, Version: version, Command: []string{path}, Dir: vendor,
		PathDirs: []string{filepath.Join(vendor, "codex-path")}}, nil
}

// SystemNode is the Node.js the programs that run on Node use: the system's, at the path
// local boxes see it (they bind /usr read-only), whatever the platform's PATH holds.
const SystemNode = "/usr/bin/node"

// locatePi finds Pi's entry script; Pi runs on the system's Node.
func locatePi(modules string) (Program, error) {
	const pkg = "@mariozechner/pi-coding-agent"
	version, err := installedVersion(modules, pkg, PiVersion)
	if err != nil {
		return Program{}, err
	}
	script := filepath.Join(modules, pkg, "dist", "cli.js")
	if _, err := os.Stat(script); err != nil {
		return Program{}, fmt.Errorf("pi entry script: %w: %w", err, ErrNotInstalled)
	}
	if _, err := os.Stat(SystemNode); err != nil {
		return Program{}, fmt.Errorf("pi needs node at %s: %w", SystemNode, err)
	}
	return Program{Name: Pi, Package: pkg, Version: version, Command: []string{SystemNode, script}, Dir: modules}, nil
}

// installedVersion reads the package's version and checks it is the pinned one.
func installedVersion(modules, pkg, want string) (string, error) {
	data, err := os.ReadFile(filepath.Join(modules, pkg, "package.json"))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s is not installed under %s: %w", pkg, modules, ErrNotInstalled)
	}
	if err != nil {
		return "", fmt.Errorf("read %s package.json: %w", pkg, err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return "", fmt.Errorf("parse %s package.json: %w", pkg, err)
	}
	if meta.Version != want {
		return "", fmt.Errorf("%s %s is installed but %s is pinned: %w", pkg, meta.Version, want, ErrNotInstalled)
	}
	return meta.Version, nil
}

// nativePlatforms lists the Claude Code platform package suffixes for this
// machine, glibc first.
func nativePlatforms() []string {
	base := runtime.GOOS + "-" + nodeArch()
	return []string{base, base + "-musl"}
}

// nodeArch is the machine architecture as npm names it.
func nodeArch() string {
	if runtime.GOARCH == "amd64" {
		return "x64"
	}
	return runtime.GOARCH
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}
