-- 0001: the initial schema. Portable SQL (SQLite and PostgreSQL): TEXT,
-- BIGINT and INTEGER only; timestamps are BIGINT Unix microseconds UTC
-- (NULL when unset); lists and structs are JSON stored as TEXT; booleans
-- are INTEGER 0/1.

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE accounts (
    id         TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);

CREATE TABLE api_keys (
    hash       TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    hash       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    UNIQUE (account_id, name)
);
CREATE INDEX tokens_account_hash ON tokens (account_id, hash);

CREATE TABLE instances (
    id              TEXT PRIMARY KEY,
    account_id      TEXT NOT NULL,
    identity_key    TEXT NOT NULL,
    name            TEXT NOT NULL,
    hostname        TEXT NOT NULL,
    ip              TEXT NOT NULL,
    tags            TEXT NOT NULL,
    version         TEXT NOT NULL,
    type            TEXT NOT NULL,
    token_id        TEXT NOT NULL,
    capacity        INTEGER NOT NULL,
    generation      BIGINT NOT NULL,
    connection      TEXT NOT NULL,
    draining        INTEGER NOT NULL,
    registered_at   BIGINT NOT NULL,
    last_heartbeat  BIGINT,
    deregistered_at BIGINT,
    UNIQUE (account_id, identity_key)
);
CREATE INDEX instances_account_name ON instances (account_id, name, hostname);

CREATE TABLE tasks (
    id                TEXT PRIMARY KEY,
    account_id        TEXT NOT NULL,
    type              TEXT NOT NULL,
    spec              TEXT NOT NULL,
    status            TEXT NOT NULL,
    exit_code         INTEGER,
    error             TEXT NOT NULL,
    http_result       TEXT,
    timeout_ms        BIGINT NOT NULL,
    queue_timeout_ms  BIGINT NOT NULL,
    retries           INTEGER NOT NULL,
    attempts          INTEGER NOT NULL,
    epoch             BIGINT NOT NULL,
    instance_id       TEXT NOT NULL,
    delegate_name     TEXT NOT NULL,
    delegate_hostname TEXT NOT NULL,
    denied_instances  TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    acquired_at       BIGINT,
    started_at        BIGINT,
    finished_at       BIGINT,
    queue_deadline    BIGINT NOT NULL,
    lease_expires_at  BIGINT,
    log_bytes         BIGINT NOT NULL,
    log_omitted       BIGINT NOT NULL
);
CREATE INDEX tasks_account_status_created ON tasks (account_id, status, created_at);
CREATE INDEX tasks_account_created ON tasks (account_id, created_at);
CREATE INDEX tasks_status_queue_deadline ON tasks (status, queue_deadline);
CREATE INDEX tasks_status_lease ON tasks (status, lease_expires_at);
CREATE INDEX tasks_instance_status ON tasks (instance_id, status);

-- One row per stored log chunk. head = 1 when the chunk started inside the
-- head region of its attempt (such chunks are never dropped by the cap).
CREATE TABLE task_logs (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    seq     BIGINT NOT NULL,
    ts      BIGINT NOT NULL,
    data    TEXT NOT NULL,
    size    BIGINT NOT NULL,
    head    INTEGER NOT NULL,
    PRIMARY KEY (task_id, attempt, seq)
);

-- Per-attempt log counters, so appends never re-scan task_logs to learn how
-- much is stored, and the dropped range (first_dropped_seq..last_dropped_seq,
-- omitted bytes) that ReadLogs turns into a marker chunk.
CREATE TABLE task_log_attempts (
    task_id           TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt           INTEGER NOT NULL,
    received_bytes    BIGINT NOT NULL,
    stored_bytes      BIGINT NOT NULL,
    omitted_bytes     BIGINT NOT NULL,
    max_seq           BIGINT NOT NULL,
    first_dropped_seq BIGINT,
    last_dropped_seq  BIGINT,
    first_dropped_ts  BIGINT,
    PRIMARY KEY (task_id, attempt)
);
