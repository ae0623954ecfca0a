package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/engines"
)

// metaLogLines is the _meta key of a session/prompt that records how many complete
// lines the session log held when the client sent the prompt: the prompt's user record
// can only come after them. Programs ignore _meta keys they do not know; the journal
// keeps it, so every reader matches the same lines.
const metaLogLines = "astrabox/session_log_lines"

// logRereadInterval spaces re-reads of the session log while prompts wait for it.
const logRereadInterval = 100 * time.Millisecond

// sessionLog reads a program's own session log (its JSONL transcript) in the box, for
// profiles whose admission is session_log. ACP version 1 carries no id of ours into
// the program's records, so a prompt is found by its text: the first user record after
// the lines the log held when the prompt was sent that carries the prompt's text and
// that no earlier prompt claimed.
type sessionLog struct {
	box      engines.Box
	identity *engines.RuntimeIdentity
	// pattern is the log's absolute path in the box, with the profile's globs.
	pattern string

	mu   sync.Mutex
	path string
	// lines is how many complete lines were read; users holds those that record a
	// person's message (the only ones a prompt can match), with their line numbers:
	// a long conversation's tool output is neither kept nor parsed again.
	lines    int
	users    []userRecord
	read     int64
	lastRead time.Time
}

// userRecord is a line of the log that records a person's message, and its number.
type userRecord struct {
	line int
	data []byte
}

// safeSessionID is what a session id must look like to be placed in a shell glob.
var safeSessionID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func newSessionLog(box engines.Box, identity *engines.RuntimeIdentity, stateDir, pattern, sessionID string) *sessionLog {
	l := &sessionLog{box: box, identity: identity}
	if safeSessionID.MatchString(sessionID) {
		l.pattern = stateDir + "/" + engines.SessionLogPath(pattern, sessionID)
	}
	return l
}

// lineCount is the number of complete lines the log holds now (0 before the program
// created it).
func (l *sessionLog) lineCount(ctx context.Context) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refreshLocked(ctx, true)
	return l.lines
}

// find returns the index of the user record that holds a prompt: after line from, not
// in claimed, carrying text.
func (l *sessionLog) find(ctx context.Context, text string, from int, claimed []int) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.match(text, from, claimed) < 0 {
		l.refreshLocked(ctx, false)
	}
	i := l.match(text, from, claimed)
	return i, i >= 0
}

func (l *sessionLog) match(text string, from int, claimed []int) int {
	quoted, _ := json.Marshal(text)
	needle := quoted[1 : len(quoted)-1]
	for _, u := range l.users {
		if u.line >= from && !slices.Contains(claimed, u.line) && bytes.Contains(u.data, needle) {
			return u.line
		}
	}
	return -1
}

// isUserRecord reports whether a transcript line records a person's message: a record
// of type user (Claude Code, Qwen Code, Gemini CLI) that is not a tool's result, which
// those programs record under the user's role too; Codex's completed UserMessage item
// in its rollout; or DeepSeek Harness's agent/inbox/spliced line inserting a message
// whose source is the user, the first durable record of a prompt (its later
// user/message step entry repeats the text and must not be claimed as another).
func isUserRecord(line []byte) bool {
	var rec struct {
		Type    string `json:"type"`
		Payload struct {
			Type string `json:"type"`
			Item struct {
				Type string `json:"type"`
			} `json:"item"`
		} `json:"payload"`
		Data struct {
			Inserted []splicedMessage `json:"inserted"`
		} `json:"data"`
	}
	if json.Unmarshal(line, &rec) != nil {
		return false
	}
	switch rec.Type {
	case "user":
		return !bytes.Contains(line, []byte(`"tool_use_id"`)) && !bytes.Contains(line, []byte(`"functionResponse"`))
	case "event_msg":
		return rec.Payload.Type == "item_completed" && rec.Payload.Item.Type == "UserMessage"
	case "agent/inbox/spliced":
		return slices.ContainsFunc(rec.Data.Inserted, splicedMessage.fromUser)
	}
	return false
}

// splicedMessage is a message DeepSeek Harness's inbox took in (agent/inbox/spliced).
type splicedMessage struct {
	Source struct {
		Kind string `json:"kind"`
	} `json:"source"`
}

func (m splicedMessage) fromUser() bool { return m.Source.Kind == "user" }

// refreshLocked locates the log (its name may carry globs) and reads the lines added
// since the last read; force skips the re-read interval.
func (l *sessionLog) refreshLocked(ctx context.Context, force bool) {
	if !force && !l.lastRead.IsZero() && time.Since(l.lastRead) < logRereadInterval {
		return
	}
	l.lastRead = time.Now()
	if l.path == "" {
		l.path = l.locate(ctx)
		if l.path == "" {
			return
		}
	}
	lines, next := engines.ReadNewLines(ctx, l.box, l.identity, l.path, l.read)
	for _, line := range lines {
		if isUserRecord(line) {
			l.users = append(l.users, userRecord{line: l.lines, data: slices.Clone(line)})
		}
		l.lines++
	}
	l.read = next
}

// locate resolves the log's pattern in the box: directly when it has no globs, else
// through the box's shell, once the program has created the file.
func (l *sessionLog) locate(ctx context.Context) string {
	if l.pattern == "" {
		return ""
	}
	if !strings.ContainsAny(l.pattern, "*?[") {
		return l.pattern
	}
	proc, err := l.box.StartProcess(ctx, engines.ProcessSpec{Name: "acp-find-log-" + randomHex(4),
		Command: []string{"/bin/sh", "-c", "ls -1 " + l.pattern + " 2>/dev/null"}, Identity: l.identity})
	if err != nil {
		return ""
	}
	for line, err := range proc.ReadOutput(ctx, 0, true) {
		if err != nil {
			return ""
		}
		if line.Stream == engines.Stdout && len(line.Data) > 0 {
			return string(line.Data)
		}
	}
	return ""
}
