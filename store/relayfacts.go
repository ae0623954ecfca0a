package store

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// A turn's facts are few and always of the same kinds: the session log's entries and
// the input's admission (the admission's batch), the reply's start, and its end. A
// group of batches with facts (relaygroup.go) writes each of these kinds in one
// statement for all its batches, as it writes their parts, where it ran a statement
// a fact: at 100 Sessions those statements were four of the eleven a turn cost. The
// statements number from each Session's output position, which the group's locks
// hold, as the single-fact ones do. A batch with other facts (an interaction, a child
// run, a diagnostic, the program's status without parts) or with two facts of a kind
// that one statement cannot hold (two starts of one reply, a start after the same
// reply's end, two mirrors of one log) has its facts written one by one, in order
// (queueFactStatements).

// appendSessionLogsGroupSQL is appendSessionLogSQL for many Sessions' logs: for each
// it reads how many entries the mirror holds, writes the entries past both, and
// returns the count it read.
const appendSessionLogsGroupSQL = `
WITH logs AS (
	SELECT * FROM jsonb_to_recordset(CAST(CAST($1 AS text) AS jsonb)) AS b(j int, session uuid, stream text, after bigint, entries jsonb)
), stored AS (
	SELECT b.*, COALESCE((SELECT max(e.entry_seq) FROM session_log_entries e WHERE e.session_id = b.session AND e.stream = b.stream), 0) AS n
	FROM logs b
), appended AS (
	INSERT INTO session_log_entries (session_id, stream, entry_seq, entry)
	SELECT s.session, s.stream, s.after + u.ord, u.entry
	FROM stored s, jsonb_array_elements(s.entries) WITH ORDINALITY AS u(entry, ord)
	WHERE s.n >= s.after AND s.after + u.ord > s.n
	ON CONFLICT DO NOTHING
)
SELECT j, n FROM stored`

// admitInputsGroupSQL is admitInputsSQL for many Sessions' inputs, each row back
// naming the admission it is for.
const admitInputsGroupSQL = `
WITH admissions AS (
	SELECT * FROM jsonb_to_recordset(CAST(CAST($1 AS text) AS jsonb)) AS b(j int, session uuid, input uuid)
)
UPDATE inputs i SET state = $2, admitted_at = now()
FROM admissions b WHERE i.id = b.input AND i.session_id = b.session AND i.state = ANY($3)
RETURNING b.j, EXTRACT(EPOCH FROM i.admitted_at - i.accepted_at)::float8`

// startResponsesGroupSQL is startResponseAfterOutputSQL for many Sessions' replies.
const startResponsesGroupSQL = `
WITH starts AS (
	SELECT * FROM jsonb_to_recordset(CAST(CAST($1 AS text) AS jsonb)) AS b(session uuid, response text, origin text, input_ids jsonb, next bigint)
)
INSERT INTO responses AS r (session_id, response_id, origin, input_ids, started_seq)
SELECT b.session, b.response, b.origin, b.input_ids, o.output_seq + b.next
FROM starts b JOIN session_outputs o ON o.session_id = b.session
ON CONFLICT (session_id, response_id) DO UPDATE SET input_ids = excluded.input_ids
WHERE r.outcome IS NULL`

// endResponsesGroupSQL is endResponseAfterOutputSQL for many Sessions' replies: for
// each it says whether the reply ended now and whether it is known at all. Usage and
// error go as their JSON's text, so a JSON null stays one, as the single-fact
// statement stores it.
const endResponsesGroupSQL = `
WITH ends AS (
	SELECT * FROM jsonb_to_recordset(CAST(CAST($1 AS text) AS jsonb)) AS b(j int, session uuid, response text, outcome text,
		native_reason text, usage text, error text, next bigint)
), ended AS (
	UPDATE responses r SET outcome = b.outcome, native_reason = b.native_reason, usage = CAST(b.usage AS jsonb),
		error = CAST(b.error AS jsonb), ended_seq = GREATEST(o.output_seq + b.next, r.started_seq), ended_at = now()
	FROM ends b JOIN session_outputs o ON o.session_id = b.session
	WHERE r.session_id = b.session AND r.response_id = b.response AND r.outcome IS NULL
	RETURNING b.j, r.session_id
), bumped AS (
	UPDATE sessions s SET last_activity_at = GREATEST(now(), s.last_activity_at), updated_at = now()
	WHERE s.id IN (SELECT session_id FROM ended)
)
SELECT b.j, (SELECT count(*) FROM ended e WHERE e.j = b.j) AS ended,
	EXISTS (SELECT 1 FROM responses r WHERE r.session_id = b.session AND r.response_id = b.response) AS known
FROM ends b`

