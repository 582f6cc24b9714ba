-- 0025: what a delegate instance reports at registration about how it
-- keeps its tasks apart (protocol.TaskIsolation as JSON; '' from an older
-- delegate), shown by delegates describe.
ALTER TABLE instances ADD COLUMN task_isolation TEXT NOT NULL DEFAULT '';
