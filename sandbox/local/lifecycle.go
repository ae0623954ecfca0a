package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// adoptAll loads every recorded box: running ones are watched again, boxes
// that died while no worker watched are noted as lost. A box another worker
// process is still making is left to it (makingElsewhere); Get adopts it once made.
// A prewarmed box of another backend never joins this one's pool (a pool's name is
// its backend's own): a live neighbour's stays its pool's, and one whose maker died
// before anyone claimed it is destroyed (orphanedInPool).
func (b *Backend) adoptAll(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(b.opts.StateDir, "boxes"))
	if err != nil {
		return fmt.Errorf("local sandbox: read boxes: %w", err)
	}
	for _, e := range entries {
		dir := filepath.Join(b.opts.StateDir, "boxes", e.Name())
		rec, err := readRecord(dir)
		if err != nil {
			// A box whose creation was cut short has no record; Reap removes it.
			b.log.Warn("local sandbox: skip box without record", zap.String("dir", dir), zap.Error(err))
			continue
		}
		if makingElsewhere(rec) {
			b.log.Info("local sandbox: box still being made by another worker", zap.String("box", rec.ID))
			continue
		}
		x := &box{dir: dir, rec: rec, dead: make(chan struct{})}
		b.register(x)
		b.watchAdopted(ctx, x)
		if orphanedInPool(rec) {
			if err := b.Destroy(ctx, rec.ID); err != nil {
				b.log.Warn("local sandbox: destroy a dead worker's prewarmed box", zap.String("box", rec.ID), zap.Error(err))
				continue
			}
			b.log.Info("local sandbox: destroyed a dead worker's prewarmed box", zap.String("box", rec.ID), zap.String("pool", rec.Pool))
		}
	}
	return nil
}

// orphanedInPool reports a prewarmed box nobody claimed whose maker process died: its
// pool died with it (a pool belongs to one backend of one process), and no Session
// owns the box, so nothing else would ever destroy it. A claim clears the record's
// pool before the box is handed out.
func orphanedInPool(rec record) bool {
	return rec.Pool != "" && !alive(rec.MakerPID, rec.MakerStart)
}

// makingElsewhere reports whether a live worker process, another or this one's
// other backend, is still making the box: its Create has not recorded it made. The
// box is its maker's until then; taken for one that died (its launcher not yet
// started, or its forwarder not yet), it was ended under its maker (its cgroup
// killed), given a second egress forwarder, or reported lost to its Session later
// by this worker. A box whose maker died mid-creation is adopted as any other, to
// be watched or cleaned up.
func makingElsewhere(rec record) bool {
	return !rec.Made && rec.MakerPID != 0 && alive(rec.MakerPID, rec.MakerStart)
}

// adopt takes on a box another worker process made in the same state folder since
// this backend started: workers sharing a machine's boxes take over each other's
// Sessions when one of them dies. A box whose creation has not finished (its init
// not yet recorded, or its maker still making it) is not found: it is still its
// maker's.
func (b *Backend) adopt(id string) (*box, error) {
	if id == "" || filepath.Base(id) != id || !strings.HasPrefix(id, "box-") {
		return nil, fmt.Errorf("box %q: %w", id, sandbox.ErrNotFound)
	}
	dir := b.boxDir(id)
	rec, err := readRecord(dir)
	if err != nil || rec.ID != id || rec.InitPID == 0 || makingElsewhere(rec) {
		return nil, fmt.Errorf("box %q: %w", id, sandbox.ErrNotFound)
	}
	x := &box{dir: dir, rec: rec, dead: make(chan struct{})}
	b.mu.Lock()
	if known, ok := b.boxes[id]; ok {
		b.mu.Unlock()
		return known, nil // adopted meanwhile
	}
	if b.closed {
		b.mu.Unlock()
		return nil, errClosed
	}
	b.boxes[id] = x
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.ReadyTimeout)
	defer cancel()
	b.watchAdopted(ctx, x)
	b.log.Info("local sandbox: box adopted from another worker", zap.String("box", id))
	return x, nil
}

// watchAdopted watches a registered box this backend did not create as Create
// does its own: its end is recorded, its egress forwarder kept serving and its
// timeout applied. A box that has already ended is only noted as lost.
func (b *Backend) watchAdopted(ctx context.Context, x *box) {
	rec := x.record()
	if !alive(rec.BwrapPID, rec.BwrapStart) {
		b.onExit(x)
		return
	}
	if err := b.startEgress(ctx, x); err != nil {
		b.log.Warn("local sandbox: restart egress", zap.String("box", rec.ID), zap.Error(err))
	}
	if fd, ok := pidfdOf(rec.BwrapPID, rec.BwrapStart); ok {
		// Not this process's child (init reaps it): its pidfd says when it ends,
		// watched with the boxes this backend made, on the reaper's one goroutine.
		b.reaper.Watch(fd, func() { b.onExit(x) })
	} else {
		b.onExit(x)
	}
	b.expireLater(x)
}

