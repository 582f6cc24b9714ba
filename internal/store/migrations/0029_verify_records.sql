-- 0029: a verification provider's connector (type prometheus) keeps its
-- basic auth: the user name and the name of the stored secret with the
-- password (its bearer token's secret is token_secret, its CA ca_pem);
-- '' for other connectors. A deployment keeps what its verify steps saw
-- and decided (a JSON array of protocol.DeploymentVerification; '' for
-- none) and the reason it failed ('' when it did not, or none is known).
ALTER TABLE connectors ADD COLUMN username TEXT NOT NULL DEFAULT '';
ALTER TABLE connectors ADD COLUMN password_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE deployments ADD COLUMN verifications TEXT NOT NULL DEFAULT '';
ALTER TABLE deployments ADD COLUMN reason TEXT NOT NULL DEFAULT '';