// groupedFacts are the facts of a group's batches that go a kind at a time, in the
// rows of each kind's statement; a row's J is its place among its kind's.
type groupedFacts struct {
	logs   []groupedLog
	admits []groupedAdmission
	starts []groupedStart
	ends   []groupedEnd
	// admittedBy are the batches of the admissions, whose results take their custody
	// durations.
	admittedBy []*relayCommit
	// endsAsked are the ends as the batches gave them, for an unknown reply's error.
	endsAsked []ResponseEnd
}

type groupedLog struct {
	J       int               `json:"j"`
	Session string            `json:"session"`
	Stream  string            `json:"stream"`
	After   int64             `json:"after"`
	Entries []json.RawMessage `json:"entries"`
}

type groupedAdmission struct {
	J       int    `json:"j"`
	Session string `json:"session"`
	Input   string `json:"input"`
}

type groupedStart struct {
	Session  string   `json:"session"`
	Response string   `json:"response"`
	Origin   string   `json:"origin"`
	InputIDs []string `json:"input_ids"`
	// Next is the start part's seq counted from the Session's output position.
	Next int64 `json:"next"`
}

type groupedEnd struct {
	J            int     `json:"j"`
	Session      string  `json:"session"`
	Response     string  `json:"response"`
	Outcome      string  `json:"outcome"`
	NativeReason *string `json:"native_reason"`
	Usage        *string `json:"usage"`
	Error        *string `json:"error"`
	// Next is the end's seq (the reply's last part) counted from the Session's
	// output position.
	Next int64 `json:"next"`
}

// groupable reports whether a batch's facts other than its parts can go a kind at a
// time: only the kinds groupedFacts holds, and no two of a kind that one statement
// could not write in the batch's order.
func groupable(ops []RelayOp) bool {
	var streams, started, ended []string
	for _, op := range ops {
		switch {
		case op.Part != nil, op.AdmitInput != "":
		case op.SessionLog != nil:
			if slices.Contains(streams, op.SessionLog.Stream) {
				return false
			}
			streams = append(streams, op.SessionLog.Stream)
		case op.StartResponse != nil:
			id := op.StartResponse.ResponseID
			if slices.Contains(started, id) || slices.Contains(ended, id) {
				return false
			}
			started = append(started, id)
		case op.EndResponse != nil:
			if slices.Contains(ended, op.EndResponse.ResponseID) {
				return false
			}
			ended = append(ended, op.EndResponse.ResponseID)
		default:
			return false
		}
	}
	return true
}

// add takes a groupable batch's facts into their kinds' rows, each numbered from the
// Session's output position as queueFactStatements numbers them, and returns its
// parts.
func (g *groupedFacts) add(rc *relayCommit, b RelayBatch) []NewPart {
	next := int64(1) // the next part's seq after the Session's output position
	var parts []NewPart
	for _, op := range b.Ops {
		switch {
		case op.Part != nil:
			parts = append(parts, *op.Part)
			next++
		case op.SessionLog != nil:
			entries := op.SessionLog.Entries
			if entries == nil {
				entries = []json.RawMessage{}
			}
			g.logs = append(g.logs, groupedLog{J: len(g.logs), Session: b.SessionID, Stream: op.SessionLog.Stream, After: op.SessionLog.After, Entries: entries})
		case op.AdmitInput != "":
			g.admits = append(g.admits, groupedAdmission{J: len(g.admits), Session: b.SessionID, Input: op.AdmitInput})
			g.admittedBy = append(g.admittedBy, rc)
		case op.StartResponse != nil:
			s := op.StartResponse
			ids := s.InputIDs
			if ids == nil {
				ids = []string{}
			}
			g.starts = append(g.starts, groupedStart{Session: b.SessionID, Response: s.ResponseID, Origin: s.Origin, InputIDs: ids, Next: next})
		case op.EndResponse != nil:
			e := *op.EndResponse
			e.SessionID = b.SessionID
			g.ends = append(g.ends, groupedEnd{J: len(g.ends), Session: b.SessionID, Response: e.ResponseID, Outcome: e.Outcome,
				NativeReason: e.NativeReason, Usage: jsonText(e.Usage), Error: jsonText(e.Error), Next: next - 1})
			g.endsAsked = append(g.endsAsked, e)
		}
	}
	return parts
}

