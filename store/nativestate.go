package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"gorm.io/gorm/clause"
)

// appendSessionLogSQL appends a stream's entries after the first `after` in one round
// trip: it reads how many the mirror holds, writes the entries past both, and
// returns the count it read. A mirror holding fewer than `after` entries (rows gone
// since the caller counted them) gets nothing, and the caller, seeing the count,
// mirrors the log whole. Mirroring is at-least-once: an entry already stored under its
// seq is kept as it is. Its arguments are appendSessionLogArgs': positional, so a Relay
// batch's transaction sends it too (relaypipeline.go).
const appendSessionLogSQL = `
WITH stored AS (
	SELECT COALESCE(max(entry_seq), 0) AS n FROM session_log_entries WHERE session_id = CAST($1 AS uuid) AND stream = $2
), appended AS (
	INSERT INTO session_log_entries (session_id, stream, entry_seq, entry)
	SELECT CAST($1 AS uuid), $2, CAST($3 AS bigint) + u.ord, u.entry
	FROM stored, jsonb_array_elements(CAST(CAST($4 AS text) AS jsonb)) WITH ORDINALITY AS u(entry, ord)
	WHERE stored.n >= CAST($3 AS bigint) AND CAST($3 AS bigint) + u.ord > stored.n
	ON CONFLICT DO NOTHING
)
SELECT n FROM stored`

// SessionLogAppend is entries of a program's session log to mirror: a stream's
// entries after its first After.
type SessionLogAppend struct {
	Stream  string
	After   int64
	Entries []json.RawMessage
}

// appendSessionLogArgs are appendSessionLogSQL's arguments.
func appendSessionLogArgs(sessionID string, a SessionLogAppend) ([]any, error) {
	raw, err := json.Marshal(a.Entries)
	if err != nil {
		return nil, fmt.Errorf("encode session log entries: %w", err)
	}
	return []any{sessionID, a.Stream, a.After, string(raw)}, nil
}

// AppendSessionLogEntries mirrors entries of an engine's native JSONL log as the
// stream's entries after+1, after+2, ... and returns how many entries the mirror held
// before. Fewer than after means nothing was written: the caller's count is stale.
// The mirror asks at every admission and response end, so counting and writing are
// one statement; the count comes from the primary key's index, without reading the
// entries. A Relay batch that admits an input carries its mirror as a
// RelayOp.SessionLog instead, written in the batch's transaction.
func (s *Store) AppendSessionLogEntries(ctx context.Context, sessionID, stream string, after int64, entries []json.RawMessage) (int64, error) {
	args, err := appendSessionLogArgs(sessionID, SessionLogAppend{Stream: stream, After: after, Entries: entries})
	if err != nil {
		return 0, err
	}
	var stored []int64
	if err := scanRaw(s.conn(ctx), &stored, appendSessionLogSQL, args...); err != nil {
		return 0, mapError("append session log entries", err)
	}
	if len(stored) != 1 {
		return 0, fmt.Errorf("append session log entries: %d rows back", len(stored))
	}
	return stored[0], nil
}

// ListSessionLogEntries returns a stream's entries in order, to restore the native log
// into a replacement sandbox.
func (s *Store) ListSessionLogEntries(ctx context.Context, sessionID, stream string) ([]SessionLogEntry, error) {
	var out []SessionLogEntry
	err := s.conn(ctx).Where("session_id = ? AND stream = ?", sessionID, stream).Order("entry_seq").Find(&out).Error
	return out, mapError("list session log entries", err)
}

// ListSessionLogStreams returns the names of a Session's mirrored log streams.
func (s *Store) ListSessionLogStreams(ctx context.Context, sessionID string) ([]string, error) {
	var out []string
	err := s.conn(ctx).Model(&SessionLogEntry{}).Where("session_id = ?", sessionID).Distinct().Order("stream").Pluck("stream", &out).Error
	return out, mapError("list session log streams", err)
}

// HasConversationContent reports whether the platform holds evidence that the
// Session's native conversation has content: an input the runtime admitted (its
// durable record is in the program's own state), or a mirrored session-log entry.
// Without either, a conversation whose native state is missing never held anything.
func (s *Store) HasConversationContent(ctx context.Context, sessionID string) (bool, error) {
	var found bool
	err := scanRaw(s.conn(ctx), &found, `SELECT EXISTS (SELECT 1 FROM inputs WHERE session_id = ? AND state = ?)
		OR EXISTS (SELECT 1 FROM session_log_entries WHERE session_id = ?)`, sessionID, InputAdmitted, sessionID)
	return found, mapError("check conversation content", err)
}

// PutRuntimeStateBlob saves opaque native state with a predecessor check:
// expectedGeneration 0 creates it, otherwise it replaces generation expectedGeneration
// and the saved blob has the next one. A mismatch gives ErrVersionConflict.
func (s *Store) PutRuntimeStateBlob(ctx context.Context, scope, ownerID, name string, data []byte, expectedGeneration int64) (RuntimeStateBlob, error) {
	sum := sha256.Sum256(data)
	if expectedGeneration == 0 {
		row := RuntimeStateBlob{Scope: scope, OwnerID: ownerID, Name: name, Generation: 1, Data: data, SHA256: sum[:]}
		res := s.conn(ctx).Omit("CreatedAt", "UpdatedAt").Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if res.Error != nil {
			return RuntimeStateBlob{}, mapError("put runtime state", res.Error)
		}
		if res.RowsAffected == 0 {
			return RuntimeStateBlob{}, fmt.Errorf("put runtime state %s/%s/%s: it exists already: %w", scope, ownerID, name, ErrVersionConflict)
		}
		return s.GetRuntimeStateBlob(ctx, scope, ownerID, name)
	}
	var saved []RuntimeStateBlob
	res := s.conn(ctx).Model(&saved).Clauses(clause.Returning{}).
		Where("scope = ? AND owner_id = ? AND name = ? AND generation = ?", scope, ownerID, name, expectedGeneration).
		Updates(map[string]any{"data": data, "sha256": sum[:], "generation": gormExpr("generation + 1"), "updated_at": gormExpr("now()")})
	if res.Error != nil {
		return RuntimeStateBlob{}, mapError("put runtime state", res.Error)
	}
	if len(saved) == 0 {
		return RuntimeStateBlob{}, fmt.Errorf("put runtime state %s/%s/%s: generation %d is not current: %w", scope, ownerID, name, expectedGeneration, ErrVersionConflict)
	}
	return saved[0], nil
}

// GetRuntimeStateBlob returns saved native state.
func (s *Store) GetRuntimeStateBlob(ctx context.Context, scope, ownerID, name string) (RuntimeStateBlob, error) {
	var b RuntimeStateBlob
	err := s.conn(ctx).Where("scope = ? AND owner_id = ? AND name = ?", scope, ownerID, name).Take(&b).Error
	return b, mapError("get runtime state", err)
}
