package activities

import (
	"context"
	"fmt"
	"net"
	"path"

	"github.com/astrabox/astrabox/engines"
)

// platformBox is the box an adapter gets, applying two parts of the engine's
// declaration on every backend alike:
//
//   - DialPort reaches only the ports its sandbox request publishes, so the
//     declaration is what the platform opens (a backend that exposes ports one by one,
//     as OpenSandbox does, exposes exactly these);
//   - every process started as a runtime identity gets the engine's configuration
//     directory variable (Workload.ConfigDirEnv) naming <home>/<ConfigDirName>, the
//     directory the platform mirrors the session log from and restores it to, unless
//     the adapter sets the variable itself.
type platformBox struct {
	engines.Box
	req      engines.EngineSandboxRequest
	workload engines.EngineWorkloadDeclaration
}

func newPlatformBox(box engines.Box, adapter engines.EngineAdapter) platformBox {
	return platformBox{Box: box, req: adapter.SandboxRequest(), workload: adapter.Capabilities().Workload}
}

// DialPort implements engines.Box.
func (b platformBox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if !b.req.Publishes(port) {
		return nil, fmt.Errorf("dial port %d in box %s: the port is not published in the engine's sandbox request", port, b.ID())
	}
	return b.Box.DialPort(ctx, port)
}

// StartProcess implements engines.Box.
func (b platformBox) StartProcess(ctx context.Context, spec engines.ProcessSpec) (engines.ProcessSession, error) {
	if id := spec.Identity; id != nil && b.workload.ConfigDirEnv != "" {
		if _, set := spec.Env[b.workload.ConfigDirEnv]; !set {
			env := make(map[string]string, len(spec.Env)+1)
			for k, v := range spec.Env {
				env[k] = v
			}
			env[b.workload.ConfigDirEnv] = path.Join(id.HomeDir, b.workload.ConfigDirName)
			spec.Env = env
		}
	}
	return b.Box.StartProcess(ctx, spec)
}
