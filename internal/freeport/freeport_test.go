package freeport

import (
	"net"
	"os/exec"
	"strconv"
	"sync"
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

// TestAReservedPortTakesItsServerAtOnce: the server may listen the moment Reserve
// returns, while this process starts other processes: a process forked meanwhile holds
// the reservation's own listener until it execs.
func TestAReservedPortTakesItsServerAtOnce(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	var forks sync.WaitGroup
	for range 2 {
		forks.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				assert.NoError(t, exec.Command("/bin/true").Run())
			}
		})
	}
	defer forks.Wait()
	defer close(stop)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				port, err := Reserve()
				if !assert.NoError(t, err) {
					return
				}
				l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
				if !assert.NoError(t, err, "listen on port %d as soon as it was reserved", port) {
					return
				}
				assert.NoError(t, l.Close())
			}
		})
	}
	wg.Wait()
}
