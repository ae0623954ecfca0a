package acp

import (
	"context"

	"github.com/astrabox/astrabox/engines"
)

// ConnectForTest connects a client to a process session already running sessionID, as
// ActivateRuntime does after its handshake.
func ConnectForTest(a *Adapter, proc engines.ProcessSession, sessionID string) *Client {
	return newClient(a.cfg.Profile, a.Capabilities(), proc, sessionID)
}

// FindInSessionLog looks for a prompt's user record in a session log at path in box,
// as a client of a profile admitting from its session log does.
func FindInSessionLog(box engines.Box, path, text string, from int, claimed []int) (int, bool) {
	return (&sessionLog{box: box, pattern: path}).find(context.Background(), text, from, claimed)
}

// LaterMinuteWait is how long a session/load of a LoadAfterStartMinute profile waits.
var LaterMinuteWait = laterMinuteWait
