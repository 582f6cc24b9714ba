-- 0006: secret values at rest. A task's secret_env values leave the spec
-- column: their names go to secret_names (a JSON array: what the API
-- shows) and the values, sealed for the task with the manager's master key
-- (package seal), to secrets: '' when the task has none, and from the
-- moment it ends. Rows written before keep their values in the spec until
-- the manager's first start seals them (it needs the key, which the
-- database never holds). Same rules as 0001: portable SQL, JSON as TEXT.
ALTER TABLE tasks ADD COLUMN secret_names TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN secrets TEXT NOT NULL DEFAULT '';
