package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// A Relay batch with facts (a reply's start or end, an admission, an interaction, the
// program's status, a child run's report, a diagnostic) is one transaction of several
// statements: the lease and Session locks, a statement per fact, then the parts with
// the cursor and the notification. Sent one by one (as GORM sends them), that is a
// round trip each, begin and commit included (seven for a reply's start), with the
// Session's row locked from the second to the last: under load every round trip waits
// for a core, and an input's receipt, which takes the same row lock, waits behind all
// of them. pipelineRelayBatch sends
// them in three round trips on the connection's own pgx API: begin with the locks;
// every fact and the parts at once (their seqs follow the output position the locks
// returned); commit, or roll back when a statement failed or a fact named an unknown
// response or interaction.
//
// Each fact is one statement that needs nothing read before it (a child run's parent
// and a diagnostic's number are read inside it), so none waits on another's answer.
// The statements are shared with the single-fact methods where there is one:
// positional ($1, $2, ...) SQL constants with argument builders beside them. GORM
// passes such a statement and its arguments through as they are, provided it holds no
// '@' (which would make GORM read it as named arguments).

// rollbackTimeout bounds the rollback of a batch that failed, which runs even when
// the caller's context ended.
const rollbackTimeout = 10 * time.Second

// pipelineRelayBatch is ApplyRelayBatch for a batch with facts.
func (s *Store) pipelineRelayBatch(ctx context.Context, b RelayBatch) (AppendResult, error) {
	conn, err := s.sqlDB.Conn(ctx)
	if err != nil {
		return AppendResult{}, mapError("take a connection", err)
	}
	defer conn.Close()
	var result AppendResult
	err = conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("a connection of %T, not pgx's", driverConn)
		}
		result, err = writeRelayBatch(ctx, c.Conn(), b)
		return err
	})
	return result, err
}

// writeRelayBatch runs the batch's transaction on c and rolls it back on any error.
// A connection that could not roll back is closed (pgx does so itself), and one given
// back inside a transaction anyway is discarded (pgx's database/sql driver checks), so
// the pool never hands out a connection in the middle of a batch.
func writeRelayBatch(ctx context.Context, c *pgx.Conn, b RelayBatch) (AppendResult, error) {
	var locked struct {
		found                 bool
		generation, outputSeq int64
	}
	begin := &pgx.Batch{}
	begin.BeginTx(pgx.TxOptions{})
	begin.Queue(lockLeaseAndOutputSeqSQL, b.SessionID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&locked.generation, &locked.outputSeq)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		locked.found = err == nil
		return mapError("lock reader lease and session", err)
	})
	results := c.SendBatch(ctx, begin)
	tx := results.Tx()
	err := results.Close()
	defer func() {
		// After a commit this does nothing; otherwise it ends what the batch began,
		// whatever ctx says now.
		rollbackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rollbackCtx)
	}()
	if err != nil {
		return AppendResult{}, mapError("begin relay batch", err)
	}
	if err := leaseFence(b.SessionID, locked.found, locked.generation, b.LeaseGeneration); err != nil {
		return AppendResult{}, err
	}
	var result AppendResult
	facts, err := queueFacts(b, locked.outputSeq, &result)
	if err != nil {
		return AppendResult{}, err
	}
	if err := c.SendBatch(ctx, facts).Close(); err != nil {
		return AppendResult{}, mapError("write relay batch", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return AppendResult{}, mapError("commit relay batch", err)
	}
	return result, nil
}

// queueFacts queues the batch's facts in order, each part numbered after outputSeq,
// then its parts with the cursor and the notification (or the cursor alone), and
// sets result as their answers are read.
func queueFacts(b RelayBatch, outputSeq int64, result *AppendResult) (*pgx.Batch, error) {
	*result = AppendResult{FirstSeq: outputSeq, LastSeq: outputSeq}
	facts := &pgx.Batch{}
	next := outputSeq + 1 // the seq the next part of this batch gets
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
	switch {
	case len(parts) > 0:
		args, err := appendPartsArgs(b, parts)
		if err != nil {
			return nil, err
		}
		facts.Queue(appendPartsOnlySQL, args...).Query(func(rows pgx.Rows) error {
			outputSeqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return mapError("append parts", err)
			}
			appended, err := appendedParts(b, len(parts), outputSeqs)
			result.FirstSeq, result.LastSeq, result.Parts = appended.FirstSeq, appended.LastSeq, appended.Parts
			return err
		})
	case b.Cursor != nil:
		cur := RuntimeCursor{SessionID: b.SessionID, Generation: b.Cursor.Generation, Position: b.Cursor.Position,
			ThroughSeq: outputSeq, LeaseGeneration: b.LeaseGeneration}
		facts.Queue(upsertCursorSQL, upsertCursorArgs(cur)...)
	}
	return facts, nil
}

// queueFact queues one fact's statement; nextSeq is the seq the next part will get.
// A part is written with the others, after every fact.
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
		facts.Queue(startResponseSQL, args...)
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
		facts.Queue(endResponseSQL, endResponseArgs(in)...).QueryRow(func(row pgx.Row) error {
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
	}
	return nil
}
