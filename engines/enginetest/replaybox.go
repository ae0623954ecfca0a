package enginetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/engines"
)

// ReadNativeJournal reads a native recording made by a re-record command (one
// {"dir","line"} object per line: in, out or err) into what a box's runner would hold:
// the stdout and stderr lines as a journal with offsets counted from 1, and the lines
// written to the program's stdin.
func ReadNativeJournal(t testing.TB, path string) (journal []engines.OutputLine, stdin []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open native recording: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var e struct {
			Dir  string `json:"dir"`
			Line string `json:"line"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch e.Dir {
		case "out", "err":
			stream := engines.Stdout
			if e.Dir == "err" {
				stream = engines.Stderr
			}
			journal = append(journal, engines.OutputLine{Offset: int64(len(journal) + 1), Stream: stream, Data: []byte(e.Line)})
		case "in":
			stdin = append(stdin, e.Line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return journal, stdin
}

// ReplayBox is a box and the process session in it, holding one recorded journal and
// the program's files by path: reading output replays the journal from an offset and
// then ends, as the recorded process did; stdin writes are kept for the test to check.
type ReplayBox struct {
	name    string
	journal []engines.OutputLine
	files   map[string][]byte

	mu     sync.Mutex
	writes []string
}

var (
	_ engines.Box            = (*ReplayBox)(nil)
	_ engines.ProcessSession = (*ReplayBox)(nil)
)

// NewReplayBox holds journal and files (box path -> content) under name.
func NewReplayBox(name string, journal []engines.OutputLine, files map[string][]byte) *ReplayBox {
	return &ReplayBox{name: name, journal: journal, files: files}
}

// ID implements engines.Box.
func (b *ReplayBox) ID() string { return b.name }

// StartProcess implements engines.Box: the recorded process is the only one.
func (b *ReplayBox) StartProcess(context.Context, engines.ProcessSpec) (engines.ProcessSession, error) {
	return b, nil
}

// ReadFile implements engines.Box with the recorded files.
func (b *ReplayBox) ReadFile(_ context.Context, _ *engines.RuntimeIdentity, path string) ([]byte, error) {
	data, ok := b.files[path]
	if !ok {
		return nil, fmt.Errorf("open %s: %w", path, os.ErrNotExist)
	}
	return data, nil
}

// WriteFile implements engines.Box: a replay changes nothing.
func (b *ReplayBox) WriteFile(context.Context, *engines.RuntimeIdentity, string, []byte, uint32) error {
	return errors.New("the replay box is read-only")
}

// DialPort implements engines.Box.
func (b *ReplayBox) DialPort(context.Context, int) (net.Conn, error) {
	return nil, errors.New("the replay box publishes no port")
}

// Name implements engines.ProcessSession.
func (b *ReplayBox) Name() string { return b.name }

// WriteStdin implements engines.ProcessSession: it keeps "<write id> <data>".
func (b *ReplayBox) WriteStdin(_ context.Context, writeID string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes = append(b.writes, writeID+" "+string(bytes.TrimSpace(data)))
	return nil
}

// Written returns the stdin writes so far, each "<write id> <data>".
func (b *ReplayBox) Written() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.writes...)
}

// ReadOutput implements engines.ProcessSession: the journal from offset, then the end.
func (b *ReplayBox) ReadOutput(ctx context.Context, offset int64, _ bool) iter.Seq2[engines.OutputLine, error] {
	return func(yield func(engines.OutputLine, error) bool) {
		for _, l := range b.journal {
			if l.Offset < offset {
				continue
			}
			if ctx.Err() != nil || !yield(l, nil) {
				return
			}
		}
	}
}

// Signal implements engines.ProcessSession.
func (b *ReplayBox) Signal(context.Context, string) error { return nil }

// ExitStatus implements engines.ProcessSession: the recorded process ended cleanly.
func (b *ReplayBox) ExitStatus(context.Context) (*engines.ExitStatus, error) {
	return &engines.ExitStatus{Code: 0}, nil
}
