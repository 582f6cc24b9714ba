-- 0026: what a deployment deployed and whether it rolls another back.
-- records is a JSON array of the deploy records its steps reported
-- (protocol.DeployRecord; '' for none). rollback_of is the deployment a
-- rollback run re-deploys over ('' for an ordinary one), on the run that
-- `deployments rollback` starts and on the deployments of that run.
-- "What runs where" reads, per service and environment, the last
-- succeeded deployments by their end.
ALTER TABLE deployments ADD COLUMN records TEXT NOT NULL DEFAULT '';
ALTER TABLE deployments ADD COLUMN rollback_of TEXT NOT NULL DEFAULT '';
ALTER TABLE pipeline_runs ADD COLUMN rollback_of TEXT NOT NULL DEFAULT '';
CREATE INDEX deployments_service_environment ON deployments (account_id, service, environment, status, finished_at);
