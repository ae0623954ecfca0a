package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/store/pubsub"
)

// NewPart is one browser part to append to the output log.
type NewPart struct {
	// ResponseID is nil for output that belongs to no response (a child run's status).
	ResponseID *string
	Frame      json.RawMessage
}

// CursorUpdate is the runtime cursor after the appended parts' events.
type CursorUpdate struct {
	Generation string
	Position   json.RawMessage
}

// AppendRequest is one fenced write of a reader.
type AppendRequest struct {
	SessionID       string
	LeaseGeneration int64
	Parts           []NewPart
	// Cursor, when set, is committed with the parts: a reader that takes over resumes
	// after it with no repeated and no missing part.
	Cursor *CursorUpdate
}

// AppendResult names the seqs given to the appended parts; both are the Session's
// previous output_seq when no part was appended.
type AppendResult struct {
	FirstSeq int64
	LastSeq  int64
	// Parts is how many parts were appended (FirstSeq..LastSeq when any).
	Parts int64
	// Admitted holds, for each input a Relay batch or a reconciliation moved to
	// admitted (an input admitted before is not listed again), how long it was in
	// custody.
	Admitted []time.Duration
}

// AppendParts writes a reader's parts and cursor in one transaction, fenced by its
// lease generation: it locks the lease row and refuses a superseded generation with
// ErrLeaseLost, writing nothing. Parts get consecutive seqs after the Session's
// output_seq, so the log has no gaps; the cursor is upserted; and a notification on
// SessionOutputChannel carries the last seq, delivered at commit. On a Store from InTx
// it joins that transaction, so a reader can commit other facts of the same events
// (an admitted input, a response start) atomically with their parts.
func (s *Store) AppendParts(ctx context.Context, req AppendRequest) (AppendResult, error) {
	var result AppendResult
	err := s.InLeaseTx(ctx, req.SessionID, req.LeaseGeneration, func(tx *Store) error {
		var err error
		result, err = tx.appendLocked(ctx, req)
		return err
	})
	if err != nil {
		return AppendResult{}, fmt.Errorf("append parts: %w", err)
	}
	return result, nil
}

// appendLocked is AppendParts' write, in a transaction that holds the Session's lease
// row lock.
func (s *Store) appendLocked(ctx context.Context, req AppendRequest) (AppendResult, error) {
	var result AppendResult
	n := int64(len(req.Parts))
	advance := `UPDATE session_outputs SET output_seq = output_seq + ? WHERE session_id = ? RETURNING output_seq`
	if n > 0 {
		advance = `UPDATE session_outputs SET output_seq = output_seq + ?, last_output_at = now() WHERE session_id = ? RETURNING output_seq`
	}
	var outputSeqs []int64
	if err := scanRaw(s.conn(ctx), &outputSeqs, advance, n, req.SessionID); err != nil {
		return result, mapError("advance output seq", err)
	}
	if len(outputSeqs) == 0 {
		return result, fmt.Errorf("advance output seq of session %s: %w", req.SessionID, ErrNotFound)
	}
	last := outputSeqs[0]
	result = AppendResult{FirstSeq: last - n + 1, LastSeq: last, Parts: n}
	if n == 0 {
		result.FirstSeq = last
	}
	if n > 0 {
		rows := make([]OutputPart, n)
		for i, p := range req.Parts {
			rows[i] = OutputPart{SessionID: req.SessionID, Seq: result.FirstSeq + int64(i), ResponseID: p.ResponseID, Frame: p.Frame}
		}
		if err := s.conn(ctx).Omit("CreatedAt").Create(&rows).Error; err != nil {
			return result, mapError("insert output parts", err)
		}
	}
	if req.Cursor != nil {
		cur := RuntimeCursor{
			SessionID:       req.SessionID,
			Generation:      req.Cursor.Generation,
			Position:        req.Cursor.Position,
			ThroughSeq:      last,
			LeaseGeneration: req.LeaseGeneration,
		}
		if err := s.upsertCursor(ctx, cur); err != nil {
			return result, err
		}
	}
	if n > 0 {
		return result, s.notifyParts(ctx, req.SessionID, last, req.Parts)
	}
	return result, nil
}

