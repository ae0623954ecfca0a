package store

import "context"

// TableExists reports whether a table exists in the public schema (tests only).
func TableExists(ctx context.Context, s *Store, name string) (bool, error) {
	var ok bool
	err := s.conn(ctx).Raw("SELECT to_regclass(?) IS NOT NULL", "public."+name).Scan(&ok).Error
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
	group := make([]*partsCommit, len(batches))
	for i, b := range batches {
		parts, _ := partsOnly(b.Ops)
		group[i] = &partsCommit{batch: b, parts: parts}
	}
	if err := s.appendPartsGroup(ctx, group); err != nil {
		return nil, nil, err
	}
	res, errs := make([]AppendResult, len(group)), make([]error, len(group))
	for i, c := range group {
		res[i], errs[i] = c.res, c.err
	}
	return res, errs, nil
}
