package local

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter every box runs under (bubblewrap --seccomp). It is a small
// denylist in classic BPF rather than a libseccomp profile: libseccomp needs
// cgo, and the runner and the backend stay pure Go. What it refuses is kernel
// surface a coding agent does not need and escapes are made of: new user
// namespaces (which hand an unprivileged program every capability over its own
// namespaces), mounts, the kernel keyring, BPF, performance events, userfaultfd
// (the usual tool for widening kernel race windows) and tracing other
// processes. Refused calls fail with EPERM, except clone3, whose flags sit in
// memory a filter cannot read: it fails with ENOSYS, so the C library falls
// back to clone, whose flags are checked.

// seccompData offsets (struct seccomp_data): nr, arch, then args from 16; the
// low half of a 64-bit argument comes first on the little-endian machines
// supported here.
const (
	seccompNR   = 0
	seccompArch = 4
	seccompArg0 = 16
	// x32SyscallBit marks x32 system calls on x86-64; they must not slip past
	// a filter written for the 64-bit numbers.
	x32SyscallBit = 0x40000000
)

// deniedSyscalls fail with EPERM in every box.
var deniedSyscalls = []uintptr{
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_SETNS, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_BPF,
	unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD, unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV,
	unix.SYS_PROCESS_VM_WRITEV, unix.SYS_KEXEC_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE,
	unix.SYS_DELETE_MODULE,
}

// auditArch is the seccomp architecture of the system calls the filter knows.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("local sandbox: no seccomp filter for %s (amd64 and arm64 have one)", runtime.GOARCH)
}

// seccompFilter is the filter's program. allowUserNamespaces leaves clone and
// unshare with CLONE_NEWUSER alone, for programs that sandbox themselves.
func seccompFilter(allowUserNamespaces bool) ([]bpf.Instruction, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	deny := bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		deny, // another ABI (32-bit x86 on a 64-bit kernel): other numbers, all refused
		bpf.LoadAbsolute{Off: seccompNR, Size: 4},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1}, deny)
	}
	for _, nr := range deniedSyscalls {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1}, deny)
	}
	prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)})
	if !allowUserNamespaces {
		for _, nr := range []uintptr{unix.SYS_UNSHARE, unix.SYS_CLONE} {
			prog = append(prog,
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 4},
				bpf.LoadAbsolute{Off: seccompArg0, Size: 4},
				bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.CLONE_NEWUSER, SkipFalse: 1},
				deny,
				allow)
		}
	}
	return append(prog, allow), nil
}

// seccompFile returns the filter as bubblewrap reads it from a descriptor: an
// array of struct sock_filter in the machine's byte order, in a pipe whose
// writing end is closed.
func seccompFile(allowUserNamespaces bool) (*os.File, error) {
	prog, err := seccompFilter(allowUserNamespaces)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("assemble seccomp filter: %w", err)
	}
	var buf bytes.Buffer
	for _, in := range raw {
		// struct sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; }
		_ = binary.Write(&buf, binary.NativeEndian, struct {
			Op     uint16
			Jt, Jf uint8
			K      uint32
		}{in.Op, in.Jt, in.Jf, in.K})
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("seccomp pipe: %w", err)
	}
	// A few hundred bytes: far below a pipe's buffer, so this never blocks.
	_, err = w.Write(buf.Bytes())
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("write seccomp filter: %w", err)
	}
	return r, nil
}
