package pi

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/astrabox/astrabox/engines"
)

// SessionPattern is where the platform has Pi keep a conversation's session file,
// relative to PI_CODING_AGENT_DIR: the platform names the file after the engine
// session key it chose and passes the path with --session, so a restored file is
// found at the same place.
const SessionPattern = "sessions/" + engines.SessionLogKeyPlaceholder + ".jsonl"

// sessionAdmissions remembers which inputs the session file durably holds: the
// platform extension records the input id on each user message (inputIDField), in the
// file as in Pi's event. Pi writes a new session's header and first user message only
// when the first assistant message ends; after that every message is appended at its
// message_end. The file only grows, so what was found stays found.
type sessionAdmissions struct {
	box      engines.Box
	identity *engines.RuntimeIdentity
	path     string
	// minInterval spaces re-reads of the file while inputs wait for admission.
	minInterval time.Duration

	mu       sync.Mutex
	held     map[string]bool
	order    []string
	parsed   int
	lastRead time.Time
}

func newSessionAdmissions(box engines.Box, identity *engines.RuntimeIdentity, path string) *sessionAdmissions {
	return &sessionAdmissions{box: box, identity: identity, path: path, minInterval: 50 * time.Millisecond, held: map[string]bool{}}
}

// holds reports whether the file holds the input's user message, re-reading the file
// when the last read is older than minInterval.
func (a *sessionAdmissions) holds(ctx context.Context, inputID string) bool {
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

// all returns every input the file holds, in file order.
func (a *sessionAdmissions) all(ctx context.Context) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refreshLocked(ctx)
	return append([]string{}, a.order...)
}

func (a *sessionAdmissions) refreshLocked(ctx context.Context) {
	a.lastRead = time.Now()
	data, err := a.box.ReadFile(ctx, a.identity, a.path)
	if err != nil || len(data) < a.parsed {
		// Not written yet, or not readable: it admits nothing.
		return
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < a.parsed {
		return
	}
	for _, l := range bytes.Split(data[a.parsed:end], []byte{'\n'}) {
		if id := userMessageInput(l); id != "" && !a.held[id] {
			a.held[id] = true
			a.order = append(a.order, id)
		}
	}
	a.parsed = end + 1
}

// userMessageInput reads the input id of a session line that records a user message:
// {"type":"message",…,"message":{"role":"user",…,"astraboxInputId":…}}.
func userMessageInput(l []byte) string {
	var e struct {
		Type    string `json:"type"`
		Message struct {
			Role    string `json:"role"`
			InputID string `json:"astraboxInputId"`
		} `json:"message"`
	}
	if json.Unmarshal(l, &e) != nil || e.Type != "message" || e.Message.Role != roleUser {
		return ""
	}
	return e.Message.InputID
}
