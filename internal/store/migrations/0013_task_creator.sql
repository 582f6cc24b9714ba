-- Who submitted each task ("user alice", "service_account ci", "account"
-- for a key that acts as its whole account): the task list is the record
-- of who ran what, which the audit log does not repeat. Empty for tasks
-- submitted before this migration.
ALTER TABLE tasks ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
