-- 0038: the queue is read in priority order with aging. queue_rank is a
-- queued task's sort key, created_at - priority × the aging step (in
-- microseconds; protocol.QueueRank): ordering by it is ordering by
-- effective priority (priority + waited time / step) at any instant, so
-- one plain partial index serves the queue's reads in that order. Tasks
-- from before have the normal priority (5, one-minute step); only those
-- in flight get their key (a finished task is never queued again, and
-- rewriting the whole history would make the migration as long as it).
-- The priority itself is in the task's spec.
ALTER TABLE tasks ADD COLUMN queue_rank BIGINT NOT NULL DEFAULT 0;
UPDATE tasks SET queue_rank = created_at - 300000000 WHERE status IN ('queued', 'running');
DROP INDEX tasks_queued_order;
CREATE INDEX tasks_queued_rank ON tasks (queue_rank, id) WHERE status = 'queued';
-- A pipeline run's own priority, which its step tasks take (0: the
-- pipeline definition's, or normal).
ALTER TABLE pipeline_runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
