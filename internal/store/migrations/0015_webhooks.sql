-- 0015: a webhook per pipeline. Same rules as 0001: portable SQL, BIGINT
-- Unix microseconds. id is the opaque part of its URL (/api/v1/hooks/ID);
-- secret is the HMAC key, sealed for its row as stored secrets are (the
-- manager needs it back to check a signature, so it cannot be a hash).
-- principal_kind and principal_id say who enabled it (or last rotated
-- its secret): its runs act as that user or service account ("account"
-- and the account's ID for a key of the account itself); enabled_by is
-- the label runs and listings show.
CREATE TABLE pipeline_webhooks (
    id             TEXT PRIMARY KEY,
    account_id     TEXT NOT NULL,
    org            TEXT NOT NULL,
    project        TEXT NOT NULL,
    pipeline       TEXT NOT NULL,
    secret         TEXT NOT NULL,
    principal_kind TEXT NOT NULL,
    principal_id   TEXT NOT NULL,
    enabled_by     TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    rotated_at     BIGINT NOT NULL,
    UNIQUE (account_id, org, project, pipeline)
);

-- The webhook a run came from and the delivery ID its sender gave (a
-- redelivery of the same ID returns the run instead of starting another).
ALTER TABLE pipeline_runs ADD COLUMN webhook_id TEXT NOT NULL DEFAULT '';
ALTER TABLE pipeline_runs ADD COLUMN delivery TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX pipeline_runs_delivery ON pipeline_runs (webhook_id, delivery) WHERE delivery <> '';
