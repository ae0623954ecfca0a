package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/procwait"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

func (b *Backend) withLimits(spec sandbox.Spec) sandbox.Spec {
	spec.Limits = spec.Limits.Or(b.opts.DefaultLimits)
	return spec
}

// create prepares the box's folders, account and cgroups, launches bubblewrap
// detached, waits for the runner's ready signal and starts resident services.
func (b *Backend) create(ctx context.Context, spec sandbox.Spec, pool string) (sandbox.Handle, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	spec = b.withLimits(spec.WithDefaults())
	if err := b.validate(spec); err != nil {
		return nil, err
	}
	id := newID("box-")
	uid, err := b.allocateUID(id)
	if err != nil {
		return nil, err
	}
	runnerUID, err := b.allocateUID(id)
	if err != nil {
		_ = os.Remove(b.uidFile(uid))
		return nil, err
	}
	dir := b.boxDir(id)
	x := &box{dir: dir, dead: make(chan struct{}), creating: true, rec: record{ID: id, UID: uid, RunnerUID: runnerUID, Spec: spec,
		CreatedAt: time.Now().UTC(), Pool: pool, Cgroups: len(b.cg.dirs(id)) > 0, MakerPID: b.self.pid, MakerStart: b.self.start}}
	defer func() {
		x.mu.Lock()
		x.creating = false
		x.mu.Unlock()
	}()
	fail := func(err error) (sandbox.Handle, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if derr := b.Destroy(cctx, id); derr != nil {
			b.log.Warn("local sandbox: clean up failed box", zap.String("box", id), zap.Error(derr))
		}
		b.removeBox(cctx, x)
		return nil, fmt.Errorf("create box: %w", err)
	}
	if err := b.prepare(x); err != nil {
		return fail(err)
	}
	if x.rec.Cgroups {
		if _, err := b.cg.create(id, spec.Limits); err != nil {
			return fail(err)
		}
	}
	b.making(id, stageRecorded)
	bootID, err := b.launch(ctx, x)
	if err != nil {
		return fail(err)
	}
	b.making(id, stageLaunched)
	// The forwarder watches the running box, so it starts after it; no program
	// runs before it serves (the runner only dials the socket per connection).
	if err := b.startEgress(ctx, x); err != nil {
		return fail(err)
	}
	h := b.newHandle(x)
	for _, svc := range spec.Services {
		if _, err := h.StartProcess(ctx, svc.Process); err != nil {
			return fail(fmt.Errorf("start service %q: %w", svc.Process.ID, err))
		}
		if svc.ReadyPort > 0 {
			if err := b.waitServiceReady(ctx, h, svc); err != nil {
				return fail(err)
			}
		}
	}
	x.mu.Lock()
	x.rec.Made = true
	err = writeRecord(x.dir, x.rec)
	x.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	b.expireLater(x)
	b.log.Info("local sandbox: box ready", zap.String("box", id), zap.Int("uid", uid), zap.String("boot", bootID))
	return h, nil
}

// The stages of a Create at which tests hold it (Backend.makingHook).
const (
	// stageRecorded: the box is recorded, bubblewrap not started yet.
	stageRecorded = "recorded"
	// stageLaunched: the box runs, its egress forwarder not started yet.
	stageLaunched = "launched"
)

// making runs the test hook at a stage of a Create, if one is set.
func (b *Backend) making(id, stage string) {
	if b.makingHook != nil {
		b.makingHook(id, stage)
	}
}

// waitServiceReady waits until svc listens on its ready port. A service that exits
// first fails at once, and one still not listening after ReadyTimeout fails then;
// either way the error is a *sandbox.NotReadyError with the service's exit status and last
// output, so whoever reads it learns why the image cannot serve.
func (b *Backend) waitServiceReady(ctx context.Context, h *handle, svc sandbox.Service) error {
	id, port := svc.Process.ID, svc.ReadyPort
	wctx, cancel := context.WithTimeout(ctx, b.opts.ReadyTimeout)
	defer cancel()
	// There is no event for "a program started listening", so this polls.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := h.Client().DialPort(wctx, port)
		if err == nil {
			return conn.Close()
		}
		if d := h.x.deathInfo(); d != nil {
			return h.Wrap(ctx, "wait for service "+id, err)
		}
		st, serr := h.Process(wctx, id)
		if serr == nil && st.Exit != nil {
			return &sandbox.NotReadyError{Service: id, Port: port, Reason: fmt.Sprintf(
				"exited with code %d before listening; its last output: %s", st.Exit.Code, outputTail(ctx, h, id))}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for service %q on port %d: %w", id, port, ctx.Err())
		case <-wctx.Done():
			return &sandbox.NotReadyError{Service: id, Port: port, Reason: fmt.Sprintf(
				"did not listen within %s; its last output: %s", b.opts.ReadyTimeout, outputTail(ctx, h, id))}
		case <-tick.C:
		}
	}
}

