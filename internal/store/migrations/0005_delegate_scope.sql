-- 0005: security hardening of the delegate API. Same rules as 0001:
-- portable SQL, BIGINT Unix microseconds, JSON as TEXT.

-- Configurations get a scope like tokens: '' means account level (and, for
-- existing rows, that they predate configuration scopes).
ALTER TABLE configurations ADD COLUMN org TEXT NOT NULL DEFAULT '';
ALTER TABLE configurations ADD COLUMN project TEXT NOT NULL DEFAULT '';

-- The number of the last log chunk of the attempt that ended the task, as
-- the delegate's result said (NULL until a delegate reports a result):
-- chunks numbered past it are refused.
ALTER TABLE tasks ADD COLUMN result_last_seq BIGINT;
