-- 0036: delegate tokens with a number of uses (token create --uses N): uses
-- is N (0: unlimited), uses_left what remains. A use is taken by the
-- registration of a new delegate process; process_id, the process an
-- instance was last registered by, tells a re-registration of that process
-- (a new session, a reconnect) from a new one.
ALTER TABLE tokens ADD COLUMN uses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN uses_left INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN process_id TEXT NOT NULL DEFAULT '';
