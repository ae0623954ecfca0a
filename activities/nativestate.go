package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
)

// sessionLogStream is the stream name the engine's declared session log is mirrored
// under in session_log_entries.
const sessionLogStream = "session_log"

// defaultIdentity is the runtime identity of a conversation's own box as the sandbox
// backends lay it out by default (sandbox.Spec.WithDefaults): the box account with its
// home inside the workspace. Composing identities per tenancy and Session kind is the
// platform's job still to be done; this one serves conversation tenancy.
func defaultIdentity() *engines.RuntimeIdentity {
	def := sandbox.Spec{}.WithDefaults()
	home := def.Identity.Home
	ws := def.Workspace.MountPath
	return &engines.RuntimeIdentity{
		Account: def.Identity.Account, HomeDir: home, WorkspaceDir: ws, SourceDir: ws, FileRoot: ws,
		CacheDir: path.Join(home, ".cache"), TempDir: "/tmp",
	}
}

// sessionLogPath is where the engine keeps its native JSONL log for a conversation,
// or false when it declares none. Only literal patterns are supported so far.
func sessionLogPath(caps engines.EngineRuntimeCapabilities, id *engines.RuntimeIdentity, key string) (string, bool) {
	if caps.SessionLog == nil || id == nil || key == "" {
		return "", false
	}
	rel := strings.ReplaceAll(caps.SessionLog.PathPattern, engines.SessionLogKeyPlaceholder, key)
	if strings.ContainsAny(rel, "*?[") {
		return "", false
	}
	return path.Join(id.HomeDir, caps.Workload.ConfigDirName, rel), true
}

// mirrorSessionLog copies the entries the engine's native log gained since the last
// mirror into PostgreSQL, in order and uninterpreted. It is at-least-once: entries are
// numbered by their line, so a repeated mirror stores nothing twice.
func (a *Activities) mirrorSessionLog(ctx context.Context, l *liveRuntime) error {
	p, ok := sessionLogPath(l.caps, l.identity, l.client.EngineSessionKey())
	if !ok || l.box == nil {
		return nil
	}
	data, err := l.box.ReadFile(ctx, nil, p)
	if errors.Is(err, sandbox.ErrNotFound) || (err != nil && strings.Contains(err.Error(), "no such file")) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read session log: %w", err)
	}
	var entries []json.RawMessage
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && json.Valid(line) {
			entries = append(entries, json.RawMessage(line))
		}
	}
	stored, err := a.deps.Store.ListSessionLogEntries(ctx, l.sessionID, sessionLogStream)
	if err != nil {
		return err
	}
	if len(entries) <= len(stored) {
		return nil
	}
	return a.deps.Store.AppendSessionLogEntries(ctx, l.sessionID, sessionLogStream, int64(len(stored))+1, entries[len(stored):])
}

// restoreSessionLog writes the mirrored native log into a replacement box before the
// adapter resumes the conversation there.
func (a *Activities) restoreSessionLog(ctx context.Context, box engines.Box, caps engines.EngineRuntimeCapabilities, id *engines.RuntimeIdentity, sessionID, key string) error {
	p, ok := sessionLogPath(caps, id, key)
	if !ok {
		return nil
	}
	stored, err := a.deps.Store.ListSessionLogEntries(ctx, sessionID, sessionLogStream)
	if err != nil || len(stored) == 0 {
		return err
	}
	var buf bytes.Buffer
	for _, e := range stored {
		buf.Write(e.Entry)
		buf.WriteByte('\n')
	}
	if err := box.WriteFile(ctx, nil, p, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("restore session log: %w", err)
	}
	return nil
}
