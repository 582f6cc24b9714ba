-- 0030: the stored secrets a delegate token gives its delegates' INIT_SCRIPT
-- (names, comma-separated; '' for none), granted when the token is created
-- by someone with secret:access on each.
ALTER TABLE tokens ADD COLUMN init_secrets TEXT NOT NULL DEFAULT '';
