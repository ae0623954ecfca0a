package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store/pubsub"
)

// relayGroup commits the batches that concurrent Relays of this process hand in
// together (group commit): a writer takes the batches waiting, one per Session, and
// writes them at once, each under its own lease fence. A Relay records one Session's
// events per batch and its reply streams in small batches (a delta every few
// milliseconds); alone, each was a transaction of its own, and PostgreSQL's work per
// transaction and per round trip bounded how many parts a worker could commit. A
// Store has two groups: batches of parts alone share one statement
// (writePartsGroup), batches with facts one transaction (writeFactsGroup). A Relay
// waits for its batch before it sends the next, so a Session has at most one batch in
// either group.
//
// Up to writers write groups at once. A batch that arrives while fewer write is
// written by its own Relay's goroutine, with whatever waits beside it: a batch alone
// needs no hand-over to another goroutine and back (two wake-ups on a busy machine).
// When its batch is written and others wait, the Relay hands its place to a writer
// goroutine, which writes groups one after another until none waits: under load the
// groups follow each other without a wake-up between them. So groups form only while
// every writer is busy.
type relayGroup struct {
	// write writes a group and hands each batch its result.
	write func(ctx context.Context, group []*relayCommit)
	// writers bounds the groups written at once.
	writers int
	mu      sync.Mutex
	pending []*relayCommit
	// running counts the writers: Relays writing their own batch, and goroutines.
	running int
}

// relayCommit is one Relay's batch waiting for its group.
type relayCommit struct {
	batch RelayBatch
	// parts are the batch's parts, which its group writes in one statement: set
	// by ApplyRelayBatch for a batch of parts alone, by writeRelayBatches after a
	// batch's facts.
	parts []NewPart
	// status is the program's status a batch with parts and facts reports last,
	// which the same statement sets.
	status string
	done   chan struct{}
	res    AppendResult
	err    error
}

// groupWriters bounds the groups of each kind written at once. A group's statements
// run one after another on one server process, so a second writer lets PostgreSQL's
// other core go on while the first waits for its round trip; more writers make
// smaller groups, more statements and more processes contending for the same cores.
// Measured on two cores, 100 Sessions at once: BenchmarkConcurrentRelayParts 104-131
// ms with two writers, 164-176 ms with one, 147-169 ms with four, 202-210 ms with
// eight; BenchmarkConcurrentRelayTurns 88-110 ms with two, 111-145 ms with one,
// 139-175 ms with every batch written alone.
const groupWriters = 2

// maxGroupBatches bounds the batches one group writes.
const maxGroupBatches = 64

// groupStatementTimeout bounds a group's statements: they run for every Relay in
// the group, so no one Relay's context may cancel them.
const groupStatementTimeout = 30 * time.Second

// commit writes a batch with whatever other Relays of this process hand in
// meanwhile, and returns its own result.
func (g *relayGroup) commit(ctx context.Context, c *relayCommit) (AppendResult, error) {
	c.done = make(chan struct{})
	g.mu.Lock()
	g.pending = append(g.pending, c)
	writes := g.running < g.writers
	if writes {
		g.running++
	}
	g.mu.Unlock()
	// Not ctx, here or in the writing: the group may already be written with this
	// batch in it, and the caller learns whether it committed (a later Relay reads
	// the cursor either way).
	if writes {
		g.writeOwn(context.WithoutCancel(ctx), c)
	}
	<-c.done
	return c.res, c.err
}

