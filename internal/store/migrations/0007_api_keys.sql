-- 0007: API keys as objects. Same rules as 0001: portable SQL, BIGINT Unix
-- microseconds. Until now a key was a hash, an account and a name (every
-- key the manager made was named "admin"); now each has an ID, a name
-- unique within its account (revoked keys keep theirs), who created and
-- who revoked it (key IDs, '' for the manager itself), when it was last
-- used (recorded at most once a minute) and an owner. owner_kind is
-- 'account' (owner_id the account ID) for every key today; keys of users
-- and service accounts will use other kinds.
--
-- The table is rebuilt (SQLite cannot add constraints to a table). An
-- existing key gets the ID 'ak_' + the first 20 hex digits of its hash,
-- owner 'account'; of several keys with one name in an account the oldest
-- keeps the name and the others get '-' + the first 8 hex digits of their
-- hash appended.

CREATE TABLE api_keys_v2 (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL,
    name         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    owner_kind   TEXT NOT NULL,
    owner_id     TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    created_by   TEXT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT,
    revoked_by   TEXT NOT NULL,
    UNIQUE (account_id, name)
);

INSERT INTO api_keys_v2 (id, account_id, name, hash, owner_kind, owner_id, created_at, created_by,
    last_used_at, revoked_at, revoked_by)
SELECT 'ak_' || substr(k.hash, 1, 20), k.account_id,
    CASE WHEN EXISTS (
        SELECT 1 FROM api_keys o
        WHERE o.account_id = k.account_id AND o.name = k.name
          AND (o.created_at < k.created_at OR (o.created_at = k.created_at AND o.hash < k.hash))
    ) THEN k.name || '-' || substr(k.hash, 1, 8) ELSE k.name END,
    k.hash, 'account', k.account_id, k.created_at, '', NULL, NULL, ''
FROM api_keys k;

DROP TABLE api_keys;
ALTER TABLE api_keys_v2 RENAME TO api_keys;
