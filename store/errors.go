package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// PostgreSQL error codes the store maps to sentinels.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
	pgCheckViolation      = "23514"

	// pgClassConnection is SQLSTATE class 08, connection exceptions.
	pgClassConnection = "08"
	// pgAdminShutdown, pgCrashShutdown and pgCannotConnectNow are sent while the
	// server shuts down, recovers from a crash or is still starting.
	pgAdminShutdown    = "57P01"
	pgCrashShutdown    = "57P02"
	pgCannotConnectNow = "57P03"
	// pgTooManyConnections refuses a connection while the server is full.
	pgTooManyConnections = "53300"
)

// sqlDBClosed is database/sql's text for a query on a closed pool; the package
// keeps its error unexported, so the text is the only thing to match.
const sqlDBClosed = "sql: database is closed"

// redacted replaces a password wherever a DSN is shown.
const redacted = "xxxxx"

// RedactDSN returns dsn with its password replaced, for logs and error messages. It
// handles URLs (postgres://user:pw@host/db) and key=value strings (password=pw).
func RedactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", redacted)
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	fields := strings.Fields(dsn)
	for i, f := range fields {
		if k, _, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			fields[i] = k + "=" + redacted
		}
	}
	return strings.Join(fields, " ")
}

// redactError removes dsn's password from err's text, whatever layer produced it.
func redactError(err error, dsn string) error {
	if err == nil {
		return nil
	}
	pw := passwordOf(dsn)
	if pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), pw, redacted), err: err}
}

// redactedError keeps the chain for errors.Is while hiding the password in its text.
type redactedError struct {
	msg string
	err error
}

// Error is the message with the password replaced.
func (e *redactedError) Error() string { return e.msg }

// Unwrap keeps errors.Is and errors.As working through the redaction.
func (e *redactedError) Unwrap() error { return e.err }

func passwordOf(dsn string) string {
	if cfg, err := pgx.ParseConfig(dsn); err == nil {
		return cfg.Password
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		pw, _ := u.User.Password()
		return pw
	}
	return ""
}

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// isUniqueViolation reports whether err is a unique violation of the named constraint
// or unique index, so "already exists" is said only where it is true.
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation && pgErr.ConstraintName == constraint
}

// mapError turns driver errors into the package's sentinels, wrapped with what.
func mapError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	case pgCode(err) == pgUniqueViolation:
		return fmt.Errorf("%s: %w: %w", what, ErrDuplicate, err)
	case pgCode(err) == pgForeignKeyViolation:
		return fmt.Errorf("%s: referenced row %w: %w", what, ErrNotFound, err)
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}

func isNotFoundErr(err error) bool { return errors.Is(err, ErrNotFound) }

// IsUnavailable reports whether err says the database could not be reached at
// all, rather than that it refused a statement: a failed connection (including a
// deadline that ended while connecting), a server shutting down, restarting or
// full, a connection lost before the statement was sent or while it ran, or a
// closed pool. Callers answer such errors with "try again later"; a constraint
// or query error is never one of them.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr *net.OpError
	switch code := pgCode(err); {
	case code != "":
		return strings.HasPrefix(code, pgClassConnection) || code == pgAdminShutdown ||
			code == pgCrashShutdown || code == pgCannotConnectNow || code == pgTooManyConnections
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case pgconn.SafeToRetry(err) && !errors.Is(err, context.Canceled):
		// pgx marks errors that happened before the statement reached the server.
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == sqlDBClosed {
			return true
		}
	}
	return false
}
