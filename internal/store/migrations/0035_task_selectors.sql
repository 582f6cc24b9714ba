-- 0035: a task's selectors (normalized, a JSON array) in a column of their
-- own, so that the queue signals group queued tasks by selector set in one
-- aggregate. '' for tasks created before: the queue signals read those
-- tasks' selectors from their spec instead.
ALTER TABLE tasks ADD COLUMN selectors TEXT NOT NULL DEFAULT '';

-- The queue signals' aggregate reads only this index of the queued tasks
-- (by selector set and account, with what the age of the oldest needs).
CREATE INDEX tasks_queued_selectors ON tasks (selectors, account_id, queue_deadline, queue_timeout_ms) WHERE status = 'queued';
