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

// WorkerActivity is a Temporal activity attempt a worker runs, recorded while it runs
// so that another worker can fail it should this one die (ClaimDeadWorkers).
type WorkerActivity struct {
	// HostTaskQueue names the worker running the attempt; TaskQueue is the queue it
	// was taken from, the same for a host activity.
	HostTaskQueue string `gorm:"column:host_task_queue"`
	TaskQueue     string `gorm:"column:task_queue"`
	WorkflowID    string `gorm:"column:workflow_id"`
	RunID         string `gorm:"column:workflow_run_id"`
	ActivityID    string `gorm:"column:activity_id"`
	ActivityType  string `gorm:"column:activity_type"`
	Attempt       int32  `gorm:"column:attempt"`
}

// OnHostQueue reports whether the attempt was taken from its worker's own host task
// queue, where its retry would wait for a worker that is gone.
func (a WorkerActivity) OnHostQueue() bool { return a.TaskQueue == a.HostTaskQueue }

// RecordWorkerActivity records an activity attempt as running on its worker; a row
// left by an earlier attempt of the same activity is replaced.
func (s *Store) RecordWorkerActivity(ctx context.Context, a WorkerActivity) error {
	err := s.conn(ctx).Exec(`
		INSERT INTO worker_activities AS w (workflow_id, workflow_run_id, activity_id, attempt,
			activity_type, host_task_queue, task_queue)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (workflow_id, workflow_run_id, activity_id) DO UPDATE
		SET attempt = excluded.attempt, activity_type = excluded.activity_type,
		    host_task_queue = excluded.host_task_queue, task_queue = excluded.task_queue,
		    started_at = now()`,
		a.WorkflowID, a.RunID, a.ActivityID, a.Attempt, a.ActivityType, a.HostTaskQueue, a.TaskQueue).Error
	return mapError("record a worker's activity", err)
}

// ForgetWorkerActivity removes the record of an attempt that ended; a later attempt's
// record, on this worker or another, stays.
func (s *Store) ForgetWorkerActivity(ctx context.Context, a WorkerActivity) error {
	err := s.conn(ctx).Exec(`
		DELETE FROM worker_activities
		WHERE workflow_id = ? AND workflow_run_id = ? AND activity_id = ? AND attempt = ? AND host_task_queue = ?`,
		a.WorkflowID, a.RunID, a.ActivityID, a.Attempt, a.HostTaskQueue).Error
	return mapError("forget a worker's activity", err)
}

// DeadWorker is a worker that stopped marking itself alive, and the activity attempts
// it was running then.
type DeadWorker struct {
	HostTaskQueue string
	SeenAt        time.Time
	Activities    []WorkerActivity
}

// DeadWorkerClaim says which workers a claimer takes for dead.
type DeadWorkerClaim struct {
	// Claimer is the claiming worker's host task queue; its own row names the
	// connection its beats go through.
	Claimer string
	// Silence: a worker silent this long is dead, once the claimer is Settled.
	Silence time.Duration
	// Grace: a worker silent this long whose beat's server process is gone is dead,
	// once the claimer is Settled or when that worker beat while the claimer's own beat
	// connection was up. Its connection then ended alone, not in an outage of
	// PostgreSQL (or a failover) that ended every connection, the claimer's too.
	Grace time.Duration
	// Settled: the claimer's beats have gone through without a break for long enough
	// that every live worker has beaten since any outage.
	Settled bool
}

// claimDeadWorkersSQL removes the rows of the dead workers (DeadWorkerClaim) and the
// records of the activities they were running, and returns both. Deleting is the
// claim: of two workers claiming at once, the second waits on the row lock and then
// finds the row gone. Its arguments are the silence and the grace in seconds, the
// claimer and whether it is settled.
const claimDeadWorkersSQL = `
WITH me AS (
	SELECT m.backend_start FROM workers m
	JOIN pg_stat_activity a ON a.pid = m.backend_pid AND a.backend_start = m.backend_start
	WHERE m.host_task_queue = $3
), gone AS (
	DELETE FROM workers w
	WHERE w.host_task_queue <> $3 AND (
	   ($4 AND w.seen_at < now() - make_interval(secs => $1))
	   OR (w.seen_at < now() - make_interval(secs => $2)
	       AND ($4 OR w.seen_at > (SELECT backend_start FROM me))
	       AND NOT EXISTS (
		SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.backend_pid AND a.backend_start = w.backend_start)))
	RETURNING host_task_queue, seen_at
), running AS (
	DELETE FROM worker_activities r USING gone g WHERE r.host_task_queue = g.host_task_queue
	RETURNING r.*
)
SELECT g.host_task_queue AS dead_queue, g.seen_at,
	COALESCE(r.task_queue, '') AS task_queue, COALESCE(r.workflow_id, '') AS workflow_id,
	COALESCE(r.workflow_run_id, '') AS workflow_run_id, COALESCE(r.activity_id, '') AS activity_id,
	COALESCE(r.activity_type, '') AS activity_type, COALESCE(r.attempt, 0) AS attempt
FROM gone g LEFT JOIN running r ON r.host_task_queue = g.host_task_queue
ORDER BY g.host_task_queue, r.started_at, r.workflow_id`

// ClaimDeadWorkers takes the dead workers, each with the activity attempts it was
// running, and forgets them: each dead worker is returned to one caller once. A worker
// is dead when it has not marked itself alive for the silence, or for the grace while
// the server process of its beat's connection is gone (DeadWorkerClaim). The caller
// fails those attempts so their Sessions recover without waiting for Temporal to time
// them out.
func (s *Store) ClaimDeadWorkers(ctx context.Context, c DeadWorkerClaim) ([]DeadWorker, error) {
	var rows []deadWorkerRow
	if err := scanRaw(s.conn(ctx), &rows, claimDeadWorkersSQL, c.Silence.Seconds(), c.Grace.Seconds(), c.Claimer, c.Settled); err != nil {
		return nil, mapError("claim dead workers", err)
	}
	var dead []DeadWorker
	for _, r := range rows {
		if len(dead) == 0 || dead[len(dead)-1].HostTaskQueue != r.DeadQueue {
			dead = append(dead, DeadWorker{HostTaskQueue: r.DeadQueue, SeenAt: r.SeenAt})
		}
		if r.ActivityID == "" {
			continue // a dead worker that was running nothing recorded
		}
		w := &dead[len(dead)-1]
		a := r.WorkerActivity
		a.HostTaskQueue = r.DeadQueue
		w.Activities = append(w.Activities, a)
	}
	return dead, nil
}

// deadWorkerRow is a row claimDeadWorkersSQL returns: a dead worker, with one of its
// activities or (ActivityID empty) none.
type deadWorkerRow struct {
	DeadQueue string    `gorm:"column:dead_queue"`
	SeenAt    time.Time `gorm:"column:seen_at"`
	WorkerActivity
}
