package store

import (
	"context"
	"fmt"
	"time"
)

// MarkWorkerAlive records that the worker of hostTaskQueue is alive now. A worker
// calls it every beat; a row left unwritten longer than ClaimDeadWorkers' silence
// marks a dead worker.
func (s *Store) MarkWorkerAlive(ctx context.Context, hostTaskQueue string) error {
	err := s.conn(ctx).Exec(`
		INSERT INTO workers (host_task_queue) VALUES (?)
		ON CONFLICT (host_task_queue) DO UPDATE SET seen_at = now()`, hostTaskQueue).Error
	return mapError("mark worker alive", err)
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

// claimDeadWorkersSQL removes the rows of the workers silent for $1 seconds and
// returns each with the leases its Relays still hold (a Session's newer reader
// elsewhere has replaced the holder). Deleting is the claim: of two workers claiming
// at once, the second waits on the row lock and then finds the row gone.
const claimDeadWorkersSQL = `
WITH gone AS (
	DELETE FROM workers WHERE seen_at < now() - make_interval(secs => $1)
	RETURNING host_task_queue, seen_at
)
SELECT g.host_task_queue AS dead_queue, g.seen_at, l.session_id::text, l.generation,
	l.workflow_id, l.workflow_run_id, l.activity_id
FROM gone g LEFT JOIN reader_leases l ON l.host_task_queue = g.host_task_queue
ORDER BY g.host_task_queue, l.session_id`

// ClaimDeadWorkers takes the workers that have not marked themselves alive for
// silence, each with the Relays that held leases on it, and forgets them: each dead
// worker is returned to one caller once. The caller fails those Relays so their
// Sessions recover without waiting for Temporal to time them out.
func (s *Store) ClaimDeadWorkers(ctx context.Context, silence time.Duration) ([]DeadWorker, error) {
	rows, err := s.conn(ctx).Raw(claimDeadWorkersSQL, silence.Seconds()).Rows()
	if err != nil {
		return nil, mapError("claim dead workers", err)
	}
	defer rows.Close()
	var dead []DeadWorker
	for rows.Next() {
		var (
			queue                                  string
			seenAt                                 time.Time
			sessionID, workflowID, runID, activity *string
			generation                             *int64
		)
		if err := rows.Scan(&queue, &seenAt, &sessionID, &generation, &workflowID, &runID, &activity); err != nil {
			return nil, fmt.Errorf("claim dead workers: %w", err)
		}
		if len(dead) == 0 || dead[len(dead)-1].HostTaskQueue != queue {
			dead = append(dead, DeadWorker{HostTaskQueue: queue, SeenAt: seenAt})
		}
		if sessionID == nil || workflowID == nil || runID == nil || activity == nil {
			continue
		}
		w := &dead[len(dead)-1]
		w.Relays = append(w.Relays, OrphanedRelay{SessionID: *sessionID, Generation: *generation, RelayActivity: RelayActivity{
			HostTaskQueue: queue, WorkflowID: *workflowID, RunID: *runID, ActivityID: *activity,
		}})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim dead workers: %w", err)
	}
	return dead, nil
}
