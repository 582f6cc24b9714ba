-- 0019: the indexes by which only queued or running tasks are looked up
-- hold only those tasks (partial indexes). A task's status change used to
-- rewrite its entry in every one of them, finished tasks included, and
-- they grew with the history; now an entry is written when a task enters
-- the state and removed when it leaves it, and each index stays as small
-- as the work in flight. The queries that use them name the status as a
-- literal (the planners of SQLite and PostgreSQL use a partial index only
-- when the query's condition implies the index's).
DROP INDEX tasks_status_queue_deadline;
DROP INDEX tasks_status_created;
DROP INDEX tasks_status_lease;
DROP INDEX tasks_instance_status;
DROP INDEX tasks_finished;
CREATE INDEX tasks_queued_deadline ON tasks (queue_deadline, id) WHERE status = 'queued';
CREATE INDEX tasks_queued_order ON tasks (created_at, id) WHERE status = 'queued';
CREATE INDEX tasks_running_lease ON tasks (lease_expires_at, id) WHERE status = 'running';
CREATE INDEX tasks_running_instance ON tasks (instance_id) WHERE status = 'running';
CREATE INDEX tasks_finished ON tasks (finished_at, id) WHERE finished_at IS NOT NULL;
