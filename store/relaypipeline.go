package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// A Relay batch with facts (a reply's start or end, an admission, an interaction, the
// program's status, a child run's report, a diagnostic) is one transaction of several
// statements: the lease and output position locks, a statement per fact, then the
// parts with the cursor and the notification. Sent one by one (as GORM sends them),
// that is a round trip each, begin and commit included (seven for a reply's start),
// with the locks held from the second to the last: under load every round trip waits
// for a core. writeRelayBatches sends the batches of a group (relaygroup.go), one or
// many Sessions', in two round trips on the connection's own pgx API: begin with the
// locks, every fact and the parts at once (their seqs follow the output position the
// locks hold, read in SQL); then commit, or roll back when a statement failed, a fact
// named an unknown response or interaction, or a batch's fence failed.
//
// Each statement needs nothing read before it (a child run's parent, a diagnostic's
// number and a reply's seqs are read inside it), so none waits on another's answer.
// A turn's facts (the log's entries, admissions, a reply's start and end) go one
// statement a kind for the whole group (relayfacts.go); the rarer ones a statement a
// fact. The per-fact statements are shared with the single-fact methods where
// there is one (those number from an absolute seq where the batch's count from the
// output position): positional ($1, $2, ...) SQL constants with argument builders
// beside them. GORM
// passes such a statement and its arguments through as they are, provided it holds no
// '@' (which would make GORM read it as named arguments).

// rollbackTimeout bounds the rollback of a batch that failed, which runs even when
// the caller's context ended.
const rollbackTimeout = 10 * time.Second

// pipelineRelayBatches writes a group of batches with facts, of different Sessions,
// in one transaction and sets each batch's result (a fenced-off batch gets
// ErrLeaseLost and writes nothing). An error is the transaction's: nothing of the
// group is written.
func (s *Store) pipelineRelayBatches(ctx context.Context, group []*relayCommit) error {
	return s.onPgxConn(ctx, func(c *pgx.Conn) error { return writeRelayBatches(ctx, c, group) })
}

// onPgxConn runs fn on a connection of the pool through pgx's own API.
func (s *Store) onPgxConn(ctx context.Context, fn func(*pgx.Conn) error) error {
	conn, err := s.sqlDB.Conn(ctx)
	if err != nil {
		return mapError("take a connection", err)
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("a connection of %T, not pgx's", driverConn)
		}
		return fn(c.Conn())
	})
}

// collectOnPgx runs a statement on a connection of the pool through pgx's own API and
// collects its rows with rowTo.
func collectOnPgx[T any](ctx context.Context, s *Store, rowTo pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	var collected []T
	err := s.onPgxConn(ctx, func(c *pgx.Conn) error {
		rows, _ := c.Query(ctx, sql, args...) // CollectRows reports the query's error
		var err error
		collected, err = pgx.CollectRows(rows, rowTo)
		return err
	})
	return collected, err
}

// lockedSession is what a batch's locks read: its lease's generation (the fence)
// and the Session's output position.
type lockedSession struct {
	generation, outputSeq int64
}

// lockLeasesAndOutputSeqsSQL locks the group's Sessions' reader leases and output
// positions, in Session order as the parts' group statement takes its leases, so two
// groups never wait on each other in a cycle: each batch's fence and its Session's
// output position, which holds until the commit. (Only a lease's holder writes its
// Session's output position, so the position's lock never waits; taking it makes the
// position read the one the lease's previous holder committed.) The Session's own
// row is not locked: a fact that changes it (a status, a reply's end) locks it by its
// own statement, and an input's receipt, which locks that row, no longer waits for
// every batch of a group.
const lockLeasesAndOutputSeqsSQL = `
SELECT l.session_id::text, l.generation, o.output_seq FROM reader_leases l JOIN session_outputs o ON o.session_id = l.session_id
WHERE l.session_id = ANY(CAST($1 AS text[])::uuid[]) ORDER BY l.session_id FOR UPDATE OF l, o`

