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
	// Usage and Error are their JSON's text, or nil.
	Usage any `json:"usage"`
	Error any `json:"error"`
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
			e := op.EndResponse
			g.ends = append(g.ends, groupedEnd{J: len(g.ends), Session: b.SessionID, Response: e.ResponseID, Outcome: e.Outcome,
				NativeReason: e.NativeReason, Usage: nullableJSONText(e.Usage), Error: nullableJSONText(e.Error), Next: next - 1})
		}
	}
	return parts
}

// queue queues a statement for each kind with rows, in the order a batch's facts
// depend on each other: the log and the admissions, then the starts, then the ends.
// The parts go after them all.
func (g *groupedFacts) queue(facts *pgx.Batch) error {
	if len(g.logs) > 0 {
		var stored int64
		err := queueKind(facts, "session log entries", appendSessionLogsGroupSQL, g.logs, len(g.logs), nil, []any{&stored}, func(j int) error {
			if l := g.logs[j]; stored < l.After {
				return sessionLogBehind(l.Session, l.Stream, stored, l.After)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(g.admits) > 0 {
		var seconds float64
		err := queueKind(facts, "admissions", admitInputsGroupSQL, g.admits, len(g.admits), []any{InputAdmitted, []string{InputPending, InputDelivered}}, []any{&seconds}, func(j int) error {
			res := &g.admittedBy[j].res
			res.Admitted = append(res.Admitted, custodyDurations([]float64{seconds})...)
			return nil
		})
		if err != nil {
			return err
		}
	}
	// A start replayed after its end changes nothing, as startResponseSQL's: its rows
	// are not read.
	if len(g.starts) > 0 {
		if err := queueKind(facts, "response starts", startResponsesGroupSQL, g.starts, len(g.starts), nil, nil, nil); err != nil {
			return err
		}
	}
	if len(g.ends) > 0 {
		var ended int64
		var known bool
		err := queueKind(facts, "response ends", endResponsesGroupSQL, g.ends, len(g.ends), nil, []any{&ended, &known}, func(j int) error {
			e := g.ends[j]
			_, err := endedOrUnknown(ResponseEnd{SessionID: e.Session, ResponseID: e.Response}, ended, known)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// queueKind queues a kind's statement with its rows as JSON text, the statement's
// first argument, and args after them. When read is set, each row the statement
// returns names in its first column the row (of n) it is for, and is scanned with
// the rest into dest before read sees it.
func queueKind(facts *pgx.Batch, what, sql string, rows any, n int, args, dest []any, read func(j int) error) error {
	raw, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	queued := facts.Queue(sql, append([]any{string(raw)}, args...)...)
	if read == nil {
		return nil
	}
	var j int
	queued.Query(func(returned pgx.Rows) error {
		_, err := pgx.ForEachRow(returned, append([]any{&j}, dest...), func() error {
			if j < 0 || j >= n {
				return fmt.Errorf("%s: a row for %d of %d", what, j, n)
			}
			return read(j)
		})
		return mapError("write "+what, err)
	})
	return nil
}
