package store

import "gorm.io/gorm"

// scanRaw runs a raw statement and scans its rows into dest as GORM's Scan does: a
// struct or a scalar takes the first row, a slice every row, and no row leaves dest
// as it was. GORM's Scan wraps the statement in a recorder that renders it with its
// arguments inlined (gorm's ExplainSQL: each argument escaped, regular expressions
// over the whole text) whether or not anything logs it; for a batch of parts, whose
// frames are an argument, that cost the worker more than scanning the rows. Here the
// statement goes to the store's logger, which renders it only to log it.
func scanRaw(db *gorm.DB, dest any, sql string, args ...any) error {
	stmt := db.Raw(sql, args...)
	rows, err := stmt.Rows()
	if err != nil {
		return err
	}
	if rows.Next() {
		err = stmt.ScanRows(rows, dest)
	} else {
		err = rows.Err()
	}
	if closeErr := rows.Close(); err == nil {
		err = closeErr
	}
	return err
}
