-- 0032: why a delegate instance registered no container runtime (such as
-- "Fargate has no container runtime"; '' when it has one or did not say),
-- shown by task explain.
ALTER TABLE instances ADD COLUMN container_reason TEXT NOT NULL DEFAULT '';
