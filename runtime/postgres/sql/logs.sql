-- Task logs (runtime/logs.py).

-- name: append_task_logs
INSERT INTO task_logs (execution_id, ts, step, iteration, task, attempt, action_id, stream, text)
SELECT $1, r.ts, r.step, r.iteration, r.task, r.attempt, r.action_id, r.stream, r.text
FROM unnest($2::double precision[], $3::text[], $4::integer[], $5::text[], $6::integer[],
            $7::text[], $8::text[], $9::text[])
     AS r(ts, step, iteration, task, attempt, action_id, stream, text);

-- name: read_task_logs
SELECT seq, ts, step, iteration, task, attempt, action_id, stream, text
FROM task_logs
WHERE execution_id = $1 AND seq > $2
  AND ($3::text IS NULL OR step = $3)
  AND ($4::integer IS NULL OR iteration = $4)
ORDER BY seq
LIMIT $5;
