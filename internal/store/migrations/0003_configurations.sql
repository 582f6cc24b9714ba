-- 0003: delegate configurations, the outcome of each instance's last
-- configuration run, and delegate descriptions. Same rules as 0001:
-- portable SQL, BIGINT Unix microseconds, JSON as TEXT.

-- selectors is a JSON array of normalized selectors. version starts at 1
-- and goes up with every update.
CREATE TABLE configurations (
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    script     TEXT NOT NULL,
    selectors  TEXT NOT NULL,
    version    BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, name)
);

-- The last configuration run an instance reported: which configuration
-- (name and version), its exit code (NULL when it did not exit by itself),
-- an error line, an output excerpt (head and tail, a few KiB) and the
-- size of the whole output.
CREATE TABLE configuration_results (
    instance_id   TEXT PRIMARY KEY,
    configuration TEXT NOT NULL,
    version       BIGINT NOT NULL,
    exit_code     INTEGER,
    error         TEXT NOT NULL,
    output        TEXT NOT NULL,
    output_bytes  BIGINT NOT NULL,
    started_at    BIGINT NOT NULL,
    finished_at   BIGINT NOT NULL
);

ALTER TABLE instances ADD COLUMN description TEXT NOT NULL DEFAULT '';
