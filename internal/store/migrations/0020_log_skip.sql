-- 0020: an append that carries more output than the tail stores only
-- what the cap keeps (logs.go). It needs the bytes of an attempt's head
-- chunks without reading them (head_bytes), and finds the attempt's
-- stored non-head chunks without reading its head chunks (the index).
ALTER TABLE task_log_attempts ADD COLUMN head_bytes BIGINT NOT NULL DEFAULT 0;
UPDATE task_log_attempts SET head_bytes = COALESCE((SELECT SUM(size) FROM task_logs
    WHERE task_logs.task_id = task_log_attempts.task_id AND task_logs.attempt = task_log_attempts.attempt
    AND task_logs.head = 1), 0);
CREATE INDEX task_logs_tail ON task_logs (task_id, attempt, head, seq);