// outputTail is the last few lines a process wrote, for an error message.
func outputTail(ctx context.Context, h *handle, id string) string {
	const keep = 5
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s, err := h.ReadOutput(rctx, id, 0, false)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	defer s.Close()
	var lines []string
	for {
		l, err := s.Next()
		if err != nil {
			break
		}
		lines = append(lines, string(l.Data))
		if len(lines) > keep {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return "(none)"
	}
	return strings.Join(lines, " | ")
}

// prepare writes the box's folders, account files and runner configuration.
func (b *Backend) prepare(x *box) error {
	spec, uid, runnerUID := x.rec.Spec, x.rec.UID, x.rec.RunnerUID
	mk := func(p string, mode os.FileMode, owner int) error {
		if err := os.MkdirAll(p, mode); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", p, err)
		}
		if err := os.Chown(p, owner, owner); err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
		}
		return nil
	}
	if err := mk(x.dir, 0o711, 0); err != nil {
		return err
	}
	if err := mk(filepath.Join(x.dir, "etc"), 0o755, 0); err != nil {
		return err
	}
	passwd, group := accountFiles(spec, uid)
	if err := os.WriteFile(filepath.Join(x.dir, "etc/passwd"), []byte(passwd), 0o644); err != nil {
		return fmt.Errorf("write passwd: %w", err)
	}
	if err := os.WriteFile(filepath.Join(x.dir, "etc/group"), []byte(group), 0o644); err != nil {
		return fmt.Errorf("write group: %w", err)
	}
	// The control folder is the runner's alone: the program may not reach the
	// socket that answers approvals nor rewrite the journals replay trusts.
	if err := mk(filepath.Join(x.dir, "control"), 0o700, runnerUID); err != nil {
		return err
	}
	if err := mk(filepath.Join(x.dir, "egress"), 0o755, 0); err != nil {
		return err
	}
	ws := workspaceDir(x.dir, spec, b.volumeDir)
	if err := mk(ws, 0o700, uid); err != nil {
		return err
	}
	if spec.Workspace.Kind == sandbox.WorkspacePersistent {
		// A volume written by an earlier box belongs to that box's uid.
		if err := chownTree(ws, uid); err != nil {
			return err
		}
	}
	if rel, ok := strings.CutPrefix(spec.Identity.Home, spec.Workspace.MountPath+"/"); ok {
		if err := mk(filepath.Join(ws, rel), 0o700, uid); err != nil {
			return err
		}
	}
	cfg := runnerapi.Config{StateDir: runnerapi.ControlDir, Socket: runnerapi.ControlDir + "/" + runnerapi.SocketName,
		Workspace: spec.Workspace.MountPath, Env: boxEnv(spec), ProgramUID: uid, ProgramGID: uid}
	for _, f := range spec.Network.Forwards {
		cfg.Forwards = append(cfg.Forwards, runnerapi.Forward{Listen: "127.0.0.1:" + strconv.Itoa(f.Port),
			Socket: runnerapi.EgressDir + "/" + f.Name + ".sock"})
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encode runner config: %w", err)
	}
	cfgPath := filepath.Join(x.dir, "control", runnerapi.ConfigName)
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		return fmt.Errorf("write runner config: %w", err)
	}
	if err := os.Chown(cfgPath, runnerUID, runnerUID); err != nil {
		return fmt.Errorf("chown runner config: %w", err)
	}
	return writeRecord(x.dir, x.rec)
}

