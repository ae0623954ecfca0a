package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
	"github.com/astrabox/astrabox/sandbox/runnerhandle"
)

// handle drives one box through its runner's socket. The runner calls are
// runnerhandle's; what is local is reading a dead box's journal from disk and
// noticing a death while waiting for a port.
type handle struct {
	runnerhandle.Handle
	b *Backend
	x *box
}

var _ sandbox.Handle = (*handle)(nil)

func (b *Backend) newHandle(x *box) *handle {
	c := runnerapi.NewClient(filepath.Join(x.dir, "control", runnerapi.SocketName))
	return &handle{Handle: runnerhandle.New(c, x.lost), b: b, x: x}
}

// lost is a box's runnerhandle.LostFunc: the box is lost once it has a death.
func (x *box) lost(context.Context, error) (string, bool) {
	if d := x.deathInfo(); d != nil {
		return runnerhandle.DeathReason(d), true
	}
	return "", false
}

// The methods below implement sandbox.Handle (documented there).

func (h *handle) ID() string { return h.x.record().ID }

func (h *handle) Info(context.Context) (sandbox.Info, error) { return h.b.info(h.x), nil }

func (h *handle) Close() error { return h.Client().Close() }

// ReadOutput streams from the runner; once the box is gone it replays the
// journal the runner left on the host, so the last lines are never lost.
func (h *handle) ReadOutput(ctx context.Context, id string, after int64, follow bool) (sandbox.OutputStream, error) {
	s, err := h.Client().Output(ctx, id, after, follow)
	if err == nil {
		return s, nil
	}
	if h.x.deathInfo() != nil {
		rec := h.x.record()
		f, ferr := openControl(h.x.dir, filepath.Join("boots", rec.BootID, "proc", id, "journal"))
		if ferr == nil {
			return &journalFile{f: f, dec: runnerapi.NewDecoder(skipReleased(f)), next: after + 1}, nil
		}
	}
	return nil, h.Wrap(ctx, "read output", err)
}

// skipReleased positions a journal reader after the bytes CommitOutput gave
// back: a hole (found with SEEK_DATA) and the zeros of its last partial block.
func skipReleased(f *os.File) io.Reader {
	const seekData = 3
	if _, err := f.Seek(0, seekData); err != nil {
		_, _ = f.Seek(0, io.SeekStart)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		c, err := br.ReadByte()
		if err != nil {
			return br
		}
		if c != 0 {
			_ = br.UnreadByte()
			return br
		}
	}
}

// journalFile replays a journal from disk, checking that offsets follow on
// from the requested one (a released prefix cannot be replayed).
type journalFile struct {
	f    *os.File
	dec  *runnerapi.Decoder
	next int64
}

func (j *journalFile) Next() (sandbox.OutputLine, error) {
	for {
		l, err := j.dec.Next()
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return l, io.EOF // a torn last record was never acknowledged
		}
		if err != nil {
			return l, err
		}
		switch {
		case l.Offset < j.next:
			continue
		case l.Offset > j.next:
			return sandbox.OutputLine{}, fmt.Errorf("replay from %d: %w", j.next, sandbox.ErrOutputReleased)
		}
		j.next++
		return l, nil
	}
}

func (j *journalFile) Close() error { return j.f.Close() }

// WaitPort dials until the port accepts. There is no event for "a program
// started listening", so this polls with a short interval. Unlike
// runnerhandle's, it stops as soon as the box has died: a local death is known
// without asking anyone.
func (h *handle) WaitPort(ctx context.Context, port int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := h.Client().DialPort(ctx, port)
		if err == nil {
			return conn.Close()
		}
		if h.x.deathInfo() != nil {
			return h.Wrap(ctx, "wait port", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for port %d: %w (last error: %v)", port, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
