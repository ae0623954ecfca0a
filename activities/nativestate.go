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
	"github.com/astrabox/astrabox/store"
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
	pattern, dir, ok := sessionLogOf(l)
	if !ok {
		return nil
	}
	start := time.Now()
	l.logs.mu.Lock()
	defer l.logs.mu.Unlock()
	defer func() { a.metrics.SessionLogMirror.Observe(time.Since(start).Seconds()) }()
	tails, err := readSessionLog(ctx, l, dir, pattern)
	if err != nil {
		return err
	}
	for _, t := range tails {
		if err := a.writeLogTail(ctx, l, t); err != nil {
			return err
		}
	}
	return nil
}

// sessionLogOps reads what the engine's native log gained since the last mirror, for
// an admission's batch to write in its own transaction (store.RelayOp.SessionLog), so
// the admission and the mirror it waits for commit together. It returns holding the
// mirror's lock: done moves the streams' cursors past what was read once the batch
// committed, and lets the next mirror go.
func (a *Activities) sessionLogOps(ctx context.Context, l *liveRuntime) (ops []store.RelayOp, done func(committed bool), err error) {
	pattern, dir, ok := sessionLogOf(l)
	if !ok {
		return nil, func(bool) {}, nil
	}
	start := time.Now()
	l.logs.mu.Lock()
	tails, err := readSessionLog(ctx, l, dir, pattern)
	// The read alone: its write is the batch's.
	a.metrics.SessionLogMirror.Observe(time.Since(start).Seconds())
	if err != nil {
		l.logs.mu.Unlock()
		return nil, nil, err
	}
	for _, t := range tails {
		if len(t.entries) > 0 {
			ops = append(ops, store.RelayOp{SessionLog: &store.SessionLogAppend{Stream: t.stream, After: t.from.entries, Entries: t.entries}})
		}
	}
	return ops, func(committed bool) {
		if committed {
			for _, t := range tails {
				l.logs.advance(t.stream, t.next)
			}
		}
		l.logs.mu.Unlock()
	}, nil
}

// sessionLogOf is where the runtime's engine keeps its native log in the box: a
// pattern under a directory; ok is false when it keeps none or the box is gone.
func sessionLogOf(l *liveRuntime) (pattern, dir string, ok bool) {
	pattern, dir, ok = sessionLogPattern(l.caps, l.identity, l.client.EngineSessionKey())
	return pattern, dir, ok && l.box != nil && l.handle != nil
}

// readSessionLog reads what each file of the native log (pattern under dir) gained
// past its stream's cursor. Called with l.logs.mu held.
func readSessionLog(ctx context.Context, l *liveRuntime, dir, pattern string) ([]logTail, error) {
	rels, err := expandLog(ctx, l.handle, dir, pattern)
	if err != nil {
		return nil, err
	}
	var tails []logTail
	for _, rel := range rels {
		stream := sessionLogPrefix + rel
		t, ok, err := readLogTail(ctx, l, path.Join(dir, rel), stream, l.logs.cursors[stream])
		if err != nil {
			return nil, err
		}
		if ok {
			tails = append(tails, t)
		}
	}
	return tails, nil
}

// logMirror remembers, per mirrored stream, how far a live connection read the
// native log: the mirror runs at every admission and response end, and a log that
// only grows is then read from where the last mirror stopped, not whole each time.
type logMirror struct {
	mu      sync.Mutex
	cursors map[string]logCursor
}

// advance records that the stream is mirrored up to cur. Called with mu held.
func (m *logMirror) advance(stream string, cur logCursor) {
	if m.cursors == nil {
		m.cursors = map[string]logCursor{}
	}
	m.cursors[stream] = cur
}

// logCursor is a byte offset in a native log and the entries the bytes before it held.
type logCursor struct {
	offset  int64
	entries int64
}

// logTail is what a native log file gained past its stream's cursor: its entries,
// numbered after from.entries (each valid JSON line is one), and the cursor past them.
type logTail struct {
	file, stream string
	from, next   logCursor
	entries      []json.RawMessage
}

// readLogTail reads file past cur; a file that shrank (replaced) is read whole. ok is
// false when there is no such file, or nothing since cur.
func readLogTail(ctx context.Context, l *liveRuntime, file, stream string, cur logCursor) (logTail, bool, error) {
	for {
		data, size, err := engines.ReadFileFrom(ctx, l.box, nil, file, cur.offset)
		if errors.Is(err, sandbox.ErrNotFound) || (err != nil && strings.Contains(err.Error(), "no such file")) {
			return logTail{}, false, nil
		}
		if err != nil {
			return logTail{}, false, fmt.Errorf("read session log: %w", err)
		}
		if len(data) == 0 && size == cur.offset && cur != (logCursor{}) {
			return logTail{}, false, nil // nothing since the last mirror: no statement either
		}
		if size < cur.offset && cur != (logCursor{}) {
			cur = logCursor{}
			continue
		}
		entries, consumed := logEntries(data)
		next := logCursor{offset: cur.offset + consumed, entries: cur.entries + int64(len(entries))}
		return logTail{file: file, stream: stream, from: cur, next: next, entries: entries}, true, nil
	}
}

// writeLogTail appends a tail's entries in one statement that also says how many the
// mirror held, and moves the stream's cursor past them. A mirror that holds fewer
// entries than the tail's start (rows gone since the cursor counted them) has the file
// read and written whole. Called with l.logs.mu held.
func (a *Activities) writeLogTail(ctx context.Context, l *liveRuntime, t logTail) error {
	for {
		if len(t.entries) > 0 {
			stored, err := a.deps.Store.AppendSessionLogEntries(ctx, l.sessionID, t.stream, t.from.entries, t.entries)
			if err != nil {
				return err
			}
			if stored < t.from.entries {
				whole, ok, err := readLogTail(ctx, l, t.file, t.stream, logCursor{})
				if err != nil || !ok {
					return err
				}
				t = whole
				continue
			}
		}
		l.logs.advance(t.stream, t.next)
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
