package store

import (
	"context"
	"database/sql"
	"time"
)

// markWorkerAliveSQL records the worker alive now, with the server process of the
// connection it runs on.
const markWorkerAliveSQL = `
INSERT INTO workers AS w (host_task_queue, backend_pid, backend_start)
SELECT $1, a.pid, a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()
ON CONFLICT (host_task_queue) DO UPDATE
SET seen_at = now(), backend_pid = excluded.backend_pid, backend_start = excluded.backend_start`

// WorkerBeat marks one worker alive, every call, through a connection of its own that
// it holds out of the pool for the worker's life. The connection's server process then
// lives exactly as long as the worker process: when the process dies, its operating
// system closes the connection and the server process ends at once, so
// ClaimDeadWorkers tells a dead worker by its server process being gone, long before
// its silence would. (A machine that loses power closes nothing; then the silence
// tells.) A WorkerBeat is used by one goroutine.
type WorkerBeat struct {
	db            *sql.DB
	hostTaskQueue string
	conn          *sql.Conn
}

// NewWorkerBeat returns the beat of the worker of hostTaskQueue; it connects on its
// first Mark.
func (s *Store) NewWorkerBeat(hostTaskQueue string) *WorkerBeat {
	return &WorkerBeat{db: s.sqlDB, hostTaskQueue: hostTaskQueue}
}

// Mark records the worker alive now. A failed mark gives the connection back (the
// pool discards a broken one); the next takes one again and records its server
// process.
func (b *WorkerBeat) Mark(ctx context.Context) error {
	if b.conn == nil {
		conn, err := b.db.Conn(ctx)
		if err != nil {
			return mapError("mark worker alive: connect", err)
		}
		b.conn = conn
	}
	if _, err := b.conn.ExecContext(ctx, markWorkerAliveSQL, b.hostTaskQueue); err != nil {
		_ = b.Close()
		return mapError("mark worker alive", err)
	}
	return nil
}

// Close gives the connection back. The worker's row stays: the other workers claim it
// once it is silent, and fail whatever Relay was left on it.
func (b *WorkerBeat) Close() error {
	if b.conn == nil {
		return nil
	}
	err := b.conn.Close()
	b.conn = nil
	return err
}

// DeadWorker is a worker that stopped marking itself alive, and the Relays that still
// held their Sessions' leases on it.
type DeadWorker struct {
	HostTaskQueue string
	SeenAt        time.Time
	Relays        []OrphanedRelay
}

// OrphanedRelay is a Relay whose worker died while it held its Session's lease.
type OrphanedRelay struct {
	SessionID  string
	Generation int64
	RelayActivity
}

// claimDeadWorkersSQL removes the rows of the dead workers, those silent for $1
// seconds, and those silent for $2 whose beat's server process is gone, and returns
// each with the leases its Relays still hold (a Session's newer reader elsewhere has
// replaced the holder) and held at its last beat: a lease that ran out before it
// belongs to a Relay that had ended, such as a released Session's last one. Deleting
// is the claim: of two workers claiming at once, the second waits on the row lock and
// then finds the row gone.
const claimDeadWorkersSQL = `
WITH gone AS (
	DELETE FROM workers w
	WHERE w.seen_at < now() - make_interval(secs => $1)
	   OR (w.seen_at < now() - make_interval(secs => $2) AND NOT EXISTS (
		SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.backend_pid AND a.backend_start = w.backend_start))
	RETURNING host_task_queue, seen_at
)
SELECT g.host_task_queue AS dead_queue, g.seen_at, COALESCE(l.session_id::text, '') AS session_id,
	COALESCE(l.generation, 0) AS generation, COALESCE(l.workflow_id, '') AS workflow_id,
	COALESCE(l.workflow_run_id, '') AS workflow_run_id, COALESCE(l.activity_id, '') AS activity_id
FROM gone g LEFT JOIN reader_leases l ON l.host_task_queue = g.host_task_queue
	AND l.activity_id IS NOT NULL AND l.expires_at > g.seen_at
ORDER BY g.host_task_queue, l.session_id`

// ClaimDeadWorkers takes the dead workers, each with the Relays that held leases on
// it, and forgets them: each dead worker is returned to one caller once. A worker is
// dead when it has not marked itself alive for silence, or for grace while the server
// process of its beat's connection is gone. The caller fails those Relays so their
// Sessions recover without waiting for Temporal to time them out.
func (s *Store) ClaimDeadWorkers(ctx context.Context, silence, grace time.Duration) ([]DeadWorker, error) {
	var rows []deadWorkerRow
	if err := scanRaw(s.conn(ctx), &rows, claimDeadWorkersSQL, silence.Seconds(), grace.Seconds()); err != nil {
		return nil, mapError("claim dead workers", err)
	}
	var dead []DeadWorker
	for _, r := range rows {
		if len(dead) == 0 || dead[len(dead)-1].HostTaskQueue != r.DeadQueue {
			dead = append(dead, DeadWorker{HostTaskQueue: r.DeadQueue, SeenAt: r.SeenAt})
		}
		if r.ActivityID == "" {
			continue // a dead worker that held no Relay
		}
		w := &dead[len(dead)-1]
		w.Relays = append(w.Relays, OrphanedRelay{SessionID: r.SessionID, Generation: r.Generation, RelayActivity: RelayActivity{
			HostTaskQueue: r.DeadQueue, WorkflowID: r.WorkflowID, RunID: r.WorkflowRunID, ActivityID: r.ActivityID,
		}})
	}
	return dead, nil
}

// deadWorkerRow is a row claimDeadWorkersSQL returns: a dead worker, with one of its
// Relays or (ActivityID empty) none.
type deadWorkerRow struct {
	DeadQueue     string    `gorm:"column:dead_queue"`
	SeenAt        time.Time `gorm:"column:seen_at"`
	SessionID     string    `gorm:"column:session_id"`
	Generation    int64     `gorm:"column:generation"`
	WorkflowID    string    `gorm:"column:workflow_id"`
	WorkflowRunID string    `gorm:"column:workflow_run_id"`
	ActivityID    string    `gorm:"column:activity_id"`
}