// jsonText is JSON as its text, nil when absent.
func jsonText(v json.RawMessage) *string {
	if len(v) == 0 {
		return nil
	}
	s := string(v)
	return &s
}

// queue queues a statement for each kind with rows, in the order a batch's facts
// depend on each other: the log and the admissions, then the starts, then the ends.
// The parts go after them all.
func (g *groupedFacts) queue(facts *pgx.Batch) error {
	if len(g.logs) > 0 {
		raw, err := json.Marshal(g.logs)
		if err != nil {
			return fmt.Errorf("encode session log entries: %w", err)
		}
		facts.Queue(appendSessionLogsGroupSQL, string(raw)).Query(func(rows pgx.Rows) error {
			var j int
			var stored int64
			_, err := pgx.ForEachRow(rows, []any{&j, &stored}, func() error {
				if j < 0 || j >= len(g.logs) {
					return fmt.Errorf("append session log entries: a row for entry %d of %d", j, len(g.logs))
				}
				if l := g.logs[j]; stored < l.After {
					return fmt.Errorf("session %s: stream %s holds %d entries where the mirror counted %d: %w", l.Session, l.Stream, stored, l.After, ErrSessionLogBehind)
				}
				return nil
			})
			return mapError("append session log entries", err)
		})
	}
	if len(g.admits) > 0 {
		raw, err := json.Marshal(g.admits)
		if err != nil {
			return fmt.Errorf("encode admissions: %w", err)
		}
		facts.Queue(admitInputsGroupSQL, string(raw), InputAdmitted, []string{InputPending, InputDelivered}).Query(func(rows pgx.Rows) error {
			var j int
			var seconds float64
			_, err := pgx.ForEachRow(rows, []any{&j, &seconds}, func() error {
				if j < 0 || j >= len(g.admittedBy) {
					return fmt.Errorf("mark inputs admitted: a row for admission %d of %d", j, len(g.admittedBy))
				}
				res := &g.admittedBy[j].res
				res.Admitted = append(res.Admitted, custodyDurations([]float64{seconds})...)
				return nil
			})
			return mapError("mark inputs admitted", err)
		})
	}
	if len(g.starts) > 0 {
		raw, err := json.Marshal(g.starts)
		if err != nil {
			return fmt.Errorf("encode response starts: %w", err)
		}
		// A start replayed after its end changes nothing, as startResponseSQL's.
		facts.Queue(startResponsesGroupSQL, string(raw))
	}
	if len(g.ends) > 0 {
		raw, err := json.Marshal(g.ends)
		if err != nil {
			return fmt.Errorf("encode response ends: %w", err)
		}
		facts.Queue(endResponsesGroupSQL, string(raw)).Query(func(rows pgx.Rows) error {
			var j int
			var ended int64
			var known bool
			_, err := pgx.ForEachRow(rows, []any{&j, &ended, &known}, func() error {
				if j < 0 || j >= len(g.endsAsked) {
					return fmt.Errorf("end response: a row for end %d of %d", j, len(g.endsAsked))
				}
				_, err := endedOrUnknown(g.endsAsked[j], ended, known)
				return err
			})
			return mapError("end response", err)
		})
	}
	return nil
}
