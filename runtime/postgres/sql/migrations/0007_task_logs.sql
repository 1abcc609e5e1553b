-- 0007: task logs (what tasks printed, runtime/logs.py): bounded, escaped and redacted by the
-- worker before they are written; read by the API per execution in `seq` order (the follow
-- cursor), optionally per step and iteration.
CREATE TABLE task_logs (
    seq bigserial PRIMARY KEY,
    execution_id text NOT NULL,
    ts double precision NOT NULL,
    step text,
    iteration integer,
    task text,
    attempt integer,
    action_id text,
    stream text NOT NULL,
    text text NOT NULL
);
CREATE INDEX task_logs_execution ON task_logs (execution_id, seq);
