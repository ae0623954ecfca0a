package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
)

// TestIsUnavailable tells an unreachable database from one that refused a
// statement: only the first answers "try again later".
func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	unavailable := map[string]error{
		"connect error":         &pgconn.ConnectError{},
		"admin shutdown":        &pgconn.PgError{Code: pgAdminShutdown, Message: "terminating connection due to administrator command"},
		"shutting down":         &pgconn.PgError{Code: pgCannotConnectNow, Message: "the database system is shutting down"},
		"connection failure":    &pgconn.PgError{Code: "08006"},
		"connection lost":       fmt.Errorf("get session: %w", io.ErrUnexpectedEOF),
		"connection refused":    &net.OpError{Op: "dial", Err: errors.New("connection refused")},
		"closed pool":           fmt.Errorf("get session: %w", errors.New(sqlDBClosed)),
		"wrapped by the mapper": mapError("get session", &pgconn.PgError{Code: pgCrashShutdown}),
	}
	for name, err := range unavailable {
		assert.True(t, IsUnavailable(err), name)
	}
	available := map[string]error{
		"nil":               nil,
		"unique violation":  mapError("insert agent", &pgconn.PgError{Code: pgUniqueViolation}),
		"syntax error":      &pgconn.PgError{Code: "42601"},
		"not found":         fmt.Errorf("get session: %w", ErrNotFound),
		"cancelled request": fmt.Errorf("get session: %w", context.Canceled),
	}
	for name, err := range available {
		assert.False(t, IsUnavailable(err), name)
	}
}
