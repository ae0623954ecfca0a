package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/procwait"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
)

// egressLog is the forwarder's log in the box folder (the host's side, never
// bound into the box).
const egressLog = "egress.log"

// forwarderConfig is what the box's forwarder serves, or false when the box
// declares no forwards. The sockets belong to the runner's account, which
// forwards the program's loopback connections to them; the program's account
// cannot connect to them itself.
func (b *Backend) forwarderConfig(x *box) (egress.ForwarderConfig, bool) {
	rec := x.record()
	if len(rec.Spec.Network.Forwards) == 0 {
		return egress.ForwarderConfig{}, false
	}
	routes := make(map[string]egress.Route, len(rec.Spec.Network.Forwards))
	for _, f := range rec.Spec.Network.Forwards {
		routes[f.Name] = forwardRoute(f, b.opts.Egress)
	}
	owner := rec.RunnerUID
	if owner == 0 {
		owner = rec.UID // a box adopted from a backend whose runners ran as the program
	}
	return egress.ForwarderConfig{Dir: filepath.Join(x.dir, "egress"), UID: owner, GID: owner,
		Routes: routes, DrainTimeout: b.opts.EgressDrainTimeout, BoxPID: rec.BwrapPID}, true
}

// forwardRoute is where a forward leads: the upstream its spec names, with no
// credential and only its paths, or else the service the host configures under its
// name.
func forwardRoute(f sandbox.Forward, configured map[string]egress.Route) egress.Route {
	if f.Upstream != "" {
		return egress.Route{Upstream: f.Upstream, Paths: f.Paths}
	}
	return configured[f.Name]
}

// startEgress makes sure the box's forwarder serves its declared forwards; the
// box is running, and the forwarder ends when the box's outer process does. A
// forwarder that an earlier worker started with the same configuration is
// adopted as it is, so the model streams it carries go on. One with another
// configuration (a rotated credential) is replaced: the new one takes the
// sockets' paths, and the old one finishes the requests in progress and exits.
func (b *Backend) startEgress(ctx context.Context, x *box) error {
	cfg, ok := b.forwarderConfig(x)
	if !ok {
		return nil
	}
	digest := cfg.Digest()
	old := x.record()
	serving := running(old.EgressPID, old.EgressStart)
	if serving && old.EgressDigest == digest {
		return nil
	}
	pid, start, err := b.launchForwarder(ctx, x.dir, cfg)
	if err != nil {
		return err
	}
	if !alive(old.BwrapPID, old.BwrapStart) {
		// The box ended (and its pid might be another process's by now) before the
		// forwarder watched it.
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Errorf("egress forwarder: box %s ended", old.ID)
	}
	x.mu.Lock()
	x.rec.EgressPID, x.rec.EgressStart, x.rec.EgressDigest = pid, start, digest
	err = writeRecord(x.dir, x.rec)
	x.mu.Unlock()
	if serving {
		_ = syscall.Kill(old.EgressPID, syscall.SIGTERM)
	}
	return err
}

// launchForwarder starts `astrabox-runner egress` in its own session, so it
// outlives this worker, hands it cfg (with the credentials) on its stdin and
// waits until every socket listens.
func (b *Backend) launchForwarder(ctx context.Context, dir string, cfg egress.ForwarderConfig) (int, uint64, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return 0, 0, fmt.Errorf("encode egress config: %w", err)
	}
	logFile, err := os.OpenFile(filepath.Join(dir, egressLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, 0, fmt.Errorf("open egress log: %w", err)
	}
	defer logFile.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return 0, 0, fmt.Errorf("egress ready pipe: %w", err)
	}
	defer readyR.Close()
	cmd := exec.Command(b.opts.RunnerPath, "egress", "-ready-fd", "3")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin = bytes.NewReader(raw)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	pidfd := procwait.OnStart(cmd, b.pidfds)
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("start egress forwarder: %w", err)
	}
	pid := cmd.Process.Pid
	start, _ := procStart(pid)
	// While this worker lives it reaps the forwarder; after, init does. Its stdin
	// copy ends by itself once the settings are written.
	proc := cmd.Process
	b.reaper.Watch(*pidfd, func() { _, _ = proc.Wait() })

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
	case <-ctx.Done():
	}
	if strings.TrimSpace(got) != "ready" {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return 0, 0, fmt.Errorf("egress forwarder did not start: %s", fileTail(filepath.Join(dir, egressLog)))
	}
	return pid, start, nil
}

// stopEgress ends the box's forwarder once the box is gone: nothing in it can
// be waiting for a reply any more.
func (b *Backend) stopEgress(x *box) {
	rec := x.record()
	if !running(rec.EgressPID, rec.EgressStart) {
		return
	}
	if err := syscall.Kill(rec.EgressPID, syscall.SIGKILL); err != nil {
		b.log.Warn("local sandbox: stop egress forwarder", zap.String("box", rec.ID), zap.Error(err))
		return
	}
	// Removing the box folder next must not race the forwarder's last steps.
	waitExit(rec.EgressPID, rec.EgressStart)
}

// fileTail returns the end of a log file for error messages.
func fileTail(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	if s == "" {
		return "the log is empty"
	}
	return s
}
