-- 0009: delegate approval and the audit log. Same rules as 0001:
-- portable SQL, BIGINT Unix microseconds, booleans as INTEGER 0/1.

-- A token may require approval: delegates that register with it wait,
-- pending, until an administrator approves them.
ALTER TABLE tokens ADD COLUMN require_approval INTEGER NOT NULL DEFAULT 0;

-- The decision about a delegate (a group: its name, lower case, within
-- the token it registers with): 'pending', 'approved' or 'rejected'. It
-- outlives the instances (deleted or pruned ones come back with it).
-- decided_by names the principal that decided ('' while pending).
CREATE TABLE delegate_approvals (
    account_id TEXT NOT NULL,
    token_id   TEXT NOT NULL,
    name       TEXT NOT NULL,
    state      TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    decided_at BIGINT,
    decided_by TEXT NOT NULL,
    PRIMARY KEY (account_id, token_id, name)
);

-- Each instance carries its group's decision ('' when its token requires
-- no approval), so every read of an instance has it without a join.
ALTER TABLE instances ADD COLUMN approval TEXT NOT NULL DEFAULT '';

-- The audit log: one row per change made through the admin API (and per
-- sign-in). Never a secret, token or key value: names only.
CREATE TABLE audit_events (
    id              TEXT PRIMARY KEY,
    account_id      TEXT NOT NULL,
    at              BIGINT NOT NULL,
    principal_kind  TEXT NOT NULL,
    principal_id    TEXT NOT NULL,
    principal       TEXT NOT NULL,
    credential      TEXT NOT NULL,
    credential_name TEXT NOT NULL,
    action          TEXT NOT NULL,
    resource_type   TEXT NOT NULL,
    resource        TEXT NOT NULL,
    org             TEXT NOT NULL,
    project         TEXT NOT NULL,
    address         TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    status          INTEGER NOT NULL,
    detail          TEXT NOT NULL
);
CREATE INDEX audit_events_account_at ON audit_events (account_id, at, id);
CREATE INDEX audit_events_at ON audit_events (at);
