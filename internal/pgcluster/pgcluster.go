// Package pgcluster runs a local PostgreSQL cluster from the system's server binaries:
// it initialises a data folder once, starts and stops the server with pg_ctl, and
// creates databases. The dev stack and the test helpers use it; production points
// AstraBox at an external PostgreSQL instead.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/freeport"
)

// DefaultSuperuser is the cluster's superuser name when Options leaves it empty.
const DefaultSuperuser = "astrabox"

// duplicateDatabase is PostgreSQL's SQLSTATE for CREATE DATABASE of an existing name.
const duplicateDatabase = "42P04"

// defaultStartTimeout bounds start-up when the caller's context has no deadline.
const defaultStartTimeout = 60 * time.Second

// Options configures a managed cluster.
type Options struct {
	// DataDir is the cluster's data folder; it is initialised when it holds no cluster yet
	// and reused otherwise.
	DataDir string
	// SocketDir holds the server's unix socket; default: "run" beside DataDir. Keep the
	// path short: a socket path is limited to 107 bytes.
	SocketDir string
	// Port is the TCP port on 127.0.0.1 (and the socket's number). Required.
	Port int
	// Superuser is the role initdb creates; default DefaultSuperuser. Authentication is
	// trust, so the cluster is for one machine's development and tests only.
	Superuser string
	// LogFile receives the server's log; default: "postgres.log" beside DataDir.
	LogFile string
	// BinDir holds initdb, pg_ctl and postgres; default: FindBinDir.
	BinDir string
	// Settings are extra server settings passed as -c name=value (for example fsync=off
	// for throwaway test clusters).
	Settings map[string]string
	// ReuseRunning accepts a server already running on DataDir with the same port
	// instead of failing with AlreadyRunningError.
	ReuseRunning bool
	// Logger receives progress messages; default: no logging.
	Logger *zap.Logger
}

// Cluster is a started local PostgreSQL server.
type Cluster struct {
	opts    Options
	account account
	logger  *zap.Logger
}

// AlreadyRunningError reports a server already running on the data folder.
type AlreadyRunningError struct {
	DataDir string
	PID     int
	Port    int
}

// Error explains which server holds the data folder.
func (e *AlreadyRunningError) Error() string {
	return fmt.Sprintf("a PostgreSQL server (pid %d, port %d) is already running on data folder %s: stop it (pg_ctl -D %s stop) or reuse it", e.PID, e.Port, e.DataDir, e.DataDir)
}

// PortInUseError reports that the cluster's TCP port is taken by another program.
type PortInUseError struct {
	Port int
	Err  error
}

// Error names the taken port.
func (e *PortInUseError) Error() string {
	return fmt.Sprintf("port %d on 127.0.0.1 is already in use (choose another port for the PostgreSQL cluster): %v", e.Port, e.Err)
}

// Unwrap returns the listen error that showed the port is taken.
func (e *PortInUseError) Unwrap() error { return e.Err }

// Start initialises the data folder if needed, starts the server and waits until it
// accepts connections or ctx ends (60 s when ctx has no deadline).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	acct, err := serverAccount()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, account: acct, logger: opts.Logger}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}

	if running, err := c.runningServer(); err != nil {
		return nil, err
	} else if running != nil {
		if opts.ReuseRunning && running.Port == opts.Port {
			c.logger.Info("reusing running postgresql", zap.String("data_dir", opts.DataDir), zap.Int("pid", running.PID))
			return c, c.waitReady(ctx)
		}
		return nil, running
	}
	if err := checkPortFree(opts.Port); err != nil {
		return nil, err
	}
	if err := c.prepareDirs(); err != nil {
		return nil, err
	}
	if err := c.initdb(ctx); err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
	}
	c.logger.Info("postgresql started", zap.String("data_dir", opts.DataDir), zap.Int("port", opts.Port))
	return c, nil
}

// freePortAttempts bounds StartOnFreePort's retries when the reserved port is taken.
const freePortAttempts = 5

