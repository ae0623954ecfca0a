package engines

import (
	"context"
	"sync"
	"time"
)

// FileAdmissions remembers which input ids a program's own append-only JSONL file in the
// box durably holds (Claude Code's transcript, Codex's rollout, Pi's session file): an
// input is admitted when a
// line of the file records it, never on the program's reply. The file only grows, so
// what was found stays found, and each read fetches and parses only the bytes after
// the last complete line read (the file can be megabytes long, and it is read every
// 50 ms while an input waits).
type FileAdmissions struct {
	box      Box
	identity *RuntimeIdentity
	path     string
	// inputsOf returns the input ids a line records, in the order they were sent.
	inputsOf func(line []byte) []string
	// minInterval spaces re-reads of the file while inputs wait for admission.
	minInterval time.Duration

	mu       sync.Mutex
	held     map[string]bool
	order    []string
	parsed   int64
	lastRead time.Time
}

// NewFileAdmissions indexes the file at path in the box, read as identity; inputsOf
// names the inputs a complete line records.
func NewFileAdmissions(box Box, identity *RuntimeIdentity, path string, inputsOf func(line []byte) []string) *FileAdmissions {
	return &FileAdmissions{box: box, identity: identity, path: path, inputsOf: inputsOf,
		minInterval: 50 * time.Millisecond, held: map[string]bool{}}
}

// Path is the file's path in the box.
func (a *FileAdmissions) Path() string { return a.path }

// Holds reports whether the file holds the input, re-reading the file when the last
// read is older than a short interval (callers poll while inputs wait).
func (a *FileAdmissions) Holds(ctx context.Context, inputID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held[inputID] {
		return true
	}
	if !a.lastRead.IsZero() && time.Since(a.lastRead) < a.minInterval {
		return false
	}
	a.refreshLocked(ctx)
	return a.held[inputID]
}

// All returns every input the file holds, in file order.
func (a *FileAdmissions) All(ctx context.Context) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refreshLocked(ctx)
	return append([]string{}, a.order...)
}

func (a *FileAdmissions) refreshLocked(ctx context.Context) {
	a.lastRead = time.Now()
	// A file not written yet (a program creates its file with its first write) or
	// replaced admits nothing.
	lines, next := ReadNewLines(ctx, a.box, a.identity, a.path, a.parsed)
	for _, line := range lines {
		for _, id := range a.inputsOf(line) {
			if id != "" && !a.held[id] {
				a.held[id] = true
				a.order = append(a.order, id)
			}
		}
	}
	a.parsed = next
}
