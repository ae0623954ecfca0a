-- The Temporal activity attempts each worker is running, which Temporal would notice
-- only at their timeouts should the worker die (and a host activity's retry goes back
-- to its dead worker's queue, where no one polls). A worker records each as it starts
-- and forgets it as it ends; when the worker dies, another claims its rows with its
-- liveness row and fails each attempt at once.
-- This replaces the Relay's record on its reader lease: a Relay is one of them.
CREATE TABLE worker_activities (
    workflow_id     text NOT NULL,
    workflow_run_id text NOT NULL,
    activity_id     text NOT NULL,
    attempt         integer NOT NULL CHECK (attempt > 0),
    activity_type   text NOT NULL,
    -- host_task_queue names the worker running the attempt, task_queue the queue it
    -- was taken from (the same for a host activity).
    host_task_queue text NOT NULL CHECK (host_task_queue <> ''),
    task_queue      text NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, workflow_run_id, activity_id)
);

CREATE INDEX worker_activities_host_task_queue ON worker_activities (host_task_queue);

DROP INDEX IF EXISTS reader_leases_host_task_queue;
ALTER TABLE reader_leases
    DROP COLUMN activity_id,
    DROP COLUMN workflow_run_id,
    DROP COLUMN workflow_id,
    DROP COLUMN host_task_queue;
