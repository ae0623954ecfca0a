package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store/pubsub"
)

// RelayOp is one fact of a runtime event a Relay records. Exactly one field is set;
// the Relay leaves the Session id and seqs of the facts to ApplyRelayBatch.
type RelayOp struct {
	// AdmitInput closes custody of an input.
	AdmitInput string
	// StartResponse records a response start (or the complete input ids of a
	// response another input joined).
	StartResponse *ResponseStart
	// Part appends one browser part to the output log.
	Part *NewPart
	// OpenInteraction records an interaction a response waits on.
	OpenInteraction *InteractionOpening
	// CloseInteraction records that the runtime no longer waits on an interaction.
	CloseInteraction *InteractionClosing
	// EndResponse records how a response ended.
	EndResponse *ResponseEnd
	// Status is the runtime's own status (idle, working, waiting).
	Status string
	// ChildRun records a child run's lifecycle report (a data-subagent part with a
	// run), by its public id; the Part op of the same report comes with it.
	ChildRun *ChildRunReport
	// Diagnostic keeps a runtime diagnostic for operators (bounded per Session).
	Diagnostic *DiagnosticRecord
	// SessionLog mirrors entries of the program's session log, as
	// AppendSessionLogEntries does: a batch that admits an input carries the mirror its
	// admission waits for, so both commit together. A mirror that holds fewer entries
	// than After refuses the whole batch with ErrSessionLogBehind.
	SessionLog *SessionLogAppend
}

// InteractionClosing is InteractionClosed as the runtime reported it: the state it
// closes to (answered, withdrawn or expired) and the runtime's reason.
type InteractionClosing struct {
	InteractionID string
	State         string
	Reason        string
}

// RelayBatch is the facts of consecutive runtime events, written at once.
type RelayBatch struct {
	SessionID       string
	LeaseGeneration int64
	Ops             []RelayOp
	// Cursor is the cursor after the batch's last event, committed with it.
	Cursor *CursorUpdate
}

// ApplyRelayBatch records a Relay's batch in one transaction fenced by its lease
// generation as InLeaseTx fences: admissions, responses, interactions, status, child
// runs, diagnostics and parts, with the cursor after the last event and a NOTIFY at
// commit. A superseded generation writes nothing and gets ErrLeaseLost, so a zombie
// Relay cannot write. Batches that concurrent Relays hand in together are written
// together (relaygroup.go): batches of parts alone in one statement, batches with
// facts in one transaction of two round trips (relaypipeline.go). Both run on
// connections of their own, so not on a Store scoped to a transaction.
func (s *Store) ApplyRelayBatch(ctx context.Context, b RelayBatch) (AppendResult, error) {
	if s.inTx {
		return AppendResult{}, errors.New("apply relay batch: a Relay batch is a transaction of its own, not part of another")
	}
	c, group := &relayCommit{batch: b}, s.facts
	if parts, ok := partsOnly(b.Ops); ok {
		c.parts, group = parts, s.parts
	}
	result, err := group.commit(ctx, c)
	if err != nil {
		return AppendResult{}, fmt.Errorf("apply relay batch: %w", err)
	}
	return result, nil
}

// partsOnly returns the parts of a batch that holds nothing else (what a streaming
// reply is made of).
func partsOnly(ops []RelayOp) ([]NewPart, bool) {
	parts := make([]NewPart, 0, len(ops))
	for _, op := range ops {
		if op.Part == nil || op.AdmitInput != "" || op.StartResponse != nil || op.OpenInteraction != nil || op.CloseInteraction != nil ||
			op.EndResponse != nil || op.Status != "" || op.ChildRun != nil || op.Diagnostic != nil || op.SessionLog != nil {
			return nil, false
		}
		parts = append(parts, *op.Part)
	}
	return parts, len(parts) > 0
}

