-- 0024: what a scope owns stays bound to it.
--
-- A configuration's last result keeps the scope of the configuration
-- that printed it: its output is shown only to callers who may view
-- configurations there. Results recorded before carry none and count as
-- the account's (the strictest: only account-level viewers see their
-- output until the delegate runs a configuration again).
ALTER TABLE configuration_results ADD COLUMN org TEXT NOT NULL DEFAULT '';
ALTER TABLE configuration_results ADD COLUMN project TEXT NOT NULL DEFAULT '';
