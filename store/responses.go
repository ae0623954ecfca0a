package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// ResponseStart is ResponseStarted as the runtime reported it.
type ResponseStart struct {
	SessionID  string
	ResponseID string
	// Origin is OriginInput or OriginEngine.
	Origin   string
	InputIDs []string
	// StartedSeq is the seq of the response's start part.
	StartedSeq int64
}

// ResponseEnd is ResponseEnded as the runtime reported it.
type ResponseEnd struct {
	SessionID    string
	ResponseID   string
	Outcome      string
	NativeReason *string
	Usage        json.RawMessage
	Error        json.RawMessage
	EndedSeq     int64
}

// startResponseSQL inserts a response start, or updates an open response's input_ids
// (another input joined it); an ended response is left as it is and returns no row.
// inserted tells an insert from an update (xmax = 0 only on a freshly inserted row).
const startResponseSQL = startResponseHead + `CAST($5 AS bigint)` + startResponseTail

// startResponseAfterOutputSQL is startResponseSQL with $5 counted from the Session's
// output position ($5 = 1: the next part), which a Relay batch's transaction has
// locked before it runs (relaypipeline.go).
const startResponseAfterOutputSQL = startResponseHead + sessionOutputSeqSQL + ` + CAST($5 AS bigint)` + startResponseTail

const startResponseHead = `
INSERT INTO responses AS r (session_id, response_id, origin, input_ids, started_seq)
VALUES ($1, $2, $3, $4, `

const startResponseTail = `)
ON CONFLICT (session_id, response_id) DO UPDATE SET input_ids = excluded.input_ids
WHERE r.outcome IS NULL
RETURNING r.*, (r.xmax = 0) AS inserted`

// sessionOutputSeqSQL is the output position of the Session $1.
const sessionOutputSeqSQL = `(SELECT output_seq FROM session_outputs WHERE session_id = $1)`

// startResponseArgs are startResponseSQL's arguments.
func startResponseArgs(in ResponseStart) ([]any, error) {
	ids := in.InputIDs
	if ids == nil {
		ids = []string{}
	}
	inputIDs, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("start response: encode input ids: %w", err)
	}
	return []any{in.SessionID, in.ResponseID, in.Origin, json.RawMessage(inputIDs), in.StartedSeq}, nil
}

// StartResponse records a response start and reports whether it was new. A repeated
// start of an open response updates its input_ids (another input joined it).
func (s *Store) StartResponse(ctx context.Context, in ResponseStart) (Response, bool, error) {
	args, err := startResponseArgs(in)
	if err != nil {
		return Response{}, false, err
	}
	var rows []struct {
		Response
		Inserted bool `gorm:"column:inserted"`
	}
	if err := scanRaw(s.conn(ctx), &rows, startResponseSQL, args...); err != nil {
		return Response{}, false, mapError("start response", err)
	}
	if len(rows) == 0 {
		// Already ended: a start replayed after its end changes nothing.
		r, err := s.GetResponseByID(ctx, in.SessionID, in.ResponseID)
		return r, false, err
	}
	return rows[0].Response, rows[0].Inserted, nil
}

// endResponseSQL ends an open response and moves its Session to the top of its
// owner's list (BumpSessionActivity's update) in one statement, so one round trip
// where a transaction of two updates took four. It returns how many responses it
// ended and whether the response is known at all (an unknown one is an error, an
// already ended one is not).
const endResponseSQL = endResponseHead + `CAST($7 AS bigint)` + endResponseTail

// endResponseAfterOutputSQL is endResponseSQL with $7 counted from the Session's output
// position, as startResponseAfterOutputSQL counts.
const endResponseAfterOutputSQL = endResponseHead + sessionOutputSeqSQL + ` + CAST($7 AS bigint)` + endResponseTail

const endResponseHead = `
WITH ended AS (
	UPDATE responses SET outcome = $3, native_reason = $4, usage = CAST($5 AS jsonb),
		error = CAST($6 AS jsonb), ended_seq = GREATEST(`

const endResponseTail = `, started_seq), ended_at = now()
	WHERE session_id = $1 AND response_id = $2 AND outcome IS NULL
	RETURNING session_id
), bumped AS (
	UPDATE sessions SET last_activity_at = GREATEST(now(), last_activity_at), updated_at = now()
	WHERE id IN (SELECT session_id FROM ended)
)
SELECT (SELECT count(*) FROM ended) AS ended,
	EXISTS (SELECT 1 FROM responses WHERE session_id = $1 AND response_id = $2) AS known`

// endResponseArgs are endResponseSQL's arguments.
func endResponseArgs(in ResponseEnd) []any {
	return []any{in.SessionID, in.ResponseID, in.Outcome, in.NativeReason, nullableJSONText(in.Usage), nullableJSONText(in.Error), in.EndedSeq}
}

// endedOrUnknown reads endResponseSQL's row: whether the response ended now, and
// ErrNotFound for an unknown one.
func endedOrUnknown(in ResponseEnd, ended int64, known bool) (bool, error) {
	if ended == 0 && !known {
		return false, fmt.Errorf("end response %s: %w", in.ResponseID, ErrNotFound)
	}
	return ended > 0, nil
}

// EndResponse records the runtime's end of an open response and moves the Session to
// the top of its owner's list. It reports false for a response that had already
// ended, and ErrNotFound for an unknown one.
func (s *Store) EndResponse(ctx context.Context, in ResponseEnd) (bool, error) {
	var row struct {
		Ended int64
		Known bool
	}
	if err := scanRaw(s.conn(ctx), &row, endResponseSQL, endResponseArgs(in)...); err != nil {
		return false, mapError("end response", err)
	}
	return endedOrUnknown(in, row.Ended, row.Known)
}

