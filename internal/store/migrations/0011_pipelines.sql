-- 0011: pipelines and their runs. Same rules as 0001: portable SQL,
-- BIGINT Unix microseconds, JSON as TEXT. org and project are '' above
-- their level (as for secrets); a name is unique within its scope.

-- source is the YAML as applied (package pipeline parses it); version
-- starts at 1 and goes up whenever an apply changes the source.
CREATE TABLE pipelines (
    account_id TEXT NOT NULL,
    org        TEXT NOT NULL,
    project    TEXT NOT NULL,
    name       TEXT NOT NULL,
    source     TEXT NOT NULL,
    version    BIGINT NOT NULL,
    updated_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, org, project, name)
);

-- A run keeps the source it runs (a later apply or a delete does not change
-- a run under way), its inputs (a JSON object, defaults filled in), who or
-- what started it, and its status: running, succeeded, failed, cancelled.
-- cancel_requested is set by a cancel; the advancer then cancels the
-- running steps and ends the run.
CREATE TABLE pipeline_runs (
    id               TEXT PRIMARY KEY,
    account_id       TEXT NOT NULL,
    org              TEXT NOT NULL,
    project          TEXT NOT NULL,
    pipeline         TEXT NOT NULL,
    version          BIGINT NOT NULL,
    source           TEXT NOT NULL,
    inputs           TEXT NOT NULL,
    status           TEXT NOT NULL,
    cancel_requested INTEGER NOT NULL,
    trigger_kind     TEXT NOT NULL,
    triggered_by     TEXT NOT NULL,
    error            TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    finished_at      BIGINT
);
CREATE INDEX pipeline_runs_account ON pipeline_runs (account_id, created_at);
CREATE INDEX pipeline_runs_status ON pipeline_runs (status);

-- One row per step that started or was skipped: its task (''
-- when it never had one), status (running, succeeded, failed, skipped),
-- outputs (a JSON object) and an error line.
CREATE TABLE pipeline_run_steps (
    run_id      TEXT NOT NULL,
    stage       TEXT NOT NULL,
    step        TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    status      TEXT NOT NULL,
    outputs     TEXT NOT NULL,
    error       TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT,
    PRIMARY KEY (run_id, stage, step)
);
CREATE INDEX pipeline_run_steps_task ON pipeline_run_steps (task_id);
