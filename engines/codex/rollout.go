package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/astrabox/astrabox/engines"
)

// RolloutPattern is where Codex keeps a thread's rollout, relative to CODEX_HOME, as a
// session-log pattern: sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl. The
// date and time are Codex's at the thread's start, so the platform resolves them
// against the box's files; a restored rollout goes back to the same relative path,
// where thread/resume finds it by the thread id.
const RolloutPattern = "sessions/*/*/*/rollout-*-" + engines.SessionLogKeyPlaceholder + ".jsonl"

// rolloutAdmissions remembers which input ids the rollout durably holds: Codex writes
// the user message as a response_item and an event_msg item_completed whose item
// carries our id as client_id, before it asks the model. The rollout only grows, so
// what was found stays found.
type rolloutAdmissions struct {
	box      engines.Box
	identity *engines.RuntimeIdentity
	// path is the rollout file Codex named in thread/start or thread/resume.
	path string
	// minInterval spaces re-reads of the file while inputs wait for admission.
	minInterval time.Duration

	mu       sync.Mutex
	held     map[string]bool
	order    []string
	parsed   int
	lastRead time.Time
}

func newRolloutAdmissions(box engines.Box, identity *engines.RuntimeIdentity, path string) *rolloutAdmissions {
	return &rolloutAdmissions{box: box, identity: identity, path: path, minInterval: 50 * time.Millisecond, held: map[string]bool{}}
}

// holds reports whether the rollout holds the input, re-reading the file when the last
// read is older than minInterval.
func (a *rolloutAdmissions) holds(ctx context.Context, inputID string) bool {
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

// all returns every input id the rollout holds, in rollout order.
func (a *rolloutAdmissions) all(ctx context.Context) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refreshLocked(ctx)
	return append([]string{}, a.order...)
}

func (a *rolloutAdmissions) refreshLocked(ctx context.Context) {
	a.lastRead = time.Now()
	data, err := a.box.ReadFile(ctx, a.identity, a.path)
	if err != nil || len(data) < a.parsed {
		// Not readable: it admits nothing.
		return
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < a.parsed {
		return
	}
	for _, line := range bytes.Split(data[a.parsed:end], []byte{'\n'}) {
		if id := admittedClientID(line); id != "" && !a.held[id] {
			a.held[id] = true
			a.order = append(a.order, id)
		}
	}
	a.parsed = end + 1
}

// admittedClientID returns the client id of a rollout line that records a user
// message: {"type":"event_msg","payload":{"type":"item_completed","item":{"type":
// "UserMessage","client_id":…}}}.
func admittedClientID(line []byte) string {
	var e struct {
		Type    string `json:"type"`
		Payload struct {
			Type string `json:"type"`
			Item struct {
				Type     string `json:"type"`
				ClientID string `json:"client_id"`
			} `json:"item"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &e) != nil || e.Type != "event_msg" || e.Payload.Type != "item_completed" ||
		e.Payload.Item.Type != "UserMessage" {
		return ""
	}
	return e.Payload.Item.ClientID
}
