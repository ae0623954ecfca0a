ALTER TABLE reader_leases
    ADD COLUMN host_task_queue text,
    ADD COLUMN workflow_id     text,
    ADD COLUMN workflow_run_id text,
    ADD COLUMN activity_id     text;
CREATE INDEX reader_leases_host_task_queue ON reader_leases (host_task_queue)
    WHERE host_task_queue IS NOT NULL;
DROP TABLE IF EXISTS worker_activities;
