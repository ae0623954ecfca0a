package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// TestProgramCannotReachTheRunner plays a program that wants to approve its
// own tool calls: from inside a real box, as the program's account, it tries
// the runner's socket (to write another process's stdin), the journals replay
// trusts, the boot config, and the runner process itself. Everything is
// refused, and the victim process reads only what the platform wrote.
func TestProgramCannotReachTheRunner(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	info, err := h.Info(ctx)
	require.NoError(t, err)
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "victim", Argv: []string{"/bin/sh", "-c", `read line; echo "got:$line"`}})
	require.NoError(t, err)
	journal := runnerapi.ControlDir + "/boots/" + info.BootID + "/proc/victim/journal"

	refused := func(script, want string) {
		t.Helper()
		res := sh(t, h, script)
		require.NotEqual(t, 0, res.ExitCode, "%s must fail; stdout: %s", script, res.Stdout)
		require.Contains(t, string(res.Stderr), want, script)
	}
	// The runner's socket: connecting is refused, so no request reaches it.
	refused(`perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "$!\n"' `+
		runnerapi.ControlDir+"/"+runnerapi.SocketName, "Permission denied")
	refused(`curl -sS --unix-socket `+runnerapi.ControlDir+"/"+runnerapi.SocketName+
		` -X POST --data-binary '{"type":"control_response"}' 'http://box/v1/processes/victim/stdin?write_id=forged'`,
		"curl: (7)")
	// The journals and the boot config: neither listed, read nor rewritten.
	refused("ls "+runnerapi.ControlDir, "Permission denied")
	refused("cat "+journal, "Permission denied")
	refused("echo forged >> "+journal, "Permission denied")
	refused("cat "+runnerapi.ControlDir+"/"+runnerapi.ConfigName, "Permission denied")
	refused("ln -s /workspace/x "+runnerapi.ControlDir+"/"+runnerapi.DeathName, "Permission denied")

	// The runner process: another account, so no signal, no trace, no peek.
	pid := strings.TrimSpace(string(sh(t, h, `for p in /proc/[0-9]*; do
		tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^/run/astrabox-runner serve' && echo ${p#/proc/}; done`).Stdout))
	require.NotEmpty(t, pid, "the runner is visible in the box's process list")
	refused("kill -TERM "+pid, "Operation not permitted")
	refused("kill -STOP 1", "Operation not permitted")
	refused("cat /proc/"+pid+"/environ", "Permission denied")
	refused("ls /proc/"+pid+"/fd", "Permission denied")
	refused("perl -e 'require \"syscall.ph\"; syscall(&SYS_ptrace, 16, "+pid+", 0, 0) == 0 or die \"$!\\n\"'",
		"Operation not permitted")
	// The program's own streams: a tool of the program's account can see the
	// victim's /proc entry, but reopening its stdin (to forge an answer) or its
	// stdout (to forge output the journal records) fails, for they are sockets.
	victim := strings.TrimSpace(string(sh(t, h, `for p in /proc/[0-9]*; do
		tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^/bin/sh -c read line' && echo ${p#/proc/}; done`).Stdout))
	require.NotEmpty(t, victim, "the victim runs as the program's account")
	refused("echo forged > /proc/"+victim+"/fd/0", "No such device or address")
	refused("echo forged > /proc/"+victim+"/fd/1", "No such device or address")

	// The program holds no capability and cannot gain one by executing a file.
	status := string(sh(t, h, "grep -E '^(Cap|NoNewPrivs)' /proc/self/status").Stdout)
	require.Contains(t, status, "CapInh:\t0000000000000000")
	require.Contains(t, status, "CapPrm:\t0000000000000000")
	require.Contains(t, status, "CapEff:\t0000000000000000")
	require.Contains(t, status, "NoNewPrivs:\t1")

	// Links the program plants do not lend it the runner's rights: the runner
	// reads and writes files as the program's account.
	require.Equal(t, 0, sh(t, h, "ln -s "+runnerapi.ControlDir+"/"+runnerapi.ConfigName+" /workspace/config-link && "+
		"ln -s "+runnerapi.ControlDir+"/boots /workspace/boots-link").ExitCode)
	_, err = h.ReadFile(ctx, "/workspace/config-link")
	require.ErrorContains(t, err, "permission denied")
	// (The runner's stat of the link's target is refused, so it reports the
	// link itself as in the way.)
	err = h.WriteFile(ctx, "/workspace/boots-link/"+info.BootID+"/proc/victim/journal", []byte("forged"), 0o644)
	require.Error(t, err)
	_, err = h.ListDir(ctx, "/workspace/boots-link")
	require.ErrorContains(t, err, "permission denied")

	// The platform's own write still goes through, and it is the only one.
	_, err = h.WriteStdin(ctx, "victim", "w1", []byte("from the platform\n"))
	require.NoError(t, err)
	s, err := h.ReadOutput(ctx, "victim", 0, true)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "got:from the platform", string(readLines(t, s, 1)[0].Data))

	// On the host the control folder belongs to the runner's account alone.
	rec := mustRecord(t, b, h.ID())
	require.NotEqual(t, rec.UID, rec.RunnerUID)
	st, err := os.Stat(filepath.Join(b.boxDir(h.ID()), "control"))
	require.NoError(t, err)
	require.Equal(t, rec.RunnerUID, fileUID(st))
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
}

