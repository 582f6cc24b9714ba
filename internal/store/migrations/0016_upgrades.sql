-- 0016: upgrades. Same rules as 0001: portable SQL, BIGINT Unix
-- microseconds, INTEGER 0/1 booleans.
-- How an instance is upgraded, as it registered: 'auto' (a watcher runs
-- and upgrades it), 'off' (a watcher runs it with AUTO_UPGRADE=false) or
-- '' (no watcher).
ALTER TABLE instances ADD COLUMN upgrade_mode TEXT NOT NULL DEFAULT '';

-- A delegate group's upgrade policy, set by an administrator: the version
-- it is pinned to ('' none) or held back (held = 1), and its ring ('' is
-- the default ring). name is the group's name, normalized (lower case).
-- No row: the group wants the manager's own version, in the default ring.
CREATE TABLE upgrade_policies (
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    pinned     TEXT NOT NULL,
    held       INTEGER NOT NULL,
    ring       TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, name)
);

-- When every delegate of a ring first ran a version: the soak time of the
-- next ring counts from then.
CREATE TABLE ring_soaks (
    account_id TEXT NOT NULL,
    ring       TEXT NOT NULL,
    version    TEXT NOT NULL,
    reached_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, ring, version)
);

-- What the watcher of a delegate on one host last reported: state
-- ('' idle, 'upgrading', 'failed'), the version it upgrades (or failed to
-- upgrade) to, and why it failed. name is normalized like above.
CREATE TABLE upgrade_reports (
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    hostname   TEXT NOT NULL,
    state      TEXT NOT NULL,
    target     TEXT NOT NULL,
    reason     TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, name, hostname)
);
