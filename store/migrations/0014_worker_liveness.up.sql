-- Each worker process's liveness: a worker writes its row's seen_at every second,
-- through a connection it holds for its life, whose server process (backend_pid,
-- backend_start) the row names. A worker whose server process is gone (its process
-- died and the operating system closed the connection) or whose row has gone stale is
-- dead, and another worker fails the Relays it held at once, instead of their
-- Sessions waiting for Temporal's heartbeat timeout.
CREATE TABLE workers (
    host_task_queue text PRIMARY KEY CHECK (host_task_queue <> ''),
    started_at      timestamptz NOT NULL DEFAULT now(),
    seen_at         timestamptz NOT NULL DEFAULT now(),
    backend_pid     integer NOT NULL,
    backend_start   timestamptz NOT NULL
);

-- The Relay activity holding a reader lease, so that another worker can fail it when
-- the holder's worker dies; NULL for a lease taken by anything but a Relay (the
-- reconciliation of a lost box).
ALTER TABLE reader_leases
    ADD COLUMN host_task_queue text,
    ADD COLUMN workflow_id     text,
    ADD COLUMN workflow_run_id text,
    ADD COLUMN activity_id     text;

CREATE INDEX reader_leases_host_task_queue ON reader_leases (host_task_queue)
    WHERE host_task_queue IS NOT NULL;
