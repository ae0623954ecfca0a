package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/store/migrations"
)

// The runner is the store's own (about 200 lines) rather than golang-migrate or goose:
// it needs only up/down/status over an embed.FS, one transaction per migration
// (PostgreSQL's DDL is transactional, so there is no "dirty" state to repair), and a
// session advisory lock so two processes starting together migrate once. Both
// libraries would add a second driver stack beside pgx for that.

// migrationLockKey is the pg_advisory_lock key that serialises migration runs
// ("astrabox" in ASCII).
const migrationLockKey int64 = 0x61737472_61626f78

var migrationFileName = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.(up|down)\.sql$`)

// Migration is one versioned schema change read from NNNN_name.up.sql and
// NNNN_name.down.sql.
type Migration struct {
	Version  int64
	Name     string
	Up       string
	Down     string
	Checksum string
}

// MigrationStatus is one migration as the database and the binary know it.
type MigrationStatus struct {
	Version   int64
	Name      string
	Applied   bool
	AppliedAt *time.Time
	// Modified: the applied migration's up SQL differs from the binary's copy.
	Modified bool
	// Missing: applied in the database but unknown to this binary (a newer binary ran).
	Missing bool
}

// Migrator applies a set of migrations to the Store's database.
type Migrator struct {
	db         *sql.DB
	logger     *zap.Logger
	migrations []Migration
}

// Migrator returns the runner for the migrations embedded in the binary.
func (s *Store) Migrator() (*Migrator, error) {
	return NewMigrator(s, migrations.FS)
}

// NewMigrator returns a runner for the migrations in fsys (tests pass their own).
func NewMigrator(s *Store, fsys fs.FS) (*Migrator, error) {
	ms, err := LoadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	return &Migrator{db: s.sqlDB, logger: s.logger, migrations: ms}, nil
}

// MigrateUp applies every pending embedded migration and returns the versions applied.
func (s *Store) MigrateUp(ctx context.Context) ([]int64, error) {
	m, err := s.Migrator()
	if err != nil {
		return nil, err
	}
	return m.Up(ctx)
}

// MigrateDown reverts the newest steps applied embedded migrations.
func (s *Store) MigrateDown(ctx context.Context, steps int) ([]int64, error) {
	m, err := s.Migrator()
	if err != nil {
		return nil, err
	}
	return m.Down(ctx, steps)
}

// MigrationStatus lists every embedded or applied migration in version order.
func (s *Store) MigrationStatus(ctx context.Context) ([]MigrationStatus, error) {
	m, err := s.Migrator()
	if err != nil {
		return nil, err
	}
	return m.Status(ctx)
}

// LoadMigrations reads and pairs the migration files in fsys, sorted by version.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int64]*Migration{}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "" {
			continue
		}
		match := migrationFileName.FindStringSubmatch(e.Name())
		if match == nil {
			if len(e.Name()) > 4 && e.Name()[len(e.Name())-4:] == ".sql" {
				return nil, fmt.Errorf("migration file %s: want NNNN_name.up.sql or NNNN_name.down.sql", e.Name())
			}
			continue
		}
		version, err := strconv.ParseInt(match[1], 10, 64)
		if err != nil || version <= 0 {
			return nil, fmt.Errorf("migration file %s: bad version", e.Name())
		}
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		m := byVersion[version]
		if m == nil {
			m = &Migration{Version: version, Name: match[2]}
			byVersion[version] = m
		} else if m.Name != match[2] {
			return nil, fmt.Errorf("migration %d has two names: %s and %s", version, m.Name, match[2])
		}
		if match[3] == "up" {
			m.Up = string(body)
			sum := sha256.Sum256(body)
			m.Checksum = hex.EncodeToString(sum[:])
		} else {
			m.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %d_%s needs both an up and a down file", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Up applies every pending migration in version order, each in its own transaction.
func (m *Migrator) Up(ctx context.Context) ([]int64, error) {
	var applied []int64
	err := m.locked(ctx, func(conn *sql.Conn, done map[int64]appliedRow) error {
		for _, mig := range m.migrations {
			if row, ok := done[mig.Version]; ok {
				if row.checksum != mig.Checksum {
					m.logger.Warn("applied migration differs from the binary's copy", zap.Int64("version", mig.Version), zap.String("name", mig.Name))
				}
				continue
			}
			if err := m.apply(ctx, conn, mig, true); err != nil {
				return err
			}
			applied = append(applied, mig.Version)
		}
		return nil
	})
	return applied, err
}

// Down reverts the newest steps applied migrations, newest first.
func (m *Migrator) Down(ctx context.Context, steps int) ([]int64, error) {
	if steps < 1 {
		return nil, fmt.Errorf("migrate down: steps must be at least 1, got %d", steps)
	}
	var reverted []int64
	err := m.locked(ctx, func(conn *sql.Conn, done map[int64]appliedRow) error {
		for i := len(m.migrations) - 1; i >= 0 && len(reverted) < steps; i-- {
			mig := m.migrations[i]
			if _, ok := done[mig.Version]; !ok {
				continue
			}
			if err := m.apply(ctx, conn, mig, false); err != nil {
				return err
			}
			reverted = append(reverted, mig.Version)
		}
		return nil
	})
	return reverted, err
}

// Status lists the binary's migrations and any applied ones it does not know.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	var out []MigrationStatus
	err := m.locked(ctx, func(_ *sql.Conn, done map[int64]appliedRow) error {
		for _, mig := range m.migrations {
			st := MigrationStatus{Version: mig.Version, Name: mig.Name}
			if row, ok := done[mig.Version]; ok {
				at := row.appliedAt
				st.Applied, st.AppliedAt, st.Modified = true, &at, row.checksum != mig.Checksum
				delete(done, mig.Version)
			}
			out = append(out, st)
		}
		for version, row := range done {
			at := row.appliedAt
			out = append(out, MigrationStatus{Version: version, Name: row.name, Applied: true, AppliedAt: &at, Missing: true})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
		return nil
	})
	return out, err
}

type appliedRow struct {
	name      string
	checksum  string
	appliedAt time.Time
}

// locked runs fn on one connection holding the migration advisory lock, with the
// schema_migrations table present and its rows read.
func (m *Migrator) locked(ctx context.Context, fn func(*sql.Conn, map[int64]appliedRow) error) (err error) {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrations: get connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return fmt.Errorf("migrations: take advisory lock: %w", err)
	}
	defer func() {
		// Unlock even when ctx has ended; closing the connection would release it too.
		_, unlockErr := conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockKey)
		if unlockErr != nil {
			err = errors.Join(err, fmt.Errorf("migrations: release advisory lock: %w", unlockErr))
		}
	}()
	const createTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    bigint PRIMARY KEY,
		name       text NOT NULL,
		checksum   text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`
	if _, err := conn.ExecContext(ctx, createTable); err != nil {
		return fmt.Errorf("migrations: create schema_migrations: %w", err)
	}
	rows, err := conn.QueryContext(ctx, "SELECT version, name, checksum, applied_at FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("migrations: read schema_migrations: %w", err)
	}
	done := map[int64]appliedRow{}
	for rows.Next() {
		var v int64
		var r appliedRow
		if err := rows.Scan(&v, &r.name, &r.checksum, &r.appliedAt); err != nil {
			rows.Close()
			return fmt.Errorf("migrations: scan schema_migrations: %w", err)
		}
		done[v] = r
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("migrations: read schema_migrations: %w", err)
	}
	return fn(conn, done)
}

// apply runs one migration's up or down SQL and records it, in one transaction.
func (m *Migrator) apply(ctx context.Context, conn *sql.Conn, mig Migration, up bool) error {
	direction, body := "up", mig.Up
	if !up {
		direction, body = "down", mig.Down
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %d_%s %s: begin: %w", mig.Version, mig.Name, direction, err)
	}
	defer func() { _ = tx.Rollback() }()
	// No arguments: pgx sends the file with the simple protocol, which allows many
	// statements in one call.
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return fmt.Errorf("migration %d_%s %s: %w", mig.Version, mig.Name, direction, err)
	}
	if up {
		_, err = tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)", mig.Version, mig.Name, mig.Checksum)
	} else {
		_, err = tx.ExecContext(ctx, "DELETE FROM schema_migrations WHERE version = $1", mig.Version)
	}
	if err != nil {
		return fmt.Errorf("migration %d_%s %s: record: %w", mig.Version, mig.Name, direction, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %d_%s %s: commit: %w", mig.Version, mig.Name, direction, err)
	}
	m.logger.Info("migration applied", zap.Int64("version", mig.Version), zap.String("name", mig.Name), zap.String("direction", direction))
	return nil
}