// TestHostReadsNoPlantedLinks: after a box dies the host replays its journal
// and reads its death note as root. A link planted in their place (by a runner
// gone bad) must not make the host read a host file.
func TestHostReadsNoPlantedLinks(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	b := newBackend(t, opts)
	ctx := testContext(t)
	// Host files the links point at: a journal record and a death note, both
	// well formed, so following a link would show.
	hostDir := filepath.Join(opts.StateDir, "host")
	require.NoError(t, os.Mkdir(hostDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(hostDir, "journal"), []byte("L 1 o 11\nhost secret\n"), 0o600))
	note := filepath.Join(hostDir, "note.json")
	require.NoError(t, os.WriteFile(note, []byte(`{"reason":"killed","message":"host secret"}`), 0o600))

	h, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	deaths, err := b.Watch(ctx, h.ID())
	require.NoError(t, err)
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "agent", EndsBox: true, Argv: []string{"/bin/sh", "-c", "echo hi; read x"}})
	require.NoError(t, err)
	s, err := h.ReadOutput(ctx, "agent", 0, true)
	require.NoError(t, err)
	readLines(t, s, 1)
	s.Close()

	// Plant links where the host will look, the way the box's root could.
	control := filepath.Join(b.boxDir(h.ID()), "control")
	procDir := filepath.Join(control, "boots", mustRecord(t, b, h.ID()).BootID, "proc")
	require.NoError(t, os.Rename(filepath.Join(procDir, "agent"), filepath.Join(procDir, "agent.real")))
	require.NoError(t, os.Symlink(hostDir, filepath.Join(procDir, "agent")))
	require.NoError(t, os.Symlink(note, filepath.Join(control, runnerapi.DeathName)))

	// The runner ends (its own note cannot go through the link to a root file);
	// the note in its place is a link and is not read.
	_, err = h.WriteStdin(ctx, "agent", "end", []byte("\n"))
	if err != nil {
		require.ErrorIs(t, err, sandbox.ErrBoxLost)
	}
	d := <-deaths
	require.NotContains(t, d.Message, "host secret")

	_, err = h.ReadOutput(ctx, "agent", 0, false)
	require.Error(t, err, "the planted journal link is not followed")
	require.False(t, errors.Is(err, sandbox.ErrOutputReleased))
	require.NotContains(t, err.Error(), "host secret")
}

// TestSeccompRefusesNamespacesAndMounts: inside a box a program cannot make a
// user namespace (nor mount, trace or load BPF), while the everyday tools of a
// coding agent keep working: a shell from a bound install, node (threads,
// child processes) and git.
func TestSeccompRefusesNamespacesAndMounts(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	// A program install bound below a folder the host root lacks, as the
	// platform binds Claude Code at /opt/claude.
	h, err := b.Create(testContext(t), sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/usr/bin", Target: "/opt/tools/bin"}}})
	require.NoError(t, err)

	for script, want := range map[string]string{
		"unshare -U true":       "Operation not permitted",
		"unshare -Ur true":      "Operation not permitted",
		"unshare -m true":       "Operation not permitted",
		"mount -t tmpfs x /tmp": "",
		refusedBy("SYS_keyctl"): "refused",
		refusedBy("SYS_bpf"):    "refused",
		refusedBy("SYS_ptrace"): "refused",
	} {
		res := sh(t, h, script)
		require.NotEqual(t, 0, res.ExitCode, "%s must fail; stdout: %s", script, res.Stdout)
		require.NotContains(t, string(res.Stderr), "allowed", script)
		require.Contains(t, string(res.Stderr), want, script)
	}
	res := sh(t, h, `set -e
		/opt/tools/bin/bash -c 'echo $((6*7))'
		node -e 'const {Worker} = require("worker_threads");
			new Worker("require(\"worker_threads\").parentPort.postMessage(1)", {eval: true})
				.on("message", () => console.log(require("child_process").execFileSync("echo", ["node ok"]).toString().trim()))'
		cd /tmp && git init -q repo && cd repo && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && git log --oneline | wc -l`)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.Equal(t, "42\nnode ok\n1\n", string(res.Stdout))
}

// TestNestedUserNamespacesOnRequest: the backend option for programs that
// sandbox their own tools lets them make user namespaces again.
func TestNestedUserNamespacesOnRequest(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.AllowNestedUserNamespaces = true
	b := newBackend(t, opts)
	h, err := b.Create(testContext(t), sandbox.Spec{})
	require.NoError(t, err)
	res := sh(t, h, "unshare -Ur id -u")
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.Equal(t, "0\n", string(res.Stdout))
}

// refusedBy is a script that calls a system call with zero arguments and says
// "refused" when it fails with EPERM, "allowed" otherwise.
func refusedBy(syscallName string) string {
	return `perl -e 'require "syscall.ph"; syscall(&` + syscallName + `, 0, 0, 0, 0) == -1 && $!{EPERM} and die "refused\n"; die "allowed: $!\n"'`
}
