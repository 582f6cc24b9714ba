-- The manager reads the whole queue, in order, at start and periodically
-- (its in-memory queue index).
CREATE INDEX tasks_status_created ON tasks (status, created_at, id);
