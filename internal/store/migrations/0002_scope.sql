-- 0002: scope (organizations and projects), connectors and capability
-- results. Same rules as 0001: portable SQL, BIGINT Unix microseconds,
-- JSON as TEXT, booleans as INTEGER 0/1. ALTER TABLE ... ADD COLUMN with a
-- constant default fills existing rows in both SQLite and PostgreSQL.

CREATE TABLE orgs (
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, name)
);

CREATE TABLE projects (
    account_id TEXT NOT NULL,
    org        TEXT NOT NULL,
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, org, name),
    FOREIGN KEY (account_id, org) REFERENCES orgs (account_id, name)
);

-- selectors is a JSON array; last_success_instance is '' until an instance
-- succeeds for the connector.
CREATE TABLE connectors (
    account_id            TEXT NOT NULL,
    name                  TEXT NOT NULL,
    url                   TEXT NOT NULL,
    type                  TEXT NOT NULL,
    selectors             TEXT NOT NULL,
    last_success_instance TEXT NOT NULL,
    created_at            BIGINT NOT NULL,
    PRIMARY KEY (account_id, name)
);

-- The newest validation of one capability criteria by one instance: an
-- allowlist entry when ok = 1, a deny-list entry when ok = 0, valid until
-- expires_at (expired rows are purged through the expires_at index).
CREATE TABLE capability_results (
    instance_id TEXT NOT NULL,
    criteria    TEXT NOT NULL,
    ok          INTEGER NOT NULL,
    error       TEXT NOT NULL,
    checked_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (instance_id, criteria)
);
CREATE INDEX capability_results_expires ON capability_results (expires_at);

-- Scope columns: '' means account level (and, for existing rows, that they
-- predate scopes).
ALTER TABLE tokens ADD COLUMN org TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN project TEXT NOT NULL DEFAULT '';
CREATE INDEX tokens_account_org_project ON tokens (account_id, org, project);

ALTER TABLE instances ADD COLUMN org TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN project TEXT NOT NULL DEFAULT '';

ALTER TABLE tasks ADD COLUMN org TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN project TEXT NOT NULL DEFAULT '';
