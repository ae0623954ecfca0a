// Package store owns AstraBox's PostgreSQL database: the schema (versioned SQL
// migrations embedded in the binary), and every query, as named methods on Store.
// GORM on the pgx driver runs them; nothing outside this package builds SQL.
//
// Postgres is the truth: idempotent writes rest on UNIQUE constraints and ON CONFLICT,
// state that moves is read under row locks, and output notifications (pg_notify) are
// sent in the same transaction as the rows they announce.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/zap"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Sentinel errors; check them with errors.Is.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrVersionConflict: an optimistic update found another version than expected.
	ErrVersionConflict = errors.New("version conflict")
	// ErrLeaseLost: the caller's reader lease generation is no longer current, so its
	// write was refused and nothing was written.
	ErrLeaseLost = errors.New("reader lease lost")
	// ErrSessionLogBehind: the mirror of a program's session log holds fewer entries
	// of a stream than a Relay batch's mirror counted (rows gone since), so the batch
	// was refused and nothing of it written; the log is mirrored whole on its own.
	ErrSessionLogBehind = errors.New("session log mirror behind its cursor")
	// ErrLeaseHeld: another holder's reader lease has not expired yet.
	ErrLeaseHeld = errors.New("reader lease held by another reader")
	// ErrDuplicate: a unique constraint refused the write.
	ErrDuplicate = errors.New("duplicate")
	// ErrInteractionNotOpen: the interaction was answered, withdrawn or expired, or an
	// answer to it is already saved and on its way to the runtime.
	ErrInteractionNotOpen = errors.New("interaction not open")
	// ErrSessionBusy: the Agent program reports it is working, so the lifecycle
	// operation is refused.
	ErrSessionBusy = errors.New("session busy")
	// ErrInvalidTitle: a title is empty after normalisation or longer than 200
	// characters.
	ErrInvalidTitle = errors.New("invalid title")
	// ErrWrongLifecycle: the Session's lifecycle does not allow the operation, e.g.
	// renaming a deleted Session or recovering one that is not terminated.
	ErrWrongLifecycle = errors.New("wrong session lifecycle")
	// ErrLiveBoxLimit: the user already has as many Sessions with a live box as
	// the platform allows, so a new Session is refused.
	ErrLiveBoxLimit = errors.New("live box limit reached")
)

// Store is the database handle. A Store from InTx is scoped to one transaction.
type Store struct {
	db     *gorm.DB
	sqlDB  *sql.DB
	logger *zap.Logger
	// sealer seals secret values; nil when no secrets key is configured.
	sealer *sealer
	inTx   bool
	// parts groups concurrent Relays' batches of parts alone into one statement,
	// facts their batches with facts into one transaction.
	parts, facts *relayGroup
}

// Options tunes Open; the zero value is usable.
type Options struct {
	// ConnectTimeout bounds the retries of the first connection when ctx has no sooner
	// deadline; default 30 s.
	ConnectTimeout time.Duration
	// MaxOpenConns caps the pool; default 20.
	MaxOpenConns int
	// SecretsKey is the 32-byte AES-256-GCM key sealing stored secret values
	// (secrets.key); empty refuses to store or read them with ErrNoSecretsKey.
	SecretsKey []byte
	// Tracer, when set, sees every statement the pool's connections run (BEGIN and
	// COMMIT included); benchmarks count round trips with it.
	Tracer pgx.QueryTracer
}

// Open connects to the database at dsn, retrying until the server answers or
// ConnectTimeout (or ctx) ends; the error names the DSN without its password.
func Open(ctx context.Context, dsn string, logger *zap.Logger, opts ...Options) (*Store, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 20
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	seal, err := newSealer(o.SecretsKey)
	if err != nil {
		return nil, err
	}
	safeDSN := RedactDSN(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, redactError(fmt.Errorf("parse database url %s: %w", safeDSN, err), dsn)
	}
	if o.Tracer != nil {
		cfg.Tracer = o.Tracer
	}
	sqlDB := stdlib.OpenDB(*cfg)
	sqlDB.SetMaxOpenConns(o.MaxOpenConns)
	sqlDB.SetMaxIdleConns(o.MaxOpenConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)

	if err := pingWithRetry(ctx, sqlDB, o.ConnectTimeout, logger, safeDSN); err != nil {
		_ = sqlDB.Close()
		return nil, redactError(err, dsn)
	}
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{
		Logger:                 newGormLogger(logger),
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, redactError(fmt.Errorf("open gorm on %s: %w", safeDSN, err), dsn)
	}
	s := &Store{db: db, sqlDB: sqlDB, logger: logger, sealer: seal}
	s.parts = &relayGroup{write: s.writePartsGroup, writers: groupWriters}
	s.facts = &relayGroup{write: s.writeFactsGroup, writers: groupWriters}
	return s, nil
}

// pingWithRetry waits for the server with a bounded exponential backoff: a database
// that is still starting (the dev stack, a fresh container) is not an error yet.
func pingWithRetry(ctx context.Context, db *sql.DB, timeout time.Duration, logger *zap.Logger, safeDSN string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := db.PingContext(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("connect to %s: gave up after %d attempts: %w", safeDSN, attempt, err)
		}
		logger.Debug("database not reachable yet", zap.String("dsn", safeDSN), zap.Int("attempt", attempt), zap.Error(err))
		select {
		case <-ctx.Done():
			return fmt.Errorf("connect to %s: gave up after %d attempts: %w", safeDSN, attempt, err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// Close closes the pool. It is a no-op on a transaction-scoped Store.
func (s *Store) Close() error {
	if s.inTx {
		return nil
	}
	if err := s.sqlDB.Close(); err != nil {
		return fmt.Errorf("close database: %w", err)
	}
	return nil
}

// Ping checks that the database answers (used by the health routes).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.WithContext(ctx).Exec("SELECT 1").Error; err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// Pool is the connection pool, for its statistics (the go_sql_* series); statements
// go through the Store's methods.
func (s *Store) Pool() *sql.DB { return s.sqlDB }

// InTx runs fn in one transaction and commits when fn returns nil. fn receives a Store
// scoped to the transaction and must use only it, never the outer Store. Nested
// calls on a transaction-scoped Store run inside a savepoint.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return s.db.WithContext(ctx).Transaction(func(gtx *gorm.DB) error {
		return fn(&Store{db: gtx, sqlDB: s.sqlDB, logger: s.logger, sealer: s.sealer, inTx: true})
	})
}

// InSnapshot runs fn's reads in one read-only transaction that sees the database as
// it was at its first read (REPEATABLE READ), for a view assembled from several
// queries that must agree with one another, such as a page of messages and the output
// position it was read at. Inside a transaction it runs in a savepoint of that one,
// which sees what that transaction sees.
func (s *Store) InSnapshot(ctx context.Context, fn func(tx *Store) error) error {
	return s.db.WithContext(ctx).Transaction(func(gtx *gorm.DB) error {
		return fn(&Store{db: gtx, sqlDB: s.sqlDB, logger: s.logger, sealer: s.sealer, inTx: true})
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
}

// conn returns the GORM handle bound to ctx; every query starts here.
func (s *Store) conn(ctx context.Context) *gorm.DB {
	return s.db.WithContext(ctx)
}

// gormExpr is a SQL expression used as a value in updates.
func gormExpr(sql string, args ...any) clause.Expr {
	return gorm.Expr(sql, args...)
}