// StartOnFreePort starts the cluster as Start does on a port it reserves, ignoring
// opts.Port. Other processes on the machine (parallel test binaries, their servers)
// can still take a reserved port before the server binds it, so a port found in use
// is replaced by a new one a few times before giving up.
func StartOnFreePort(ctx context.Context, opts Options) (*Cluster, error) {
	var lastErr error
	for range freePortAttempts {
		port, err := freeport.Reserve()
		if err != nil {
			return nil, err
		}
		opts.Port = port
		c, err := Start(ctx, opts)
		var inUse *PortInUseError
		if !errors.As(err, &inUse) {
			return c, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no free port after %d attempts: %w", freePortAttempts, lastErr)
}

func withDefaults(opts Options) (Options, error) {
	if opts.DataDir == "" {
		return opts, errors.New("pgcluster: DataDir is required")
	}
	if opts.Port <= 0 || opts.Port > 65535 {
		return opts, fmt.Errorf("pgcluster: invalid port %d", opts.Port)
	}
	abs, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return opts, fmt.Errorf("resolve data folder: %w", err)
	}
	opts.DataDir = abs
	if opts.SocketDir == "" {
		opts.SocketDir = filepath.Join(filepath.Dir(abs), "run")
	}
	if opts.LogFile == "" {
		opts.LogFile = filepath.Join(filepath.Dir(abs), "postgres.log")
	}
	if opts.Superuser == "" {
		opts.Superuser = DefaultSuperuser
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.BinDir == "" {
		if opts.BinDir, err = FindBinDir(); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// Port is the cluster's TCP port.
func (c *Cluster) Port() int { return c.opts.Port }

// Superuser is the cluster's superuser role.
func (c *Cluster) Superuser() string { return c.opts.Superuser }

// DataDir is the cluster's data folder.
func (c *Cluster) DataDir() string { return c.opts.DataDir }

// DSN is a connection URL for database db as the superuser over TCP on 127.0.0.1.
func (c *Cluster) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(c.opts.Superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.opts.Port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase creates database name unless it exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect to cluster: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		// Another process may have created it between the check and the create.
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == duplicateDatabase {
			return nil
		}
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// Stop shuts the server down in fast mode (open transactions roll back) and waits.
func (c *Cluster) Stop(ctx context.Context) error {
	args := []string{"stop", "-D", c.opts.DataDir, "-m", "fast", "-w", "-t", strconv.Itoa(secondsLeft(ctx))}
	if out, err := c.run(ctx, "pg_ctl", args...); err != nil {
		return fmt.Errorf("stop postgresql on %s: %w: %s", c.opts.DataDir, err, out)
	}
	c.logger.Info("postgresql stopped", zap.String("data_dir", c.opts.DataDir))
	return nil
}

func (c *Cluster) prepareDirs() error {
	if err := c.account.checkTraversable(c.opts.DataDir); err != nil {
		return err
	}
	if err := c.account.checkTraversable(c.opts.SocketDir); err != nil {
		return err
	}
	if err := c.account.ensureOwnedDir(c.opts.DataDir); err != nil {
		return err
	}
	if err := c.account.ensureOwnedDir(c.opts.SocketDir); err != nil {
		return err
	}
	return c.account.ensureOwnedFile(c.opts.LogFile)
}

// initdb initialises the data folder unless it already holds a cluster.
func (c *Cluster) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.opts.DataDir, "PG_VERSION")); err == nil {
		return nil
	}
	args := []string{"-D", c.opts.DataDir, "-U", c.opts.Superuser, "-A", "trust", "-E", "UTF8", "--no-locale", "--no-instructions"}
	if out, err := c.run(ctx, "initdb", args...); err != nil {
		return fmt.Errorf("initdb %s: %w: %s", c.opts.DataDir, err, out)
	}
	c.logger.Info("postgresql data folder initialised", zap.String("data_dir", c.opts.DataDir))
	return nil
}

func (c *Cluster) start(ctx context.Context) error {
	serverArgs := []string{
		"-p", strconv.Itoa(c.opts.Port),
		"-k", c.opts.SocketDir,
		"-c", "listen_addresses=127.0.0.1",
	}
	names := make([]string, 0, len(c.opts.Settings))
	for name := range c.opts.Settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		serverArgs = append(serverArgs, "-c", name+"="+c.opts.Settings[name])
	}
	args := []string{"start", "-D", c.opts.DataDir, "-l", c.opts.LogFile, "-w", "-t", strconv.Itoa(secondsLeft(ctx)), "-o", strings.Join(serverArgs, " ")}
	if out, err := c.run(ctx, "pg_ctl", args...); err != nil {
		return fmt.Errorf("start postgresql on %s (port %d): %w: %s%s", c.opts.DataDir, c.opts.Port, err, out, logTail(c.opts.LogFile))
	}
	return nil
}

// waitReady polls until a connection succeeds; pg_ctl -w already waited, so this
// normally returns at once, and it covers a reused server still starting.
func (c *Cluster) waitReady(ctx context.Context) error {
	var lastErr error
	for {
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgresql on port %d not ready: %w (last error: %v)", c.opts.Port, ctx.Err(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) run(ctx context.Context, program string, args ...string) (string, error) {
	cmd := c.account.command(filepath.Join(c.opts.BinDir, program), args...)
	out, err := commandOutput(ctx, cmd)
	return strings.TrimSpace(out), err
}

func checkPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return &PortInUseError{Port: port, Err: err}
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("release probe of port %d: %w", port, err)
	}
	return nil
}

// secondsLeft converts ctx's deadline into pg_ctl's -t seconds (at least 1).
func secondsLeft(ctx context.Context) int {
	deadline, ok := ctx.Deadline()
	if !ok {
		return int(defaultStartTimeout / time.Second)
	}
	s := int(time.Until(deadline) / time.Second)
	if s < 1 {
		return 1
	}
	return s
}

// logTail returns the end of the server log to explain a failed start.
func logTail(file string) string {
	data, err := os.ReadFile(file)
	if err != nil || len(data) == 0 {
		return ""
	}
	const max = 2000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return "\nserver log (" + file + "):\n" + strings.TrimSpace(string(data))
}
