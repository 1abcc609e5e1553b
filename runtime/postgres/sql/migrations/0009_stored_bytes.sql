-- 0009: the `stored_bytes` budget in distributed mode (runtime/stored_budget.py): the bytes of
-- an execution's results that workers reserved before logging them, counted in its row.
ALTER TABLE executions ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0;
