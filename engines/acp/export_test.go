package acp

import "github.com/astrabox/astrabox/engines"

// ConnectForTest connects a client to a process session already running sessionID, as
// ActivateRuntime does after its handshake.
func ConnectForTest(a *Adapter, proc engines.ProcessSession, sessionID string) *Client {
	return newClient(a.cfg.Profile, a.Capabilities(), proc, sessionID)
}
