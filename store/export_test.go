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
