package freeport

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reserved ports are distinct, kept from port-0 binds, and free for their own
// server at once.
func TestAReservedPortIsKeptFromOthersButFreeForItsServer(t *testing.T) {
	ports, err := ReserveN(3)
	require.NoError(t, err)
	require.Len(t, ports, 3)
	reserved := map[int]bool{}
	for _, port := range ports {
		assert.False(t, reserved[port], "port %d reserved twice", port)
		reserved[port] = true
	}

	// The system hands out none of them to a bind to port 0 while they wait.
	var others []net.Listener
	defer func() {
		for _, l := range others {
			l.Close()
		}
	}()
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		others = append(others, l)
		assert.False(t, reserved[l.Addr().(*net.TCPAddr).Port], "a bind to port 0 got a reserved port")
	}

	for _, port := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		require.NoError(t, err, "listen on reserved port %d", port)
		require.NoError(t, l.Close())
	}
}
