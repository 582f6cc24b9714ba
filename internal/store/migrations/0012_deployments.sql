-- 0012: deployments and deployment limits. Same rules as 0001: portable
-- SQL, BIGINT Unix microseconds. A deployment is one run of a deployment
-- stage of a pipeline (a stage with a service and an environment); it is
-- recorded when the stage starts, so that the per-account limits count it
-- from then on, and finished when the stage ends (finished_at NULL while
-- it runs). status is running, succeeded, failed or cancelled. org and
-- project are '' above their level.
CREATE TABLE deployments (
    id             TEXT PRIMARY KEY,
    account_id     TEXT NOT NULL,
    org            TEXT NOT NULL,
    project        TEXT NOT NULL,
    service        TEXT NOT NULL,
    environment    TEXT NOT NULL,
    version        TEXT NOT NULL,
    pipeline       TEXT NOT NULL,
    run_id         TEXT NOT NULL,
    stage          TEXT NOT NULL,
    principal_kind TEXT NOT NULL,
    principal_name TEXT NOT NULL,
    status         TEXT NOT NULL,
    started_at     BIGINT NOT NULL,
    finished_at    BIGINT
);
-- The limits count an account's deployments by start time; the listing
-- pages by (started_at, id) from the newest.
CREATE INDEX deployments_account_started ON deployments (account_id, started_at, id);

-- An account's own limits, set by its administrators; without a row (or
-- with a NULL column) the manager's defaults apply. 0 means unlimited.
CREATE TABLE deployment_limits (
    account_id TEXT PRIMARY KEY,
    per_hour   BIGINT,
    per_day    BIGINT,
    updated_at BIGINT NOT NULL
);