// upsertCursorSQL saves a Session's runtime cursor.
const upsertCursorSQL = upsertCursorHead + `CAST($4 AS bigint)` + upsertCursorTail

// upsertCursorAfterOutputSQL is upsertCursorSQL with $4 counted from the Session's
// output position, as startResponseAfterOutputSQL counts.
const upsertCursorAfterOutputSQL = upsertCursorHead + sessionOutputSeqSQL + ` + CAST($4 AS bigint)` + upsertCursorTail

const upsertCursorHead = `
INSERT INTO runtime_cursors (session_id, generation, position, through_seq, lease_generation)
VALUES ($1, $2, $3, `

const upsertCursorTail = `, $5)
ON CONFLICT (session_id) DO UPDATE SET generation = EXCLUDED.generation, position = EXCLUDED.position,
	through_seq = EXCLUDED.through_seq, lease_generation = EXCLUDED.lease_generation, updated_at = now()`

// upsertCursorArgs are upsertCursorSQL's arguments.
func upsertCursorArgs(cur RuntimeCursor) []any {
	return []any{cur.SessionID, cur.Generation, cur.Position, cur.ThroughSeq, cur.LeaseGeneration}
}

// upsertCursor saves the Session's runtime cursor.
func (s *Store) upsertCursor(ctx context.Context, cur RuntimeCursor) error {
	return mapError("save runtime cursor", s.conn(ctx).Exec(upsertCursorSQL, upsertCursorArgs(cur)...).Error)
}

// notifyPartsSQL queues a Session's output notification at commit: the seq of its
// last part and, when they fit, the parts' frames in the text jsonb stores them as,
// as the parts-only statement announces them (pubsub.OutputNotice).
const notifyPartsSQL = `
SELECT pg_notify( @channel, @seq || CASE WHEN octet_length(stored.frames) <= @maxNoticeFrames THEN ' ' || stored.frames ELSE '' END)
FROM (SELECT CAST(CAST(CAST( @frames AS text) AS jsonb) AS text) AS frames) AS stored`

// notifyParts announces parts a transaction appended, ending at seq last, with their
// frames: the Relay's batches that start or end a reply reach the streams without a
// read of the log, like its batches of parts alone.
func (s *Store) notifyParts(ctx context.Context, sessionID string, last int64, parts []NewPart) error {
	frames := make([]json.RawMessage, len(parts))
	for i, p := range parts {
		frames[i] = p.Frame
	}
	framesJSON, err := json.Marshal(frames)
	if err != nil {
		return fmt.Errorf("encode notified frames: %w", err)
	}
	channel := pubsub.SessionOutputChannel(sessionID)
	err = s.conn(ctx).Exec(notifyPartsSQL, map[string]any{
		"channel": channel, "seq": strconv.FormatInt(last, 10), "frames": string(framesJSON), "maxNoticeFrames": pubsub.MaxNoticeFrames,
	}).Error
	if err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// ListOutputPartsAfter returns up to limit parts with seq > afterSeq, in order.
func (s *Store) ListOutputPartsAfter(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]OutputPart, error) {
	var out []OutputPart
	err := s.conn(ctx).Where("session_id = ? AND seq > ?", sessionID, afterSeq).Order("seq").Limit(limit).Find(&out).Error
	return out, mapError("list output parts", err)
}

// GetRuntimeCursorBySession returns the Session's saved runtime cursor.
func (s *Store) GetRuntimeCursorBySession(ctx context.Context, sessionID string) (RuntimeCursor, error) {
	var c RuntimeCursor
	err := s.conn(ctx).Where("session_id = ?", sessionID).Take(&c).Error
	return c, mapError("get runtime cursor", err)
}
