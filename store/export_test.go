package store

import (
	"context"
	"sync/atomic"

	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"
)

// TableExists reports whether a table exists in the public schema (tests only).
func TableExists(ctx context.Context, s *Store, name string) (bool, error) {
	var ok bool
	err := scanRaw(s.conn(ctx), &ok, "SELECT to_regclass(?) IS NOT NULL", "public."+name)
	return ok, err
}

// ExecForTest runs a statement (tests only).
func ExecForTest(ctx context.Context, s *Store, sql string, args ...any) error {
	return s.conn(ctx).Exec(sql, args...).Error
}

// QueryRowForTest scans one row of a query into dest (tests only).
func QueryRowForTest(ctx context.Context, s *Store, sql string, arg any, dest ...any) error {
	return s.sqlDB.QueryRowContext(ctx, sql, arg).Scan(dest...)
}

// AppendPartsGroupForTest writes batches of parts alone in one group statement, as
// the group writer does, and returns each batch's result and error (tests only).
func AppendPartsGroupForTest(ctx context.Context, s *Store, batches []RelayBatch) ([]AppendResult, []error, error) {
	group := make([]*relayCommit, len(batches))
	for i, b := range batches {
		parts, _ := partsOnly(b.Ops)
		group[i] = &relayCommit{batch: b, parts: parts}
	}
	err := s.appendPartsGroup(ctx, group)
	return groupResults(group, err)
}

// WriteRelayBatchesForTest writes batches with facts in one group transaction and
// returns each batch's result and error, or the transaction's error (tests only).
func WriteRelayBatchesForTest(ctx context.Context, s *Store, batches []RelayBatch) ([]AppendResult, []error, error) {
	group := relayCommits(batches)
	err := s.pipelineRelayBatches(ctx, group)
	return groupResults(group, err)
}

// WriteFactsGroupForTest hands batches with facts to the facts group's writer as one
// group and returns each batch's result and error (tests only).
func WriteFactsGroupForTest(ctx context.Context, s *Store, batches []RelayBatch) ([]AppendResult, []error) {
	group := relayCommits(batches)
	s.writeFactsGroup(ctx, group)
	res, errs, _ := groupResults(group, nil)
	return res, errs
}

func relayCommits(batches []RelayBatch) []*relayCommit {
	group := make([]*relayCommit, len(batches))
	for i, b := range batches {
		group[i] = &relayCommit{batch: b}
	}
	return group
}

func groupResults(group []*relayCommit, err error) ([]AppendResult, []error, error) {
	if err != nil {
		return nil, nil, err
	}
	res, errs := make([]AppendResult, len(group)), make([]error, len(group))
	for i, c := range group {
		res[i], errs[i] = c.res, c.err
	}
	return res, errs, nil
}

// ScanRawForTest runs a raw statement through scanRaw (tests only).
func ScanRawForTest(ctx context.Context, s *Store, dest any, sql string, args ...any) error {
	return scanRaw(s.conn(ctx), dest, sql, args...)
}

// CountRenderedStatements sends s's statements to a logger that never renders them
// and counts the statements GORM renders with their arguments inlined anyway
// (Dialector.Explain) from then on (tests only; s must be the test's own).
func CountRenderedStatements(s *Store) *atomic.Int64 {
	n := new(atomic.Int64)
	s.db.Config.Logger = gormlogger.Discard
	s.db.Config.Dialector = renderCounter{Dialector: s.db.Config.Dialector, n: n}
	return n
}

type renderCounter struct {
	gorm.Dialector
	n *atomic.Int64
}

func (r renderCounter) Explain(sql string, vars ...any) string {
	r.n.Add(1)
	return r.Dialector.Explain(sql, vars...)
}
