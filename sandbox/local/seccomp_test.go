package local

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSeccompFilterDecisions runs the filter in a BPF interpreter for cases a
// box cannot easily produce: other ABIs, x32 numbers, clone3, and clone's
// flags with and without CLONE_NEWUSER.
func TestSeccompFilterDecisions(t *testing.T) {
	t.Parallel()
	arch, err := auditArch()
	require.NoError(t, err)
	eperm := unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	decide := func(allowUserNS bool, nr, arch uint32, arg0 uint32) uint32 {
		t.Helper()
		prog, err := seccompFilter(allowUserNS)
		require.NoError(t, err)
		vm, err := bpf.NewVM(prog)
		require.NoError(t, err)
		// The interpreter loads words big-endian; the kernel hands the filter
		// struct seccomp_data in the machine's order, low half of an argument
		// first. Writing each word big-endian at the same offsets is the same
		// input as far as the filter's 32-bit loads go.
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[seccompNR:], nr)
		binary.BigEndian.PutUint32(data[seccompArch:], arch)
		binary.BigEndian.PutUint32(data[seccompArg0:], arg0)
		out, err := vm.Run(data)
		require.NoError(t, err)
		return uint32(out)
	}
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	require.Equal(t, allow, decide(false, unix.SYS_READ, arch, 0))
	require.Equal(t, eperm, decide(false, unix.SYS_READ, arch^1, 0), "another ABI")
	require.Equal(t, eperm, decide(false, unix.SYS_MOUNT, arch, 0))
	require.Equal(t, eperm, decide(false, unix.SYS_PTRACE, arch, 0))
	require.Equal(t, eperm, decide(false, unix.SYS_UNSHARE, arch, unix.CLONE_NEWUSER|unix.CLONE_NEWNS))
	require.Equal(t, allow, decide(false, unix.SYS_UNSHARE, arch, unix.CLONE_FILES))
	require.Equal(t, eperm, decide(false, unix.SYS_CLONE, arch, unix.CLONE_NEWUSER))
	require.Equal(t, allow, decide(false, unix.SYS_CLONE, arch, unix.CLONE_VM|unix.CLONE_THREAD))
	require.Equal(t, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS), decide(false, unix.SYS_CLONE3, arch, 0))
	require.Equal(t, allow, decide(true, unix.SYS_UNSHARE, arch, unix.CLONE_NEWUSER))
	require.Equal(t, eperm, decide(true, unix.SYS_MOUNT, arch, 0), "allowing user namespaces allows nothing else")
	if runtime.GOARCH == "amd64" {
		require.Equal(t, eperm, decide(false, x32SyscallBit|unix.SYS_READ, arch, 0), "x32 numbers")
	}
}
