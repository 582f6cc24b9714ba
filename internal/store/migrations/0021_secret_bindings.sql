-- 0021: a task's secret references are resolved once, when the task is
-- created, to the exact secret each name means (its id and version), and
-- that binding is what a claim hands out; a claim never looks a name up.
-- secrets.id tells a secret from one deleted and created again under the
-- same name and scope (whose version starts at 1 again): new secrets get
-- a random id; those from before this migration get one made of their
-- row, which no random id can equal (random ids have no '/').
ALTER TABLE secrets ADD COLUMN id TEXT NOT NULL DEFAULT '';
UPDATE secrets SET id = 'sec_' || account_id || '/' || org || '/' || project || '/' || name;
-- secret_bindings is a JSON array of {name, org, project, id, version};
-- '' marks a task created before this migration, whose references were
-- never bound: a claim fails such a task if it references a stored secret
-- (it says to submit the task again) rather than look its names up.
ALTER TABLE tasks ADD COLUMN secret_bindings TEXT NOT NULL DEFAULT '';
-- Who a run acts as (the kind and id of the principal that started it, or
-- of the one its webhook acts as): each step's task is checked against
-- that principal's permissions when it is created. '' for runs from
-- before this migration: a step of theirs that references a stored secret
-- fails, saying to start the run again.
ALTER TABLE pipeline_runs ADD COLUMN acts_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE pipeline_runs ADD COLUMN acts_id TEXT NOT NULL DEFAULT '';
