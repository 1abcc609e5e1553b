-- Executions and the event log. Loaded by name (`-- name: ...`) by runtime/postgres/queries.py.

-- name: create_execution
INSERT INTO executions (execution_id, playbook, parent_execution_id)
VALUES ($1, $2, $3)
ON CONFLICT (execution_id) DO NOTHING;

-- name: append_events
-- The arrays come as their text form (runtime/postgres/arrays.py), cast back here.
SELECT out_event_id, out_seq
  FROM noetl_append_events(
    $1, $2::text::text[], $3::text::float8[], $4::text::text[], $5::text::text[],
    $6::text::text[], $7::text::text[], $8::text::text[], $9::text::integer[],
    $10::text::integer[], $11::text::text[], $12::text::text[], $13::text::integer[],
    $14::text::text[]);

-- name: finish_execution
-- notifies like an append: whoever waits for the execution's end (`submit --wait`, a parent's
-- `kind: playbook` call) reads the status now instead of at its next poll
WITH finished AS (
    UPDATE executions
       SET status = $2, finished_at = now(), summary = $3::json
     WHERE execution_id = $1
    RETURNING execution_id
)
SELECT pg_notify('noetl_events', execution_id) FROM finished;

-- name: read_events
SELECT event_id, execution_id, seq, ts, name, source, step, step_run_id, task_run_id,
       iteration, attempt, parent_id, action_id, pc, payload::text AS payload
  FROM events
 WHERE execution_id = $1 AND seq > $2
 ORDER BY seq
 LIMIT $3;

-- name: get_execution
SELECT execution_id, playbook, status, parent_execution_id,
       extract(epoch FROM created_at)::float8 AS created_at,
       extract(epoch FROM finished_at)::float8 AS finished_at,
       summary::text AS summary, last_seq
  FROM executions
 WHERE execution_id = $1;

-- name: list_executions
SELECT execution_id, playbook, status, parent_execution_id,
       extract(epoch FROM created_at)::float8 AS created_at,
       extract(epoch FROM finished_at)::float8 AS finished_at,
       summary::text AS summary, last_seq
  FROM executions
 ORDER BY created_at, execution_id
 LIMIT $1;

-- name: append_and_enqueue
-- The server's round: the jobs its new events caused, and those events, in one transaction.
-- The arrays come as their text form (runtime/postgres/arrays.py), cast back here.
SELECT out_event_id, out_seq
  FROM noetl_append_and_enqueue(
    $1, $2::text::text[], $3::text::float8[], $4::text::text[], $5::text::text[],
    $6::text::text[], $7::text::text[], $8::text::text[], $9::text::integer[],
    $10::text::integer[], $11::text::text[], $12::text::text[], $13::text::integer[],
    $14::text::text[], $15::text::text[], $16::text::text[], $17::text::text[],
    $18::text::text[], $19::text::integer[], $20::text::float8[]);

-- name: read_inputs
-- The events after $2 a control VM consumes (sources $3, names $4) — a server does not need
-- the workers' task.* events nor its own — and the log's last seq, from one snapshot, so the
-- reader can move past everything it skipped. No row: unknown execution.
SELECT x.last_seq, e.event_id, e.execution_id, e.seq, e.ts, e.name, e.source, e.step,
       e.step_run_id, e.task_run_id, e.iteration, e.attempt, e.parent_id, e.action_id, e.pc,
       e.payload::text AS payload
  FROM executions x
  LEFT JOIN LATERAL (
      SELECT * FROM events v
       WHERE v.execution_id = $1 AND v.seq > $2 AND v.source = ANY($3::text[])
         AND v.name = ANY($4::text[])
  ) e ON true
 WHERE x.execution_id = $1
 ORDER BY e.seq;

-- name: lock_log_end
-- A conditional append (`append_if`) reads the log's end under the counter row's lock, which
-- every append takes: nothing is appended between this read and the append that follows.
SELECT x.last_seq, e.name
  FROM executions x
  LEFT JOIN events e ON e.execution_id = x.execution_id AND e.seq = x.last_seq
 WHERE x.execution_id = $1
   FOR UPDATE OF x;

-- name: lock_tree
-- `create_child`: one child start at a time per root execution (the count and the insert)
SELECT pg_advisory_xact_lock(hashtext('noetl.tree:' || $1));

-- name: execution_exists
SELECT 1 FROM executions WHERE execution_id = $1;

-- name: count_tree
-- The executions below a root, all levels (the `child_executions` budget counts them).
WITH RECURSIVE tree(execution_id) AS (
    SELECT execution_id FROM executions WHERE parent_execution_id = $1
    UNION ALL
    SELECT x.execution_id FROM executions x JOIN tree t ON x.parent_execution_id = t.execution_id
)
SELECT count(*) FROM tree;

-- name: reserve_bytes
-- Reserve $2 bytes of an execution's results against its `stored_bytes` budget $3: granted
-- (the new total) only while the total stays within it; `before` is the total without them.
WITH granted AS (
    UPDATE executions SET stored_bytes = stored_bytes + $2
     WHERE execution_id = $1 AND stored_bytes + $2 <= $3
    RETURNING stored_bytes
)
SELECT (SELECT stored_bytes FROM granted) AS granted,
       (SELECT stored_bytes FROM executions WHERE execution_id = $1) AS before;