// writeOwn writes groups until c's batch is written (with none waiting, it is in the
// group another writer is writing), then leaves the batches waiting, if any, to a
// writer goroutine that takes the caller's place.
func (g *relayGroup) writeOwn(ctx context.Context, c *relayCommit) {
	for {
		group := g.take()
		if len(group) == 0 {
			<-c.done
			break
		}
		g.writeGroup(ctx, group)
		if isClosed(c.done) {
			break
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.running--
		return
	}
	go g.writeGroups(ctx)
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// writeGroups writes the waiting batches, a group at a time, until none wait.
func (g *relayGroup) writeGroups(ctx context.Context) {
	for group := g.takeOrStop(); len(group) > 0; group = g.takeOrStop() {
		g.writeGroup(ctx, group)
	}
}

// writeGroup writes one group and hands each of its batches its result.
func (g *relayGroup) writeGroup(ctx context.Context, group []*relayCommit) {
	defer func() {
		for _, c := range group {
			close(c.done)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, groupStatementTimeout)
	defer cancel()
	g.write(ctx, group)
}

// take removes the next group from the queue, if any.
func (g *relayGroup) take() []*relayCommit {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.takeLocked()
}

// takeOrStop is take for a writer goroutine: it counts the writer stopped, under the
// same lock, when nothing waits, so a batch that arrives after it finds a writer free.
func (g *relayGroup) takeOrStop() []*relayCommit {
	g.mu.Lock()
	defer g.mu.Unlock()
	group := g.takeLocked()
	if len(group) == 0 {
		g.running--
	}
	return group
}

// takeLocked removes the next group from the queue: up to maxGroupBatches batches,
// each of another Session (a Session's second batch, which only a fenced-off Relay of
// the same Session could hand in, waits for the next group). The caller holds mu.
func (g *relayGroup) takeLocked() []*relayCommit {
	if len(g.pending) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var group, rest []*relayCommit
	for _, c := range g.pending {
		if len(group) < maxGroupBatches && !seen[c.batch.SessionID] {
			seen[c.batch.SessionID] = true
			group = append(group, c)
			continue
		}
		rest = append(rest, c)
	}
	g.pending = rest
	return group
}

// writePartsGroup writes a group of batches of parts alone in one statement. When
// the statement fails, each batch is written alone, so one Session's failure is its
// own.
func (s *Store) writePartsGroup(ctx context.Context, group []*relayCommit) {
	if len(group) > 1 {
		if err := s.appendPartsGroup(ctx, group); err == nil {
			return
		}
	}
	for _, c := range group {
		c.res, c.err = s.appendPartsOnly(ctx, c.batch, c.parts)
	}
}

// writeFactsGroup writes a group of batches with facts in one transaction. When it
// fails (a fact naming a response the Session does not have fails its whole
// transaction), each batch is written alone, so one Session's failure is its own.
//
// A batch of one session log's entries alone that meets no other (a Relay's mirror
// after a reply's end, on a quiet worker) is its one statement, committed on its own:
// a mirror stores nothing twice, so it needs neither the fence nor the locks.
func (s *Store) writeFactsGroup(ctx context.Context, group []*relayCommit) {
	if log, ok := sessionLogAlone(group); ok {
		group[0].res, group[0].err = AppendResult{}, s.appendSessionLogAlone(ctx, group[0].batch.SessionID, log)
		return
	}
	err := s.pipelineRelayBatches(ctx, group)
	if err == nil {
		return
	}
	if len(group) == 1 {
		group[0].res, group[0].err = AppendResult{}, err
		return
	}
	for _, c := range group {
		if err := s.pipelineRelayBatches(ctx, []*relayCommit{c}); err != nil {
			c.res, c.err = AppendResult{}, err
		}
	}
}

// sessionLogAlone returns the entries of a group of one batch that holds one
// session log's entries and nothing else.
func sessionLogAlone(group []*relayCommit) (*SessionLogAppend, bool) {
	if len(group) != 1 {
		return nil, false
	}
	b := group[0].batch
	if len(b.Ops) != 1 || b.Ops[0].SessionLog == nil || b.Cursor != nil {
		return nil, false
	}
	return b.Ops[0].SessionLog, true
}

// appendSessionLogAlone writes a session log's entries in their one statement, and
// refuses them as a group does when the mirror holds fewer entries than their count.
func (s *Store) appendSessionLogAlone(ctx context.Context, sessionID string, log *SessionLogAppend) error {
	stored, err := s.AppendSessionLogEntries(ctx, sessionID, log.Stream, log.After, log.Entries)
	if err != nil {
		return err
	}
	if stored < log.After {
		return sessionLogBehind(sessionID, log.Stream, stored, log.After)
	}
	return nil
}

// sessionLogBehind is the refusal of entries counted after more than the mirror
// holds.
func sessionLogBehind(sessionID, stream string, stored, after int64) error {
	return fmt.Errorf("session %s: stream %s holds %d entries where the mirror counted %d: %w", sessionID, stream, stored, after, ErrSessionLogBehind)
}

// appendPartsGroupSQL is appendPartsOnlySQL for many Sessions in one statement. It
// locks the batches' reader leases in Session order (two groups never wait on each
// other in a cycle: each takes every lease before any other row) and keeps those
// whose generation is the batch's (the fence); for each of them it advances the
// Session's output position (and sets the program's status on the Session's row when
// the batch gives one: only then does it lock the row an input's receipt locks),
// inserts the parts at the seqs after the previous one, upserts the cursor and queues
// the notification with the frames as jsonb stores them when they fit. A batch with
// no row back was fenced off.
const appendPartsGroupSQL = `
WITH b AS (
	SELECT * FROM jsonb_to_recordset(CAST(CAST($1 AS text) AS jsonb)) AS b(i int, session uuid, lease bigint, n bigint,
		frames jsonb, response_ids jsonb, has_cursor boolean, cursor_generation text, cursor_position jsonb, status text)
), lease AS (
	SELECT l.session_id FROM reader_leases l JOIN b ON b.session = l.session_id AND l.generation = b.lease
	ORDER BY l.session_id FOR UPDATE OF l
), sess AS (
	UPDATE session_outputs o SET output_seq = o.output_seq + b.n, last_output_at = now()
	FROM b WHERE o.session_id = b.session AND b.session IN (SELECT session_id FROM lease)
	RETURNING b.i, o.session_id AS id, o.output_seq, b.n, b.lease, b.frames, b.response_ids, b.has_cursor,
		b.cursor_generation, b.cursor_position, b.status
), new_status AS (
	UPDATE sessions s SET runtime_status = sess.status, updated_at = now()
	FROM sess WHERE s.id = sess.id AND sess.status IS NOT NULL
), parts AS (
	INSERT INTO output_parts (session_id, seq, response_id, frame)
	SELECT sess.id, sess.output_seq - sess.n + u.ord, u.response_id, u.frame
	FROM sess, ROWS FROM (jsonb_array_elements(sess.frames), jsonb_array_elements_text(sess.response_ids))
		WITH ORDINALITY AS u(frame, response_id, ord)
), cur AS (
	INSERT INTO runtime_cursors (session_id, generation, position, through_seq, lease_generation)
	SELECT sess.id, sess.cursor_generation, sess.cursor_position, sess.output_seq, sess.lease FROM sess WHERE sess.has_cursor
	ON CONFLICT (session_id) DO UPDATE SET generation = EXCLUDED.generation, position = EXCLUDED.position,
		through_seq = EXCLUDED.through_seq, lease_generation = EXCLUDED.lease_generation, updated_at = now()
), note AS (
	SELECT pg_notify($2 || sess.id::text, sess.output_seq::text ||
		CASE WHEN octet_length(sess.frames::text) <= $3 THEN ' ' || sess.frames::text ELSE '' END)
	FROM sess
)
SELECT sess.i, sess.output_seq FROM sess WHERE (SELECT count(*) FROM note) >= 0`

// groupedBatch is one batch of a group's statement.
type groupedBatch struct {
	I                int               `json:"i"`
	Session          string            `json:"session"`
	Lease            int64             `json:"lease"`
	N                int               `json:"n"`
	Frames           []json.RawMessage `json:"frames"`
	ResponseIDs      []*string         `json:"response_ids"`
	HasCursor        bool              `json:"has_cursor"`
	CursorGeneration string            `json:"cursor_generation"`
	CursorPosition   json.RawMessage   `json:"cursor_position"`
	// Status is the program's status the batch reports last, if any.
	Status string `json:"status,omitempty"`
}

// appendPartsGroup writes a group in one statement, on pgx's own API as
// appendPartsOnly does, and sets each batch's result (a fenced-off batch gets
// ErrLeaseLost). An error is the statement's: nothing of the group is written.
func (s *Store) appendPartsGroup(ctx context.Context, group []*relayCommit) error {
	args, err := appendPartsGroupArgs(group)
	if err != nil {
		return err
	}
	rows, err := collectOnPgx(ctx, s, pgx.RowToStructByPos[groupedOutputSeq], appendPartsGroupSQL, args...)
	if err != nil {
		return mapError("append parts group", err)
	}
	return groupAppended(group, rows)
}

// appendPartsGroupArgs are appendPartsGroupSQL's arguments for a group's batches,
// their parts and their status (each relayCommit's).
func appendPartsGroupArgs(group []*relayCommit) ([]any, error) {
	batches := make([]groupedBatch, len(group))
	for i, c := range group {
		gb := groupedBatch{I: i, Session: c.batch.SessionID, Lease: c.batch.LeaseGeneration, N: len(c.parts),
			Frames: make([]json.RawMessage, len(c.parts)), ResponseIDs: make([]*string, len(c.parts)), CursorPosition: json.RawMessage("null")}
		for j, p := range c.parts {
			gb.Frames[j], gb.ResponseIDs[j] = p.Frame, p.ResponseID
		}
		if c.batch.Cursor != nil {
			gb.HasCursor, gb.CursorGeneration, gb.CursorPosition = true, c.batch.Cursor.Generation, c.batch.Cursor.Position
		}
		gb.Status = c.status
		batches[i] = gb
	}
	raw, err := json.Marshal(batches)
	if err != nil {
		return nil, fmt.Errorf("encode parts group: %w", err)
	}
	return []any{string(raw), pubsub.SessionOutputChannel(""), pubsub.MaxNoticeFrames}, nil
}

// groupedOutputSeq is a row of appendPartsGroupSQL: a written batch and its
// Session's output_seq after it.
type groupedOutputSeq struct {
	I         int
	OutputSeq int64
}

// groupAppended sets each batch's result from appendPartsGroupSQL's rows: its seqs,
// or ErrLeaseLost for a batch with no row.
func groupAppended(group []*relayCommit, rows []groupedOutputSeq) error {
	for _, c := range group {
		c.err = fmt.Errorf("session %s: lease generation %d is not the current one: %w", c.batch.SessionID, c.batch.LeaseGeneration, ErrLeaseLost)
	}
	for _, r := range rows {
		if r.I < 0 || r.I >= len(group) {
			return fmt.Errorf("append parts group: a row for batch %d of %d", r.I, len(group))
		}
		c := group[r.I]
		n := int64(len(c.parts))
		c.res.FirstSeq, c.res.LastSeq, c.res.Parts, c.err = r.OutputSeq-n+1, r.OutputSeq, n, nil
	}
	return nil
}