// expireLater destroys the box when its Spec.Timeout has passed since creation.
func (b *Backend) expireLater(x *box) {
	rec := x.record()
	if rec.Spec.Timeout <= 0 {
		return
	}
	go func() {
		timer := time.NewTimer(time.Until(rec.CreatedAt.Add(rec.Spec.Timeout)))
		defer timer.Stop()
		select {
		case <-x.dead:
			return
		case <-b.done:
			return
		case <-timer.C:
		}
		x.mu.Lock()
		x.expired = true
		x.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Destroy(ctx, rec.ID); err != nil {
			b.log.Warn("local sandbox: destroy expired box", zap.String("box", rec.ID), zap.Error(err))
		}
	}()
}

// pidfdOf opens a pidfd for the process (pid, start), which need not be this
// worker's child; ok is false when the process has ended, its pid reused before the
// pidfd was opened included.
func pidfdOf(pid int, start uint64) (fd int, ok bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, false
	}
	if !alive(pid, start) {
		_ = unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// waitExit blocks until the process (pid, start) has exited. It works for
// processes this worker did not start, through a pidfd.
func waitExit(pid int, start uint64) {
	fd, ok := pidfdOf(pid, start)
	if !ok {
		return
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// onExit runs once the outer bubblewrap (and so the runner) has ended: it
// records why, kills anything left in the box and wakes watchers.
func (b *Backend) onExit(x *box) {
	x.mu.Lock()
	if x.death != nil {
		x.mu.Unlock()
		return
	}
	rec, destroying := x.rec, x.destroying
	d := &sandbox.Death{BoxID: rec.ID, At: time.Now().UTC()}
	switch {
	case x.expired:
		d.Reason, d.Message = "expired", fmt.Sprintf("the box reached its timeout of %s", rec.Spec.Timeout)
	case x.released:
		d.Reason, d.Message = "released", "the box was released"
	case x.destroying:
		d.Reason, d.Message = "destroyed", "the box was destroyed"
	default:
		d.Reason, d.Message = deathCause(x.dir)
	}
	x.death = d
	x.mu.Unlock()
	// bubblewrap's init waits for every process: kill it to end stragglers.
	if alive(rec.InitPID, rec.InitStart) {
		_ = syscall.Kill(rec.InitPID, syscall.SIGKILL)
	}
	if rec.Cgroups {
		b.cg.kill(rec.ID)
	}
	b.stopEgress(x)
	close(x.dead)
	if b.pool != nil {
		b.pool.Drop(rec.ID)
	}
	if rec.Pool == b.instance && !destroying {
		// A pooled box nobody claimed died: nobody else will clean it up.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = b.Destroy(ctx, rec.ID)
		}()
	}
	b.log.Info("local sandbox: box ended", zap.String("box", rec.ID), zap.String("reason", d.Reason),
		zap.String("message", d.Message))
}

// deathCause reads the runner's death note, else bubblewrap's exit status.
func deathCause(dir string) (string, string) {
	if raw, err := readControl(dir, runnerapi.DeathName, 64<<10); err == nil {
		var note runnerapi.Death
		if json.Unmarshal(raw, &note) == nil && note.Reason != "" {
			return note.Reason, note.Message
		}
	}
	st, err := readStatus(dir)
	if err == nil && st.ExitCode != nil {
		code := *st.ExitCode
		if code > 128 {
			return "killed", fmt.Sprintf("the runner was killed by signal %d", code-128)
		}
		return "runner_exited", fmt.Sprintf("the runner exited with code %d", code)
	}
	return "killed", "the box ended without an exit status (killed from outside)"
}

// Watch reports the box's death once.
func (b *Backend) Watch(ctx context.Context, id string) (<-chan sandbox.Death, error) {
	x, err := b.lookup(id)
	if err != nil {
		return nil, err
	}
	out := make(chan sandbox.Death, 1)
	go func() {
		defer close(out)
		select {
		case <-x.dead:
			out <- *x.deathInfo()
		case <-ctx.Done():
		}
	}()
	return out, nil
}

// Release asks the runner to stop its programs gracefully, then destroys the box.
func (b *Backend) Release(ctx context.Context, id string) error {
	x, err := b.lookup(id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	x.mu.Lock()
	x.released = true
	x.mu.Unlock()
	if x.deathInfo() == nil {
		if x.record().Paused {
			_ = b.setPaused(ctx, id, false)
		}
		c := runnerapi.NewClient(filepath.Join(x.dir, "control", runnerapi.SocketName))
		if err := c.Shutdown(ctx, b.opts.ReleaseGrace); err == nil {
			timer := time.NewTimer(b.opts.ReleaseGrace + 2*time.Second)
			select {
			case <-x.dead:
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
		}
		c.Close()
	}
	return b.Destroy(ctx, id)
}

// Destroy kills the box at once and removes its files, cgroups and uid
// reservation; a persistent workspace volume stays.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	x, err := b.lookup(id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	x.mu.Lock()
	x.destroying = true
	rec := x.rec
	x.mu.Unlock()
	if rec.Cgroups && b.cg.have["freezer"] && rec.Paused {
		_ = b.cg.freeze(ctx, id, false)
	}
	if alive(rec.InitPID, rec.InitStart) {
		_ = syscall.Kill(rec.InitPID, syscall.SIGKILL)
	} else if rec.InitPID == 0 && alive(rec.BwrapPID, rec.BwrapStart) {
		// Creation did not finish: the status file may already name the box's
		// init, which outlives the outer bubblewrap if only that is killed.
		if st, err := readStatus(x.dir); err == nil && st.ChildPID > 0 {
			_ = syscall.Kill(st.ChildPID, syscall.SIGKILL)
		}
		_ = syscall.Kill(rec.BwrapPID, syscall.SIGKILL)
	}
	if alive(rec.BwrapPID, rec.BwrapStart) {
		select {
		case <-x.dead:
		case <-ctx.Done():
			return fmt.Errorf("destroy %s: wait for the box to end: %w", id, ctx.Err())
		case <-time.After(5 * time.Second):
			// The launcher never got as far as bubblewrap's init: kill it directly.
			_ = syscall.Kill(rec.BwrapPID, syscall.SIGKILL)
			<-x.dead
		}
	} else {
		b.onExit(x)
	}
	return b.removeBox(ctx, x)
}

// removeBox deletes what a box owns on the host. It is safe to repeat.
func (b *Backend) removeBox(ctx context.Context, x *box) error {
	b.stopEgress(x)
	rec := x.record()
	var errs []error
	if len(b.cg.dirs(rec.ID)) > 0 {
		b.cg.kill(rec.ID)
		errs = append(errs, b.cg.remove(ctx, rec.ID))
	}
	if err := os.RemoveAll(x.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove box dir: %w", err))
	}
	for _, uid := range []int{rec.UID, rec.RunnerUID} {
		if uid == 0 {
			continue
		}
		if err := os.Remove(b.uidFile(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("release uid %d: %w", uid, err))
		}
	}
	b.mu.Lock()
	if b.boxes[rec.ID] == x {
		delete(b.boxes, rec.ID)
	}
	b.mu.Unlock()
	return errors.Join(errs...)
}

// beingCreated reports whether Create is still running for the box, or the box
// is on its way into this backend's prewarm pool.
func (b *Backend) beingCreated(id string) bool {
	x, err := b.lookup(id)
	if err != nil {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	// A box made for this backend's pool is the pool's until claimed.
	return x.creating || x.rec.Pool == b.instance
}

// Reap destroys every box keep does not claim (boxes waiting in this backend's
// prewarm pool and boxes whose Create has not returned are kept; a caller records
// its new box's ownership before its next Reap), then removes leftovers of
// interrupted creations:
// box folders without a record, uid reservations without a box, and cgroups of
// unknown boxes.
func (b *Backend) Reap(ctx context.Context, keep func(id string) bool) ([]string, error) {
	infos, _ := b.List(ctx)
	var reaped []string
	var errs []error
	for _, in := range infos {
		if b.pool.Holds(in.ID) || b.beingCreated(in.ID) || keep(in.ID) {
			continue
		}
		if err := b.Destroy(ctx, in.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped = append(reaped, in.ID)
	}
	b.mu.Lock()
	known := map[string]bool{}
	for id := range b.boxes {
		known[id] = true
	}
	b.mu.Unlock()
	entries, _ := os.ReadDir(filepath.Join(b.opts.StateDir, "boxes"))
	for _, e := range entries {
		if known[e.Name()] {
			continue
		}
		if _, err := os.Stat(filepath.Join(b.opts.StateDir, "boxes", e.Name(), recordName)); err == nil {
			continue // created meanwhile by another worker process
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) < b.opts.ReadyTimeout {
			continue // a creation in progress
		}
		errs = append(errs, os.RemoveAll(filepath.Join(b.opts.StateDir, "boxes", e.Name())))
	}
	uids, _ := os.ReadDir(filepath.Join(b.opts.StateDir, "uids"))
	for _, u := range uids {
		raw, err := os.ReadFile(filepath.Join(b.opts.StateDir, "uids", u.Name()))
		owner := strings.TrimSpace(string(raw))
		if err != nil || known[owner] {
			continue
		}
		if _, err := os.Stat(b.boxDir(owner)); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(filepath.Join(b.opts.StateDir, "uids", u.Name()))
		}
	}
	for _, id := range b.cg.known() {
		if !known[id] {
			b.cg.kill(id)
			errs = append(errs, b.cg.remove(ctx, id))
		}
	}
	return reaped, errors.Join(errs...)
}
