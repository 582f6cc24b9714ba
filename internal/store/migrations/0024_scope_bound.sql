-- 0024: what a scope owns stays bound to it.
--
-- A configuration's last result keeps the scope of the configuration
-- that printed it: its output is shown only to callers who may view
-- configurations there. Results recorded before carry none and count as
-- the account's (the strictest: only account-level viewers see their
-- output until the delegate runs a configuration again).
ALTER TABLE configuration_results ADD COLUMN org TEXT NOT NULL DEFAULT '';
ALTER TABLE configuration_results ADD COLUMN project TEXT NOT NULL DEFAULT '';

-- A delegate group for upgrades is (scope, name): the delegates of a name
-- registered with tokens of exactly one scope. Its policy, its watchers'
-- reports and its rings' soak times carry that scope, so a project's
-- delegate named like an account's group never joins, holds back or
-- fails the account's rings. What exists becomes the account's.
CREATE TABLE upgrade_policies_0024 (
    account_id TEXT NOT NULL,
    org        TEXT NOT NULL,
    project    TEXT NOT NULL,
    name       TEXT NOT NULL,
    pinned     TEXT NOT NULL,
    held       INTEGER NOT NULL,
    ring       TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, org, project, name)
);
INSERT INTO upgrade_policies_0024 (account_id, org, project, name, pinned, held, ring, updated_at)
    SELECT account_id, '', '', name, pinned, held, ring, updated_at FROM upgrade_policies;
DROP TABLE upgrade_policies;
ALTER TABLE upgrade_policies_0024 RENAME TO upgrade_policies;

CREATE TABLE ring_soaks_0024 (
    account_id TEXT NOT NULL,
    org        TEXT NOT NULL,
    project    TEXT NOT NULL,
    ring       TEXT NOT NULL,
    version    TEXT NOT NULL,
    reached_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, org, project, ring, version)
);
INSERT INTO ring_soaks_0024 (account_id, org, project, ring, version, reached_at)
    SELECT account_id, '', '', ring, version, reached_at FROM ring_soaks;
DROP TABLE ring_soaks;
ALTER TABLE ring_soaks_0024 RENAME TO ring_soaks;

CREATE TABLE upgrade_reports_0024 (
    account_id TEXT NOT NULL,
    org        TEXT NOT NULL,
    project    TEXT NOT NULL,
    name       TEXT NOT NULL,
    hostname   TEXT NOT NULL,
    state      TEXT NOT NULL,
    target     TEXT NOT NULL,
    reason     TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, org, project, name, hostname)
);
INSERT INTO upgrade_reports_0024 (account_id, org, project, name, hostname, state, target, reason, updated_at)
    SELECT account_id, '', '', name, hostname, state, target, reason, updated_at FROM upgrade_reports;
DROP TABLE upgrade_reports;
ALTER TABLE upgrade_reports_0024 RENAME TO upgrade_reports;
