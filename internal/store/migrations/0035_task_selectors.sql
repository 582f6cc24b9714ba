-- 0035: a task's selectors (normalized, a JSON array) in a column of their
-- own, so that the queue signals group queued tasks by selector set in one
-- aggregate. '' for tasks created before: the queue signals read those
-- tasks' selectors from their spec instead.
ALTER TABLE tasks ADD COLUMN selectors TEXT NOT NULL DEFAULT '';
