-- 0016: one-time sign-in links for the web UI (legate ui). Same rules as
-- 0001: portable SQL, BIGINT Unix microseconds. Only the SHA-256 hash of
-- the link's token is kept; used_at is set by the one sign-in it allows.
CREATE TABLE signin_links (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    used_at      BIGINT
);
CREATE INDEX signin_links_expires ON signin_links (expires_at);