// boxEnv is the environment every process of the box starts with.
func boxEnv(spec sandbox.Spec) map[string]string {
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": spec.Identity.Home,
		"USER": spec.Identity.Account, "LOGNAME": spec.Identity.Account, "SHELL": "/bin/sh",
		"LANG": "C.UTF-8", "TERM": "dumb", "TMPDIR": "/tmp"}
	for k, v := range spec.Env {
		env[k] = v
	}
	return env
}

func chownTree(root string, uid int) error {
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, uid, uid); err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
		}
		return nil
	})
}

// launch starts bubblewrap through the runner's launcher (in the box's cgroups
// and in a user namespace of the box's two accounts) in its own session, so the
// box outlives the worker, and waits for the runner to report that it serves.
func (b *Backend) launch(ctx context.Context, x *box) (string, error) {
	rec := x.record()
	status, err := os.OpenFile(filepath.Join(x.dir, "status.json"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("open status file: %w", err)
	}
	defer status.Close()
	logFile, err := os.OpenFile(filepath.Join(x.dir, "box.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("open box log: %w", err)
	}
	defer logFile.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("ready pipe: %w", err)
	}
	defer readyR.Close()
	filter, err := seccompFile(b.opts.AllowNestedUserNamespaces)
	if err != nil {
		readyW.Close()
		return "", err
	}
	defer filter.Close()
	// Descriptors 3, 4 and 5 in bubblewrap, as bwrapArgs names them.
	extra := []*os.File{status, readyW, filter}
	args := []string{"launch", "-uid", strconv.Itoa(rec.UID), "-runner-uid", strconv.Itoa(rec.RunnerUID),
		"-fds", strconv.Itoa(len(extra))}
	for _, d := range b.cg.dirs(rec.ID) {
		args = append(args, "-cgroup", d)
	}
	args = append(args, "--", b.opts.BwrapPath)
	args = append(args, bwrapArgs(b.opts, rec, x.dir, workspaceDir(x.dir, rec.Spec, b.volumeDir))...)
	cmd := exec.Command(b.opts.RunnerPath, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	pidfd := procwait.OnStart(cmd, b.pidfds)
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return "", fmt.Errorf("start bubblewrap: %w", err)
	}
	start, _ := procStart(cmd.Process.Pid)
	x.mu.Lock()
	x.rec.BwrapPID, x.rec.BwrapStart = cmd.Process.Pid, start
	err = writeRecord(x.dir, x.rec)
	x.mu.Unlock()
	b.register(x)
	// Watching the process alone lets the command (the box's whole argument list)
	// go: the watch lasts the box's life. Its output goes to a file, so there is no
	// copying for Cmd.Wait to finish.
	proc := cmd.Process
	b.reaper.Watch(*pidfd, func() {
		_, _ = proc.Wait()
		b.onExit(x)
	})
	if err != nil {
		return "", err
	}

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(readyR).ReadString('\n')
		line <- s
	}()
	timer := time.NewTimer(b.opts.ReadyTimeout)
	defer timer.Stop()
	var got string
	select {
	case got = <-line:
	case <-timer.C:
		return "", fmt.Errorf("box not ready after %s: %s", b.opts.ReadyTimeout, logTail(x.dir))
	case <-ctx.Done():
		return "", fmt.Errorf("wait for box: %w", ctx.Err())
	}
	fields := strings.Fields(got)
	if len(fields) != 2 || fields[0] != "ready" {
		return "", fmt.Errorf("box did not start: %s", logTail(x.dir))
	}
	st, err := readStatus(x.dir)
	if err != nil || st.ChildPID == 0 {
		return "", fmt.Errorf("box started without a status record: %v", err)
	}
	initStart, _ := procStart(st.ChildPID)
	x.mu.Lock()
	x.rec.InitPID, x.rec.InitStart, x.rec.BootID = st.ChildPID, initStart, fields[1]
	err = writeRecord(x.dir, x.rec)
	x.mu.Unlock()
	return fields[1], err
}

func (b *Backend) register(x *box) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.boxes[x.rec.ID] = x
}

// logTail returns the end of the box's log for error messages.
func logTail(dir string) string {
	raw, err := os.ReadFile(filepath.Join(dir, "box.log"))
	if err != nil {
		return "no box log"
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	if s == "" {
		return "box log is empty"
	}
	return s
}

var errNotRunning = errors.New("box is not running")
