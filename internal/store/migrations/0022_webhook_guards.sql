-- 0022: what keeps a webhook from acting beyond its enabler's intent.
-- Same rules as 0001: portable SQL, BIGINT Unix microseconds.
--
-- enabled_version is the pipeline version the webhook was enabled (or
-- last taken over) for. suspended_reason, when not empty, says why an
-- edit suspended it (someone who may not run the pipeline changed it):
-- deliveries are refused until someone who may run it enables it again
-- (--rotate); suspended_at is when.
ALTER TABLE pipeline_webhooks ADD COLUMN enabled_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pipeline_webhooks ADD COLUMN suspended_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE pipeline_webhooks ADD COLUMN suspended_at BIGINT NOT NULL DEFAULT 0;

-- The delivery IDs a webhook accepted, each kept until the signed
-- timestamp it came with leaves the replay window (expires_at), so a
-- captured delivery sent again inside the window is refused and one sent
-- later is refused for its timestamp. Rows past expires_at are pruned as
-- deliveries arrive.
CREATE TABLE webhook_deliveries (
    webhook_id  TEXT NOT NULL,
    delivery    TEXT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (webhook_id, delivery)
);
CREATE INDEX webhook_deliveries_expiry ON webhook_deliveries (expires_at);
