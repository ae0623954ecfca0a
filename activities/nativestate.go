package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
)

// sessionLogPrefix starts the stream names the engine's declared session log is
// mirrored under in session_log_entries; the rest is the log's path relative to the
// engine's configuration directory, with any glob resolved, so a replacement box gets
// it at the same place.
const sessionLogPrefix = "session_log:"

// sessionLogPattern is the engine's declared log path for a conversation, relative to
// its configuration directory, and that directory; false when it declares none.
func sessionLogPattern(caps engines.EngineRuntimeCapabilities, id *engines.RuntimeIdentity, key string) (rel, configDir string, ok bool) {
	if caps.SessionLog == nil || id == nil || key == "" {
		return "", "", false
	}
	rel = engines.SessionLogPath(caps.SessionLog.PathPattern, key)
	return rel, path.Join(id.HomeDir, caps.Workload.ConfigDirName), true
}

// expandLog resolves shell-style globs in rel (relative to dir) against the box's
// files and returns the matching relative paths.
func expandLog(ctx context.Context, h sandbox.Handle, dir, rel string) ([]string, error) {
	if !strings.ContainsAny(rel, "*?[") {
		return []string{rel}, nil
	}
	first, rest, _ := strings.Cut(rel, "/")
	if !strings.ContainsAny(first, "*?[") {
		out, err := expandLog(ctx, h, path.Join(dir, first), rest)
		for i := range out {
			out[i] = path.Join(first, out[i])
		}
		return out, err
	}
	entries, err := h.ListDir(ctx, dir)
	if err != nil {
		return nil, nil // nothing written yet
	}
	var out []string
	for _, e := range entries {
		name := path.Base(e.Path)
		if ok, _ := path.Match(first, name); !ok {
			continue
		}
		if rest == "" {
			out = append(out, name)
			continue
		}
		sub, err := expandLog(ctx, h, path.Join(dir, name), rest)
		if err != nil {
			return nil, err
		}
		for _, r := range sub {
			out = append(out, path.Join(name, r))
		}
	}
	return out, nil
}

// mirrorSessionLog copies the entries the engine's native log gained since the last
// mirror into PostgreSQL, in order and uninterpreted. It is at-least-once: entries are
// numbered by their line, so a repeated mirror stores nothing twice.
func (a *Activities) mirrorSessionLog(ctx context.Context, l *liveRuntime) error {
	pattern, dir, ok := sessionLogPattern(l.caps, l.identity, l.client.EngineSessionKey())
	if !ok || l.box == nil || l.handle == nil {
		return nil
	}
	start := time.Now()
	rels, err := expandLog(ctx, l.handle, dir, pattern)
	if err != nil {
		return err
	}
	l.logs.mu.Lock()
	defer l.logs.mu.Unlock()
	defer func() { a.metrics.SessionLogMirror.Observe(time.Since(start).Seconds()) }()
	for _, rel := range rels {
		if err := a.mirrorFile(ctx, l, path.Join(dir, rel), sessionLogPrefix+rel); err != nil {
			return err
		}
	}
	return nil
}

// logMirror remembers, per mirrored stream, how far a live connection read the
// native log: the mirror runs at every admission and response end, and a log that
// only grows is then read from where the last mirror stopped, not whole each time.
type logMirror struct {
	mu      sync.Mutex
	cursors map[string]logCursor
}

// logCursor is a byte offset in a native log and the entries the bytes before it held.
type logCursor struct {
	offset  int64
	entries int64
}

// mirrorFile appends the entries of file past the stream's cursor, numbered by their
// place among the file's entries (each valid JSON line is one), in one statement that
// also says how many the mirror held. The first mirror over a connection reads the
// file whole; a file that shrank (replaced) or a stream that holds fewer entries than
// the cursor passed is read whole again. Called with l.logs.mu held.
func (a *Activities) mirrorFile(ctx context.Context, l *liveRuntime, file, stream string) error {
	cur := l.logs.cursors[stream]
	for {
		data, size, err := engines.ReadFileFrom(ctx, l.box, nil, file, cur.offset)
		if errors.Is(err, sandbox.ErrNotFound) || (err != nil && strings.Contains(err.Error(), "no such file")) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read session log: %w", err)
		}
		if len(data) == 0 && size == cur.offset && cur != (logCursor{}) {
			return nil // nothing since the last mirror: no statement either
		}
		if size < cur.offset && cur != (logCursor{}) {
			cur = logCursor{}
			continue
		}
		entries, consumed := logEntries(data)
		if len(entries) > 0 {
			stored, err := a.deps.Store.AppendSessionLogEntries(ctx, l.sessionID, stream, cur.entries, entries)
			if err != nil {
				return err
			}
			if stored < cur.entries {
				cur = logCursor{}
				continue
			}
		}
		if l.logs.cursors == nil {
			l.logs.cursors = map[string]logCursor{}
		}
		l.logs.cursors[stream] = logCursor{offset: cur.offset + consumed, entries: cur.entries + int64(len(entries))}
		return nil
	}
}

// logEntries splits a JSONL chunk into its entries, the valid JSON lines, and says
// how many bytes it consumed: every complete line, and an unterminated last line
// only once it is valid JSON (a line still being written is read again next time).
func logEntries(data []byte) (entries []json.RawMessage, consumed int64) {
	for len(data) > 0 {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		line = bytes.TrimSpace(line)
		valid := len(line) > 0 && json.Valid(line)
		if !complete && !valid {
			break
		}
		if valid {
			entries = append(entries, json.RawMessage(line))
		}
		consumed += int64(len(data) - len(rest))
		data = rest
	}
	return entries, consumed
}

// restoreSessionLog writes the mirrored native logs into a replacement box, at the
// paths they were mirrored from, before the adapter resumes the conversation there.
func (a *Activities) restoreSessionLog(ctx context.Context, box engines.Box, caps engines.EngineRuntimeCapabilities, id *engines.RuntimeIdentity, sessionID, key string) error {
	_, dir, ok := sessionLogPattern(caps, id, key)
	if !ok {
		return nil
	}
	streams, err := a.deps.Store.ListSessionLogStreams(ctx, sessionID)
	if err != nil {
		return err
	}
	for _, stream := range streams {
		rel, ok := strings.CutPrefix(stream, sessionLogPrefix)
		if !ok {
			continue
		}
		stored, err := a.deps.Store.ListSessionLogEntries(ctx, sessionID, stream)
		if err != nil || len(stored) == 0 {
			return err
		}
		var buf bytes.Buffer
		for _, e := range stored {
			buf.Write(e.Entry)
			buf.WriteByte('\n')
		}
		if err := box.WriteFile(ctx, nil, path.Join(dir, rel), buf.Bytes(), 0o600); err != nil {
			return fmt.Errorf("restore session log %s: %w", rel, err)
		}
	}
	return nil
}
