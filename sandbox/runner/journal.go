package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// journal is the on-disk record of one process's output lines. Each line is
// written to the file before any reader sees it, so a reader that lost its
// connection (or a whole worker that crashed) resumes from an offset with nothing
// repeated and nothing missing. The in-memory index maps offsets to file
// positions for replay.
type journal struct {
	mu     sync.Mutex
	w      *os.File
	r      *os.File
	size   int64
	index  []int64 // index[i] is the file position of the record with offset i+1
	done   bool
	err    error // the current write failure, cleared by the next success
	notify chan struct{}
	buf    []byte

	// released is the newest offset the platform committed; the file's bytes
	// up to its record are given back to the filesystem. copying is held by
	// readers while they copy, so a release never frees bytes being sent.
	released int64
	copying  sync.RWMutex
}

func openJournal(path string) (*journal, error) {
	w, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create journal: %w", err)
	}
	r, err := os.Open(path)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open journal for reading: %w", err)
	}
	return &journal{w: w, r: r, notify: make(chan struct{})}, nil
}

// append journals one line. On a write failure (a full disk) the partial record
// is cut off, the failure is kept for status reports, and the error returned:
// the caller retries, holding the program back rather than dropping output.
func (j *journal) append(stream sandbox.Stream, data []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	offset := int64(len(j.index)) + 1
	j.buf = runnerapi.AppendRecord(j.buf[:0], offset, stream, data)
	n, err := j.w.WriteAt(j.buf, j.size)
	if err != nil || n != len(j.buf) {
		if err == nil {
			err = io.ErrShortWrite
		}
		_ = j.w.Truncate(j.size)
		if j.err == nil {
			j.err = err
			j.wake()
		}
		return fmt.Errorf("%w: %v", sandbox.ErrJournalFailing, err)
	}
	j.index = append(j.index, j.size)
	j.size += int64(n)
	j.err = nil
	j.wake()
	return nil
}

// finish marks the journal complete: no line will follow.
func (j *journal) finish() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.done = true
	j.wake()
}

func (j *journal) wake() {
	close(j.notify)
	j.notify = make(chan struct{})
}

type journalState struct {
	released int64
	last     int64
	size     int64
	done     bool
	err      error
	notify   chan struct{}
}

func (j *journal) state() journalState {
	j.mu.Lock()
	defer j.mu.Unlock()
	return journalState{released: j.released, last: int64(len(j.index)), size: j.size, done: j.done, err: j.err, notify: j.notify}
}

// position returns the file position of the record with the given offset.
func (j *journal) position(offset int64) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.index[offset-1]
}

// stream copies records with offset > after to w, flushing after each batch, and
// ends with an end frame. With follow it waits for new lines until the journal is
// done; without it stops when caught up.
func (j *journal) stream(ctx context.Context, after int64, follow bool, w io.Writer, flush func()) error {
	next := after + 1
	for {
		st := j.state()
		if next < 1 {
			next = 1
		}
		if next <= st.released {
			return fmt.Errorf("replay from %d: %w", next, sandbox.ErrOutputReleased)
		}
		if next <= st.last {
			from := j.position(next)
			j.copying.RLock()
			_, err := io.Copy(w, io.NewSectionReader(j.r, from, st.size-from))
			j.copying.RUnlock()
			if err != nil {
				return fmt.Errorf("send journal: %w", err)
			}
			flush()
			next = st.last + 1
			continue
		}
		if st.done || !follow {
			reason := runnerapi.EndCaughtUp
			if st.done {
				reason = runnerapi.EndExited
			}
			if _, err := w.Write(runnerapi.AppendEnd(nil, reason)); err != nil {
				return fmt.Errorf("send end: %w", err)
			}
			flush()
			return nil
		}
		select {
		case <-st.notify:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// readable checks that lines after the offset have not been released.
func (j *journal) readable(after int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if after < j.released {
		return fmt.Errorf("read after %d: committed through %d: %w", after, j.released, sandbox.ErrOutputReleased)
	}
	return nil
}

// Linux fallocate modes (not in package syscall).
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
)

// release frees the journal's bytes through the given offset. Offsets and the
// file's length stay as they are (a hole is punched), so later offsets keep
// their positions.
func (j *journal) release(through int64) error {
	j.mu.Lock()
	if through > int64(len(j.index)) {
		through = int64(len(j.index))
	}
	if through <= j.released {
		j.mu.Unlock()
		return nil
	}
	end := j.size
	if through < int64(len(j.index)) {
		end = j.index[through]
	}
	j.released = through
	j.mu.Unlock()
	j.copying.Lock()
	defer j.copying.Unlock()
	// A filesystem without hole punching keeps the bytes; the offsets are
	// refused all the same.
	_ = syscall.Fallocate(int(j.w.Fd()), fallocPunchHole|fallocKeepSize, 0, end)
	return nil
}

func (j *journal) close() {
	j.w.Close()
	j.r.Close()
}
