package activities

import (
	"context"
	"fmt"
	"net"

	"github.com/astrabox/astrabox/engines"
)

// publishedBox is the box an adapter gets: DialPort reaches only the ports its
// sandbox request publishes, so the declaration is what the platform opens (a
// backend that exposes ports one by one, as OpenSandbox does, exposes exactly
// these) and an undeclared port fails the same way on every backend.
type publishedBox struct {
	engines.Box
	req engines.EngineSandboxRequest
}

// DialPort implements engines.Box.
func (b publishedBox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if !b.req.Publishes(port) {
		return nil, fmt.Errorf("dial port %d in box %s: the port is not published in the engine's sandbox request", port, b.ID())
	}
	return b.Box.DialPort(ctx, port)
}
