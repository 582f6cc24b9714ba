-- 0027: a Kubernetes connector's CA (PEM) and the name of the stored
-- secret that holds its token (never the token itself); '' for other
-- connectors. And the task types a delegate instance registered that it
-- runs (a JSON array; '' from an older delegate, which runs shell, http
-- and container).
ALTER TABLE connectors ADD COLUMN ca_pem TEXT NOT NULL DEFAULT '';
ALTER TABLE connectors ADD COLUMN token_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN task_types TEXT NOT NULL DEFAULT '';
