-- 0008: users, service accounts, groups, roles, bindings and web sign-in
-- sessions. Same rules as 0001: portable SQL, BIGINT Unix microseconds,
-- booleans as INTEGER 0/1, lists as JSON TEXT.
--
-- principals holds users and service accounts (kind 'user' or
-- 'service_account'); names are unique within an account across both
-- kinds, so a name in a binding or a listing always means one principal.
-- password_hash is an argon2id hash in the PHC string format ('' for
-- service accounts and users without a password).
CREATE TABLE principals (
    id            TEXT PRIMARY KEY,
    account_id    TEXT NOT NULL,
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    display       TEXT NOT NULL,
    disabled      INTEGER NOT NULL,
    password_hash TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    UNIQUE (account_id, name)
);

CREATE TABLE principal_groups (
    id         TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (account_id, name)
);

CREATE TABLE group_members (
    group_id     TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    PRIMARY KEY (group_id, principal_id)
);
CREATE INDEX group_members_principal ON group_members (principal_id);

-- Custom roles; the built-in ones are known to the code (package access).
-- permissions is a JSON array of "resource:action" strings.
CREATE TABLE roles (
    account_id  TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    permissions TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (account_id, name)
);

-- A role bound to a subject (subject_kind 'user', 'service_account' or
-- 'group'; subject_id its ID) at a scope: org and project '' for the
-- account.
CREATE TABLE bindings (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL,
    role         TEXT NOT NULL,
    subject_kind TEXT NOT NULL,
    subject_id   TEXT NOT NULL,
    org          TEXT NOT NULL,
    project      TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    UNIQUE (account_id, role, subject_kind, subject_id, org, project)
);
CREATE INDEX bindings_subject ON bindings (subject_id);

-- Web sign-in sessions: the SHA-256 hash of a random token, bound to a
-- user, short-lived and revocable.
CREATE TABLE web_sessions (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    revoked_at   BIGINT
);

-- The first admin of every existing account becomes the user 'admin'
-- (ID 'u_' + the account ID, no password: legate user passwd or a new
-- key from admin.env), with the account-admin role at account scope; the
-- account's existing keys become that user's.
INSERT INTO principals (id, account_id, kind, name, display, disabled, password_hash, created_at)
SELECT 'u_' || id, id, 'user', 'admin', 'first administrator', 0, '', created_at FROM accounts;

INSERT INTO bindings (id, account_id, role, subject_kind, subject_id, org, project, created_at)
SELECT 'b_' || id, id, 'account-admin', 'user', 'u_' || id, '', '', created_at FROM accounts;

UPDATE api_keys SET owner_kind = 'user', owner_id = 'u_' || account_id
WHERE owner_kind = 'account' AND account_id IN (SELECT id FROM accounts);
