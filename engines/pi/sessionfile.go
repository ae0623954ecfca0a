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

// sessionAdmissions remembers which user messages the session file durably holds,
// by their timestamp (ms, the same in Pi's events and in the file). Pi writes a new
// session's header and first user message only when the first assistant message
// ends; after that every message is appended at its message_end. The file only
// grows, so what was found stays found.
type sessionAdmissions struct {
	box      engines.Box
	identity *engines.RuntimeIdentity
	path     string
	// minInterval spaces re-reads of the file while inputs wait for admission.
	minInterval time.Duration

	mu       sync.Mutex
	held     map[int64]bool
	parsed   int
	lastRead time.Time
}

func newSessionAdmissions(box engines.Box, identity *engines.RuntimeIdentity, path string) *sessionAdmissions {
	return &sessionAdmissions{box: box, identity: identity, path: path, minInterval: 50 * time.Millisecond, held: map[int64]bool{}}
}

// holds reports whether the file holds the user message of timestamp ts, re-reading
// the file when the last read is older than minInterval.
func (a *sessionAdmissions) holds(ctx context.Context, ts int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held[ts] {
		return true
	}
	if !a.lastRead.IsZero() && time.Since(a.lastRead) < a.minInterval {
		return false
	}
	a.refreshLocked(ctx)
	return a.held[ts]
}

// count is the number of user messages the file holds.
func (a *sessionAdmissions) count(ctx context.Context) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refreshLocked(ctx)
	return len(a.held)
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
		if ts, ok := userMessageTimestamp(l); ok {
			a.held[ts] = true
		}
	}
	a.parsed = end + 1
}

// userMessageTimestamp reads a session line that records a user message:
// {"type":"message",…,"message":{"role":"user",…,"timestamp":…}}.
func userMessageTimestamp(l []byte) (int64, bool) {
	var e struct {
		Type    string `json:"type"`
		Message struct {
			Role      string `json:"role"`
			Timestamp int64  `json:"timestamp"`
		} `json:"message"`
	}
	if json.Unmarshal(l, &e) != nil || e.Type != "message" || e.Message.Role != roleUser {
		return 0, false
	}
	return e.Message.Timestamp, true
}
