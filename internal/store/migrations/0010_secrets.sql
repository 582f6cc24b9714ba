-- 0010: secrets as objects, at account, org or project scope. Same rules
-- as 0001: portable SQL, BIGINT Unix microseconds. org and project are ''
-- above their level (as for tokens and configurations); a name is unique
-- within its scope, and the same name may exist at several scopes (a task
-- uses the closest: its project's, then its org's, then the account's).
-- value is sealed (package seal) for its row: never in clear. version
-- starts at 1 and goes up with every update.
CREATE TABLE secrets (
    account_id TEXT NOT NULL,
    org        TEXT NOT NULL,
    project    TEXT NOT NULL,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    version    BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, org, project, name)
);