// FailOpenResponses ends every open response of the Session as failed with
// native_reason runtime_lost. Call it only once the runtime is confirmed lost and no
// longer reports these responses. It returns the ids it ended.
func (s *Store) FailOpenResponses(ctx context.Context, sessionID string, endedSeq int64) ([]string, error) {
	var ended []Response
	err := s.InTx(ctx, func(tx *Store) error {
		err := scanRaw(tx.conn(ctx), &ended, `
			UPDATE responses SET outcome = ?, native_reason = ?, ended_seq = GREATEST(?::bigint, started_seq), ended_at = now()
			WHERE session_id = ? AND outcome IS NULL
			RETURNING *`, OutcomeFailed, NativeReasonRuntimeLost, endedSeq, sessionID)
		if err != nil {
			return mapError("fail open responses", err)
		}
		if len(ended) == 0 {
			return nil
		}
		return tx.BumpSessionActivity(ctx, sessionID)
	})
	ids := make([]string, len(ended))
	for i, r := range ended {
		ids[i] = r.ResponseID
	}
	return ids, err
}

// GetResponseByID returns one response.
func (s *Store) GetResponseByID(ctx context.Context, sessionID, responseID string) (Response, error) {
	var r Response
	err := s.conn(ctx).Where("session_id = ? AND response_id = ?", sessionID, responseID).Take(&r).Error
	return r, mapError("get response by id", err)
}

// ListOpenResponses returns the Session's open responses by start.
func (s *Store) ListOpenResponses(ctx context.Context, sessionID string) ([]Response, error) {
	var out []Response
	err := s.conn(ctx).Where("session_id = ? AND outcome IS NULL", sessionID).Order("started_seq").Find(&out).Error
	return out, mapError("list open responses", err)
}

// GetLastEndedResponse returns the Session's most recently ended response.
func (s *Store) GetLastEndedResponse(ctx context.Context, sessionID string) (Response, error) {
	var r Response
	err := s.conn(ctx).Where("session_id = ? AND outcome IS NOT NULL", sessionID).
		Order("ended_seq DESC, ended_at DESC").Take(&r).Error
	return r, mapError("get last ended response", err)
}

// ListResponsesBySession returns every response of a Session in the order they started.
func (s *Store) ListResponsesBySession(ctx context.Context, sessionID string) ([]Response, error) {
	var out []Response
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("started_seq").Find(&out).Error
	return out, mapError("list responses", err)
}

// ListResponseParts returns the output parts recorded for the Session's responses
// responseIDs, in seq order.
func (s *Store) ListResponseParts(ctx context.Context, sessionID string, responseIDs []string) ([]OutputPart, error) {
	if len(responseIDs) == 0 {
		return nil, nil
	}
	var out []OutputPart
	err := s.conn(ctx).Where("session_id = ? AND response_id IN ?", sessionID, responseIDs).Order("seq").Find(&out).Error
	return out, mapError("list response parts", err)
}

// StreamPosition is where a stream opening at a cursor stands: the Session's output
// position now, and whether one of its responses had started but not ended at the
// cursor (a stream resuming there is inside that response).
type StreamPosition struct {
	OutputSeq  int64
	InResponse bool
}

// inResponseAtSQL says whether one of the Session s's responses had started but not
// ended at the cursor @after.
const inResponseAtSQL = `EXISTS (
	SELECT 1 FROM responses r
	WHERE r.session_id = s.id AND r.started_seq <= @after AND (r.ended_seq IS NULL OR r.ended_seq > @after)
) AS in_response`

// streamPositionSQL reads both in one round trip: a stream opened at the head of the
// log (the usual case: a client opens one for the reply it is about to ask for) then
// has no backlog to read.
const streamPositionSQL = `SELECT COALESCE(o.output_seq, 0) AS output_seq, ` + inResponseAtSQL + ` FROM ` + sessionsWithOutput + ` WHERE s.id = @id`

// StreamPositionAt reads the Session's StreamPosition for a stream resuming after seq.
// A missing Session is ErrNotFound.
func (s *Store) StreamPositionAt(ctx context.Context, sessionID string, seq int64) (StreamPosition, error) {
	var rows []StreamPosition
	if err := scanRaw(s.conn(ctx), &rows, streamPositionSQL, map[string]any{"id": sessionID, "after": seq}); err != nil {
		return StreamPosition{}, mapError("stream position", err)
	}
	if len(rows) == 0 {
		return StreamPosition{}, fmt.Errorf("stream position: session %s: %w", sessionID, ErrNotFound)
	}
	return rows[0], nil
}

// GetSessionAtStreamPosition reads the Session with its StreamPosition for a stream
// resuming after seq, in one statement: what a stream's opening reads once it has
// subscribed to the Session's output. A missing Session is ErrNotFound.
func (s *Store) GetSessionAtStreamPosition(ctx context.Context, id string, seq int64) (Session, StreamPosition, error) {
	var inResponse bool
	sess, found, err := s.getSessionWith(ctx, `SELECT `+sessionColumns+`, `+inResponseAtSQL+` FROM `+sessionsWithOutput+` WHERE s.id = @id`,
		map[string]any{"id": id, "after": seq}, &inResponse)
	if err != nil {
		return Session{}, StreamPosition{}, mapError("get session at stream position", err)
	}
	if !found {
		return Session{}, StreamPosition{}, fmt.Errorf("get session %s at stream position: %w", id, ErrNotFound)
	}
	return sess, StreamPosition{OutputSeq: sess.OutputSeq, InResponse: inResponse}, nil
}

// nullableJSON stores SQL NULL for absent JSON.
func nullableJSON(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return v
}

// nullableJSONText is nullableJSON for a statement that casts the text to jsonb.
func nullableJSONText(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return string(v)
}
