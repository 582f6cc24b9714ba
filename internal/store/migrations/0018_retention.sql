-- 0017: retention deletes finished tasks and runs oldest first, in
-- batches; these indexes make each batch a range scan.
CREATE INDEX tasks_finished ON tasks (finished_at);
CREATE INDEX pipeline_runs_finished ON pipeline_runs (finished_at);