// appendPartsOnlySQL is a batch of parts in one statement, so one round trip: it
// locks the reader lease and writes only when the generation is the caller's (the
// fence), advances output_seq (the lease's lock orders the seqs), inserts the
// parts at the seqs after the previous output_seq, upserts the cursor with them and
// queues the notification, carrying the parts' frames as jsonb stores them when they
// fit (pubsub.OutputNotice: the API's streams then send them without reading them
// back), all committed together or not at all. No row back means the lease is not the
// caller's. Its arguments are appendPartsArgs'.
const appendPartsOnlySQL = `
WITH lease AS (
	SELECT generation FROM reader_leases WHERE session_id = $1 FOR UPDATE
), sess AS (
	UPDATE session_outputs SET output_seq = output_seq + $3, last_output_at = now()
	WHERE session_id = $1 AND (SELECT generation FROM lease) = $2
	RETURNING output_seq
), parts AS (
	INSERT INTO output_parts (session_id, seq, response_id, frame)
	SELECT $1, sess.output_seq - $3 + u.ord, u.response_id, u.frame
	FROM sess, ROWS FROM (jsonb_array_elements(CAST($4 AS jsonb)), jsonb_array_elements_text(CAST($5 AS jsonb)))
		WITH ORDINALITY AS u(frame, response_id, ord)
), cur AS (
	INSERT INTO runtime_cursors (session_id, generation, position, through_seq, lease_generation)
	SELECT $1, $7, CAST($8 AS jsonb), sess.output_seq, $2 FROM sess WHERE $6
	ON CONFLICT (session_id) DO UPDATE SET generation = EXCLUDED.generation, position = EXCLUDED.position,
		through_seq = EXCLUDED.through_seq, lease_generation = EXCLUDED.lease_generation, updated_at = now()
), stored AS (
	SELECT CAST(CAST($4 AS jsonb) AS text) AS frames
), note AS (
	SELECT pg_notify($9, sess.output_seq::text ||
		CASE WHEN octet_length(stored.frames) <= $10 THEN ' ' || stored.frames ELSE '' END)
	FROM sess, stored
)
SELECT sess.output_seq FROM sess, note`

// appendPartsArgs are appendPartsOnlySQL's arguments for a batch's parts. The arrays
// go as JSON text, which the statement spreads into rows.
func appendPartsArgs(b RelayBatch, parts []NewPart) ([]any, error) {
	responseIDs := make([]*string, len(parts))
	frames := make([]json.RawMessage, len(parts))
	for i, p := range parts {
		responseIDs[i], frames[i] = p.ResponseID, p.Frame
	}
	framesJSON, err := json.Marshal(frames)
	if err != nil {
		return nil, fmt.Errorf("encode parts: %w", err)
	}
	responseIDsJSON, err := json.Marshal(responseIDs)
	if err != nil {
		return nil, fmt.Errorf("encode parts: %w", err)
	}
	cursorGeneration, cursorPosition := "", "null"
	if b.Cursor != nil {
		cursorGeneration, cursorPosition = b.Cursor.Generation, string(b.Cursor.Position)
	}
	return []any{b.SessionID, b.LeaseGeneration, int64(len(parts)), string(framesJSON), string(responseIDsJSON),
		b.Cursor != nil, cursorGeneration, cursorPosition, pubsub.SessionOutputChannel(b.SessionID), pubsub.MaxNoticeFrames}, nil
}

// appendedParts is a batch's result from appendPartsOnlySQL's rows: the Session's
// output_seq after it, or ErrLeaseLost when no row came back.
func appendedParts(b RelayBatch, n int, outputSeqs []int64) (AppendResult, error) {
	if len(outputSeqs) == 0 {
		return AppendResult{}, fmt.Errorf("session %s: lease generation %d is not the current one: %w", b.SessionID, b.LeaseGeneration, ErrLeaseLost)
	}
	last := outputSeqs[0]
	return AppendResult{FirstSeq: last - int64(n) + 1, LastSeq: last, Parts: int64(n)}, nil
}

// appendPartsOnly is ApplyRelayBatch for a batch of parts alone: the same writes
// under the same fence, in one statement instead of a transaction of eight. It is
// the platform's most frequent statement, so it goes on pgx's own API as the
// batches with facts do, without GORM's statement building and callbacks.
func (s *Store) appendPartsOnly(ctx context.Context, b RelayBatch, parts []NewPart) (AppendResult, error) {
	args, err := appendPartsArgs(b, parts)
	if err != nil {
		return AppendResult{}, err
	}
	outputSeqs, err := collectOnPgx(ctx, s, pgx.RowTo[int64], appendPartsOnlySQL, args...)
	if err != nil {
		return AppendResult{}, mapError("append parts", err)
	}
	return appendedParts(b, len(parts), outputSeqs)
}
