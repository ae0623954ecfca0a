package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"gorm.io/gorm/clause"
)

// AppendSessionLogEntries mirrors entries of an engine's native JSONL log, numbered
// from firstSeq. Mirroring is at-least-once, so an entry already stored under its seq
// is kept as it is.
func (s *Store) AppendSessionLogEntries(ctx context.Context, sessionID, stream string, firstSeq int64, entries []json.RawMessage) error {
	if len(entries) == 0 {
		return nil
	}
	rows := make([]SessionLogEntry, len(entries))
	for i, e := range entries {
		rows[i] = SessionLogEntry{SessionID: sessionID, Stream: stream, EntrySeq: firstSeq + int64(i), Entry: e}
	}
	err := s.conn(ctx).Omit("CreatedAt").Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error
	return mapError("append session log entries", err)
}

// ListSessionLogEntries returns a stream's entries in order, to restore the native log
// into a replacement sandbox.
func (s *Store) ListSessionLogEntries(ctx context.Context, sessionID, stream string) ([]SessionLogEntry, error) {
	var out []SessionLogEntry
	err := s.conn(ctx).Where("session_id = ? AND stream = ?", sessionID, stream).Order("entry_seq").Find(&out).Error
	return out, mapError("list session log entries", err)
}

// SessionLogLength is how many entries of a stream are mirrored: the mirror appends
// them at consecutive seqs from 1, so the highest seq, read from the primary key's
// index without reading the entries. The mirror asks it at every admission and
// response end, where listing the entries made each turn cost the whole log.
func (s *Store) SessionLogLength(ctx context.Context, sessionID, stream string) (int64, error) {
	var n int64
	err := s.conn(ctx).Raw("SELECT COALESCE(max(entry_seq), 0) FROM session_log_entries WHERE session_id = ? AND stream = ?", sessionID, stream).Scan(&n).Error
	return n, mapError("measure session log", err)
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
	err := s.conn(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM inputs WHERE session_id = ? AND state = ?)
		OR EXISTS (SELECT 1 FROM session_log_entries WHERE session_id = ?)`, sessionID, InputAdmitted, sessionID).Scan(&found).Error
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
