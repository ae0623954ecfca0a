// Package devstack runs the infrastructure of `astrabox dev` on one machine: a
// managed PostgreSQL cluster from the system's binaries and a Temporal dev server
// from the pinned CLI, both keeping their data under the dev data folder so a
// second start reuses it. It also seeds a first user, RuntimeProfile and Agent
// and writes dev.env for the product documents' curl examples.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/pgcluster"
	"github.com/astrabox/astrabox/internal/temporaldev"
)

// Stack is the running infrastructure. Down stops what Up started, in reverse order.
type Stack struct {
	cfg      config.Dev
	log      *zap.Logger
	lock     *lockFile
	postgres *pgcluster.Cluster
	temporal *temporaldev.Server
	dataDir  string
}

// DatabaseName is the database the platform uses inside the managed cluster.
const DatabaseName = "astrabox"

// Up takes the data folder's lock, then starts PostgreSQL and Temporal. On any
// failure it stops what it had started before returning.
func Up(ctx context.Context, cfg config.Dev, log *zap.Logger) (_ *Stack, err error) {
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolve dev.data_dir: %w", err)
	}
	s := &Stack{cfg: cfg, log: log, dataDir: dataDir}
	if s.lock, err = acquireLock(dataDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Down(context.WithoutCancel(ctx)))
		}
	}()

	temporalBin, err := findTemporal(cfg.TemporalBin)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dataDir, "postgres"), 0o755); err != nil {
		return nil, fmt.Errorf("create postgres folder: %w", err)
	}
	s.postgres, err = pgcluster.Start(ctx, pgcluster.Options{
		DataDir:   filepath.Join(dataDir, "postgres", "data"),
		SocketDir: filepath.Join(dataDir, "postgres", "run"),
		LogFile:   filepath.Join(dataDir, "postgres", "postgres.log"),
		Port:      cfg.PostgresPort,
		// The lock above proves no other dev stack owns this folder, so a server
		// still running on it was left by a crashed run and is ours to reuse.
		ReuseRunning: true,
		Logger:       log.Named("postgres"),
	})
	if err != nil {
		return nil, fmt.Errorf("start postgresql: %w", err)
	}
	if err := s.postgres.CreateDatabase(ctx, DatabaseName); err != nil {
		return nil, fmt.Errorf("create database %s: %w", DatabaseName, err)
	}
	s.temporal, err = startTemporal(temporaldev.Options{
		Binary:  temporalBin,
		Port:    cfg.TemporalPort,
		UIPort:  cfg.TemporalUIPort,
		DBFile:  filepath.Join(dataDir, "temporal", "temporal.db"),
		LogFile: filepath.Join(dataDir, "temporal", "temporal.log"),
	}, log.Named("temporal"))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Database returns the configuration that reaches the managed cluster.
func (s *Stack) Database(base config.Database) config.Database {
	base.Host = "127.0.0.1"
	base.Port = s.postgres.Port()
	base.User = s.postgres.Superuser()
	base.Password = ""
	base.Name = DatabaseName
	base.SSLMode = "disable"
	return base
}

// Temporal returns the configuration that reaches the dev server.
func (s *Stack) Temporal(base config.Temporal) config.Temporal {
	base.Address = fmt.Sprintf("127.0.0.1:%d", s.cfg.TemporalPort)
	base.Namespace = "default"
	base.UIURL = fmt.Sprintf("http://127.0.0.1:%d", s.cfg.TemporalUIPort)
	base.TLS = config.TLS{}
	base.APIKey = ""
	return base
}

// TemporalFailed is closed when the supervised Temporal dev server could not be
// kept running (it exited again and again right after each restart); an
// occasional exit is not reported here: the server is restarted on the same
// database file and ports, and clients reconnect. TemporalFailure says why.
func (s *Stack) TemporalFailed() <-chan struct{} { return s.temporal.GaveUp() }

// TemporalFailure is the reason the dev server could not be kept running, once
// TemporalFailed is closed; nil before.
func (s *Stack) TemporalFailure() error { return s.temporal.Failure() }

// DataDir is the absolute data folder.
func (s *Stack) DataDir() string { return s.dataDir }

// Down stops Temporal, then PostgreSQL, then releases the lock. It is safe on a
// partly started stack.
func (s *Stack) Down(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	if s.temporal != nil {
		if err := s.temporal.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop temporal: %w", err))
		}
		s.temporal = nil
	}
	if s.postgres != nil {
		if err := s.postgres.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop postgresql: %w", err))
		}
		s.postgres = nil
	}
	if s.lock != nil {
		if err := s.lock.release(); err != nil {
			errs = append(errs, fmt.Errorf("release lock: %w", err))
		}
		s.lock = nil
	}
	return errors.Join(errs...)
}