// writeRelayBatches runs a group's transaction on c in two round trips: begin with
// every batch's locks, every batch's facts and parts at once; then commit. The facts
// take their seqs from the Session's output position in SQL, which the locks hold,
// so none waits for the locks' answer; the fence is read from that answer before the
// commit, and a group with a fenced-off batch (a superseded Relay's, which is rare) is
// rolled back and written again without it. Any error rolls the whole group back. A
// connection that could not roll back is closed (pgx does so itself), and one given
// back inside a transaction anyway is discarded (pgx's database/sql driver checks),
// so the pool never hands out a connection in the middle of a group.
func writeRelayBatches(ctx context.Context, c *pgx.Conn, group []*relayCommit) error {
	ids := make([]string, len(group))
	for i, rc := range group {
		ids[i] = rc.batch.SessionID
	}
	locked := make(map[string]lockedSession, len(group))
	lockRead := false
	batch := &pgx.Batch{}
	batch.BeginTx(pgx.TxOptions{})
	batch.Queue(lockLeasesAndOutputSeqsSQL, ids).Query(func(rows pgx.Rows) error {
		var id string
		var l lockedSession
		_, err := pgx.ForEachRow(rows, []any{&id, &l.generation, &l.outputSeq}, func() error {
			locked[id] = l
			return nil
		})
		lockRead = err == nil
		return mapError("lock reader leases and output positions", err)
	})
	var withParts []*relayCommit
	var grouped groupedFacts
	for _, rc := range group {
		b := rc.batch
		if hasParts(b.Ops) {
			// The parts' statement sets the status the batch reports last, which
			// is all the statuses before it would leave, in its one statement.
			b.Ops, rc.status = withoutStatuses(b.Ops)
		}
		rc.res = AppendResult{}
		var parts []NewPart
		if groupable(b.Ops) {
			parts = grouped.add(rc, b)
		} else {
			var err error
			if parts, err = queueFactStatements(batch, b, &rc.res); err != nil {
				return err
			}
		}
		switch {
		case len(parts) > 0:
			rc.parts = parts
			withParts = append(withParts, rc)
		case b.Cursor != nil:
			queueCursor(batch, b)
		}
	}
	// The facts of a kind in one statement for every batch whose facts allow it
	// (relayfacts.go); the other batches' went one by one above, and no batch's facts
	// depend on another's.
	if err := grouped.queue(batch); err != nil {
		return err
	}
	// Every batch's parts in one statement, as batches of parts alone are written, with
	// the status each reports last; its lease locks are the transaction's already.
	if len(withParts) > 0 {
		args, err := appendPartsGroupArgs(withParts)
		if err != nil {
			return err
		}
		batch.Queue(appendPartsGroupSQL, args...).Query(func(rows pgx.Rows) error {
			written, err := pgx.CollectRows(rows, pgx.RowToStructByPos[groupedOutputSeq])
			if err != nil {
				return mapError("append parts group", err)
			}
			if err := groupAppended(withParts, written); err != nil {
				return err
			}
			for _, rc := range withParts {
				if rc.err != nil {
					return rc.err
				}
			}
			return nil
		})
	}
	results := c.SendBatch(ctx, batch)
	tx := results.Tx()
	err := results.Close()
	// rollback ends what the batch began, whatever ctx says now; after a commit or a
	// rollback it does nothing.
	rollback := func() error {
		rollbackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		return tx.Rollback(rollbackCtx)
	}
	defer func() { _ = rollback() }()
	if lockRead {
		if fencedIn := fenceGroup(group, locked); len(fencedIn) < len(group) {
			// The fenced-off batches' facts went with the others': none of it
			// may commit.
			if err := rollback(); err != nil {
				return mapError("roll back relay batches", err)
			}
			if len(fencedIn) == 0 {
				return nil
			}
			return writeRelayBatches(ctx, c, fencedIn)
		}
	}
	if err != nil {
		return mapError("write relay batches", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return mapError("commit relay batches", err)
	}
	for _, rc := range group {
		rc.err = nil
		if len(rc.parts) == 0 {
			outputSeq := locked[rc.batch.SessionID].outputSeq
			rc.res.FirstSeq, rc.res.LastSeq = outputSeq, outputSeq
		}
	}
	return nil
}

// fenceGroup returns the batches of group whose lease generation is the one locked,
// and sets the others' result to ErrLeaseLost.
func fenceGroup(group []*relayCommit, locked map[string]lockedSession) []*relayCommit {
	var fencedIn []*relayCommit
	for _, rc := range group {
		l, found := locked[rc.batch.SessionID]
		if err := leaseFence(rc.batch.SessionID, found, l.generation, rc.batch.LeaseGeneration); err != nil {
			rc.res, rc.err = AppendResult{}, err
			continue
		}
		fencedIn = append(fencedIn, rc)
	}
	return fencedIn
}

// queueFactStatements queues on facts the batch's facts other than its parts, a
// statement each, in order, each numbered from the Session's output position (the
// batch's first part is 1 after it), and returns the parts, which writeRelayBatches
// writes after them. The admissions are added to result as their answers are read.
func queueFactStatements(facts *pgx.Batch, b RelayBatch, result *AppendResult) ([]NewPart, error) {
	next := int64(1) // the next part's seq after the Session's output position
	var parts []NewPart
	for _, op := range b.Ops {
		if err := queueFact(facts, b.SessionID, op, next, result); err != nil {
			return nil, err
		}
		if op.Part != nil {
			parts = append(parts, *op.Part)
			next++
		}
	}
	return parts, nil
}

// hasParts reports whether ops append a part.
func hasParts(ops []RelayOp) bool {
	for _, op := range ops {
		if op.Part != nil {
			return true
		}
	}
	return false
}

// withoutStatuses returns ops without their status reports, and the last status.
func withoutStatuses(ops []RelayOp) ([]RelayOp, string) {
	kept := make([]RelayOp, 0, len(ops))
	status := ""
	for _, op := range ops {
		if op.Status != "" {
			status = op.Status
			continue
		}
		kept = append(kept, op)
	}
	return kept, status
}

// queueCursor queues the cursor of a batch without parts, through the Session's
// output position.
func queueCursor(facts *pgx.Batch, b RelayBatch) {
	cur := RuntimeCursor{SessionID: b.SessionID, Generation: b.Cursor.Generation, Position: b.Cursor.Position,
		ThroughSeq: 0, LeaseGeneration: b.LeaseGeneration}
	facts.Queue(upsertCursorAfterOutputSQL, upsertCursorArgs(cur)...)
}

// queueFact queues one fact's statement; nextSeq is the seq the next part will get,
// counted from the Session's output position. A part is written with the others,
// after every fact.
func queueFact(facts *pgx.Batch, sessionID string, op RelayOp, nextSeq int64, result *AppendResult) error {
	switch {
	case op.AdmitInput != "":
		facts.Queue(admitInputsSQL, admitInputsArgs(sessionID, []string{op.AdmitInput})...).Query(func(rows pgx.Rows) error {
			seconds, err := pgx.CollectRows(rows, pgx.RowTo[float64])
			if err != nil {
				return mapError("mark inputs admitted", err)
			}
			result.Admitted = append(result.Admitted, custodyDurations(seconds)...)
			return nil
		})
	case op.StartResponse != nil:
		in := *op.StartResponse
		in.SessionID, in.StartedSeq = sessionID, nextSeq
		args, err := startResponseArgs(in)
		if err != nil {
			return err
		}
		// Its rows are not read: none back is a start replayed after its end, which
		// changes nothing.
		facts.Queue(startResponseAfterOutputSQL, args...)
	case op.OpenInteraction != nil:
		in := *op.OpenInteraction
		in.SessionID = sessionID
		facts.Queue(openInteractionSQL, openInteractionArgs(in)...)
	case op.CloseInteraction != nil:
		cl := *op.CloseInteraction
		facts.Queue(closeInteractionSQL, closeInteractionArgs(sessionID, cl.InteractionID, cl.State, cl.Reason)...).QueryRow(func(row pgx.Row) error {
			var closed int64
			var known bool
			if err := row.Scan(&closed, &known); err != nil {
				return mapError("close interaction", err)
			}
			_, err := closedOrUnknown(cl.InteractionID, closed, known)
			return err
		})
	case op.EndResponse != nil:
		in := *op.EndResponse
		in.SessionID, in.EndedSeq = sessionID, nextSeq-1
		facts.Queue(endResponseAfterOutputSQL, endResponseArgs(in)...).QueryRow(func(row pgx.Row) error {
			var ended int64
			var known bool
			if err := row.Scan(&ended, &known); err != nil {
				return mapError("end response", err)
			}
			_, err := endedOrUnknown(in, ended, known)
			return err
		})
	case op.Status != "":
		facts.Queue(setRuntimeStatusSQL, op.Status, sessionID).Exec(func(tag pgconn.CommandTag) error {
			return runtimeStatusSet(sessionID, tag.RowsAffected())
		})
	case op.ChildRun != nil:
		report := *op.ChildRun
		report.SessionID = sessionID
		args, _, err := upsertChildRunArgs(report, true)
		if err != nil {
			return err
		}
		facts.Queue(upsertChildRunSQL, args...)
	case op.Diagnostic != nil:
		args, err := appendDiagnosticArgs(sessionID, *op.Diagnostic)
		if err != nil {
			return err
		}
		facts.Queue(appendDiagnosticSQL, args...)
	case op.SessionLog != nil:
		log := *op.SessionLog
		args, err := appendSessionLogArgs(sessionID, log)
		if err != nil {
			return err
		}
		facts.Queue(appendSessionLogSQL, args...).QueryRow(func(row pgx.Row) error {
			var stored int64
			if err := row.Scan(&stored); err != nil {
				return mapError("append session log entries", err)
			}
			if stored < log.After {
				return sessionLogBehind(sessionID, log.Stream, stored, log.After)
			}
			return nil
		})
	}
	return nil
}
