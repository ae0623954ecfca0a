DROP INDEX IF EXISTS reader_leases_host_task_queue;
ALTER TABLE reader_leases
    DROP COLUMN activity_id,
    DROP COLUMN workflow_run_id,
    DROP COLUMN workflow_id,
    DROP COLUMN host_task_queue;
DROP TABLE IF EXISTS workers;
