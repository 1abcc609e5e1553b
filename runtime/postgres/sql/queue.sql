-- The job queue. Every state change that makes a job leasable notifies (delivered at commit),
-- so idle workers wake up without polling: an enqueue wakes one registered idle worker per job
-- on its own channel (`noetl_wake_workers`, 0011) and the pool's `noetl_jobs` (payload: the
-- pool) when there are fewer of them than jobs; a release or a reap notifies `noetl_jobs`.

-- name: enqueue_jobs
WITH incoming AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                         $6::integer[], $7::float8[])
           AS t(job_id, execution_id, action_id, pool, payload, max_attempts, delay)
), stored AS (
    INSERT INTO jobs (job_id, execution_id, action_id, pool, payload, max_attempts, available_at)
    SELECT job_id, execution_id, action_id, pool, payload::json, max_attempts,
           now() + make_interval(secs => delay)
      FROM incoming
    ON CONFLICT (job_id) DO NOTHING
    RETURNING pool
), woken AS (
    SELECT noetl_wake_workers(array_agg(pool)) AS n FROM stored
)
SELECT (SELECT count(*) FROM stored) AS inserted, (SELECT n FROM woken) AS woken;

-- name: lease_jobs
-- Oldest leasable jobs of one pool; SKIP LOCKED lets concurrent workers take disjoint sets.
WITH picked AS (
    SELECT job_id FROM jobs
     WHERE status = 'queued' AND pool = $1 AND available_at <= now()
     ORDER BY queue_seq
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
   SET status = 'leased', lease_owner = $3, lease_id = gen_random_uuid(),
       lease_expires_at = now() + make_interval(secs => $4), heartbeat_at = now(),
       leased_at = now()
  FROM picked
 WHERE j.job_id = picked.job_id
RETURNING j.job_id, j.execution_id, j.action_id, j.pool, j.payload::text AS payload, j.attempt,
          j.max_attempts, j.lease_owner, j.lease_id::text AS lease_id,
          extract(epoch FROM j.lease_expires_at)::float8 AS lease_expires_at, j.queue_seq;

-- name: complete_jobs
-- Only the holder of the current lease may finish a job; a stale lease_id matches nothing.
UPDATE jobs j
   SET status = $3, finished_at = now(), lease_expires_at = NULL, last_error = $4
  FROM unnest($1::text[], $2::uuid[]) AS t(job_id, lease_id)
 WHERE j.job_id = t.job_id AND j.lease_id = t.lease_id AND j.status = 'leased'
RETURNING j.job_id;

-- name: complete_and_lease_jobs
-- A worker's steady state in one round trip: finish the jobs it ran, take the next batch.
-- The two updates touch disjoint rows (leased vs queued), so one statement is safe.
WITH completed AS (
    UPDATE jobs j
       SET status = 'done', finished_at = now(), lease_expires_at = NULL, last_error = NULL
      FROM unnest($1::text[], $2::uuid[]) AS t(job_id, lease_id)
     WHERE j.job_id = t.job_id AND j.lease_id = t.lease_id AND j.status = 'leased'
    RETURNING j.job_id
), picked AS (
    SELECT job_id FROM jobs
     WHERE status = 'queued' AND pool = $3 AND available_at <= now()
     ORDER BY queue_seq
     LIMIT $4
       FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE jobs j
       SET status = 'leased', lease_owner = $5, lease_id = gen_random_uuid(),
           lease_expires_at = now() + make_interval(secs => $6), heartbeat_at = now(),
           leased_at = now()
      FROM picked
     WHERE j.job_id = picked.job_id
    RETURNING j.job_id, j.execution_id, j.action_id, j.pool, j.payload::text AS payload,
              j.attempt, j.max_attempts, j.lease_owner, j.lease_id::text AS lease_id,
              extract(epoch FROM j.lease_expires_at)::float8 AS lease_expires_at, j.queue_seq
)
SELECT true AS was_completed, c.job_id, NULL AS execution_id, NULL AS action_id, NULL AS pool,
       NULL AS payload, NULL::integer AS attempt, NULL::integer AS max_attempts,
       NULL AS lease_owner, NULL AS lease_id, NULL::float8 AS lease_expires_at,
       NULL::bigint AS queue_seq
  FROM completed c
UNION ALL
SELECT false, l.job_id, l.execution_id, l.action_id, l.pool, l.payload, l.attempt,
       l.max_attempts, l.lease_owner, l.lease_id, l.lease_expires_at, l.queue_seq
  FROM leased l;

-- name: heartbeat_jobs
UPDATE jobs j
   SET lease_expires_at = now() + make_interval(secs => $3), heartbeat_at = now()
  FROM unnest($1::text[], $2::uuid[]) AS t(job_id, lease_id)
 WHERE j.job_id = t.job_id AND j.lease_id = t.lease_id AND j.status = 'leased'
RETURNING j.job_id;

-- name: release_jobs
-- Graceful shutdown: back to the queue without spending an attempt.
WITH released AS (
    UPDATE jobs j
       SET status = 'queued', lease_owner = NULL, lease_id = NULL, lease_expires_at = NULL,
           heartbeat_at = NULL, available_at = now()
      FROM unnest($1::text[], $2::uuid[]) AS t(job_id, lease_id)
     WHERE j.job_id = t.job_id AND j.lease_id = t.lease_id AND j.status = 'leased'
    RETURNING j.job_id, j.pool
), notified AS (
    SELECT pg_notify('noetl_jobs', p.pool) FROM (SELECT DISTINCT pool FROM released) p
)
SELECT r.job_id FROM released r WHERE (SELECT count(*) FROM notified) >= 0;

-- name: reap_jobs
-- Expired leases: re-queue with attempt + 1, or fail the job when that was its last attempt.
WITH expired AS (
    SELECT job_id FROM jobs
     WHERE status = 'leased' AND lease_expires_at < now()
     ORDER BY lease_expires_at
     LIMIT $1
       FOR UPDATE SKIP LOCKED
), reaped AS (
    UPDATE jobs j
       SET status = CASE WHEN j.attempt >= j.max_attempts THEN 'failed' ELSE 'queued' END,
           attempt = CASE WHEN j.attempt >= j.max_attempts THEN j.attempt ELSE j.attempt + 1 END,
           finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
           last_error = 'lease of ' || coalesce(j.lease_owner, '?') || ' expired',
           lease_owner = NULL, lease_id = NULL, lease_expires_at = NULL, heartbeat_at = NULL,
           available_at = now()
      FROM expired
     WHERE j.job_id = expired.job_id
    RETURNING j.job_id, j.execution_id, j.action_id, j.pool, j.status, j.attempt,
              j.max_attempts, j.last_error
), notified AS (
    SELECT pg_notify('noetl_jobs', p.pool)
      FROM (SELECT DISTINCT pool FROM reaped WHERE status = 'queued') p
)
SELECT r.* FROM reaped r WHERE (SELECT count(*) FROM notified) >= 0;

-- name: cancel_execution_jobs
UPDATE jobs
   SET status = 'cancelled', finished_at = now(), lease_expires_at = NULL
 WHERE execution_id = $1 AND status IN ('queued', 'leased')
RETURNING job_id;

-- name: cancel_jobs
-- Rows are locked in job_id order, as a worker's round locks the jobs it completes
-- (finish_and_lease_jobs), so the two do not deadlock on each other.
UPDATE jobs j
   SET status = 'cancelled', finished_at = now(), lease_expires_at = NULL
  FROM (SELECT job_id FROM jobs
         WHERE job_id = ANY ($1::text[]) AND status IN ('queued', 'leased')
         ORDER BY job_id
           FOR UPDATE) AS locked
 WHERE j.job_id = locked.job_id
RETURNING j.job_id;

-- name: get_job
SELECT job_id, execution_id, action_id, pool, payload::text AS payload, status, attempt,
       max_attempts, lease_owner, lease_id::text AS lease_id,
       extract(epoch FROM lease_expires_at)::float8 AS lease_expires_at, last_error
  FROM jobs
 WHERE job_id = $1;

-- name: get_jobs
-- by primary key: a takeover looks up the bundles that may hold its outstanding iterations
SELECT job_id, execution_id, action_id, pool, payload::text AS payload, status, attempt,
       max_attempts, lease_owner, lease_id::text AS lease_id,
       extract(epoch FROM lease_expires_at)::float8 AS lease_expires_at, last_error
  FROM jobs
 WHERE job_id = ANY ($1::text[]);

-- name: count_jobs
SELECT status, count(*) AS n FROM jobs WHERE pool = $1 GROUP BY status;

-- name: pick_jobs
-- A worker's round transaction: the oldest leasable jobs, row-locked (other workers' SKIP
-- LOCKED pass them by) but not leased: the inline ones go straight to done (finish_jobs).
-- SKIP LOCKED does not skip the rows the transaction itself locked: a later pick of the same
-- transaction starts after the last job it picked ($3, a queue_seq; 0 for the first).
SELECT job_id, execution_id, action_id, pool, payload::text AS payload, attempt, max_attempts,
       queue_seq
  FROM jobs
 WHERE status = 'queued' AND pool = $1 AND available_at <= now() AND queue_seq > $3
 ORDER BY queue_seq
 LIMIT $2
   FOR UPDATE SKIP LOCKED;

-- name: lease_picked_jobs
-- The picked jobs that run in threads: leased like lease_jobs does. Joined by primary key
-- (not `job_id = ANY`, which can become a scan of every queued job against the array: 0005).
UPDATE jobs j
   SET status = 'leased', lease_owner = $2, lease_id = gen_random_uuid(),
       lease_expires_at = now() + make_interval(secs => $3), heartbeat_at = now(),
       leased_at = now()
  FROM unnest($1::text[]) AS p(job_id)
 WHERE j.job_id = p.job_id AND j.status = 'queued'
RETURNING j.job_id, j.execution_id, j.action_id, j.pool, j.payload::text AS payload, j.attempt,
          j.max_attempts, j.lease_owner, j.lease_id::text AS lease_id,
          extract(epoch FROM j.lease_expires_at)::float8 AS lease_expires_at, j.queue_seq;

-- name: finish_and_lease_jobs
-- A worker's round in one statement: complete the jobs it ran (fenced: `noetl_finish_jobs`
-- appends the events of the completions it accepts, 0003) and lease up to $22 queued jobs.
-- Sent in autocommit when nothing runs inline (the statement is the round's transaction:
-- no BEGIN, no COMMIT), and with $22 = 0 as the end of a round transaction. The arrays come
-- as their text form (runtime/postgres/arrays.py), cast back here. Order inside the
-- statement: the finished jobs are locked first, in job_id order as a cancel locks them (a
-- cancel committed before is seen and refuses the job, a later one waits for our commit);
-- the finish takes the lock count as an argument, so it runs after; the lease's one-time
-- filter reads the finish's count, so it runs last. The two updates touch disjoint rows
-- (leased or queued jobs), and the lease skips locked rows: it waits for nobody.
-- $24: the worker's wake-up channel when it will sleep unless this statement leases something
-- (it registers in job_waiters until $25 seconds from now, 0011); NULL: it will not sleep,
-- and a registration of its is taken back.
WITH locked AS (
    SELECT count(*) AS n
      FROM (SELECT job_id FROM jobs
             WHERE job_id = ANY ($1::text::text[])
             ORDER BY job_id
               FOR UPDATE) l
), finished AS (
    SELECT f.out_job_id
      FROM locked,
           LATERAL noetl_finish_jobs(
               CASE WHEN locked.n >= 0 THEN $1::text::text[] END, $2::text::uuid[],
               $3::text::text[], $4, $5::text::text[], $6::text::text[], $7::text::float8[],
               $8::text::text[], $9::text::text[], $10::text::text[], $11::text::text[],
               $12::text::text[], $13::text::integer[], $14::text::integer[],
               $15::text::text[], $16::text::text[], $17::text::integer[], $18::text::text[],
               $19::text::text[], $20::text::uuid[]) f
), picked AS (
    SELECT job_id FROM jobs
     WHERE status = 'queued' AND pool = $21 AND available_at <= now()
       AND (SELECT count(*) FROM finished) >= 0
     ORDER BY queue_seq
     LIMIT $22
       FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE jobs j
       SET status = 'leased', lease_owner = $4, lease_id = gen_random_uuid(),
           lease_expires_at = now() + make_interval(secs => $23), heartbeat_at = now(),
           leased_at = now()
      FROM picked
     WHERE j.job_id = picked.job_id
    RETURNING j.job_id, j.execution_id, j.action_id, j.pool, j.payload::text AS payload,
              j.attempt, j.max_attempts, j.lease_owner, j.lease_id::text AS lease_id,
              extract(epoch FROM j.lease_expires_at)::float8 AS lease_expires_at, j.queue_seq
), quick AS (
    -- a statement that only leases commits without waiting for the WAL flush: a lease lost
    -- to a crash of PostgreSQL is a job queued again, whose holder's finish is refused
    -- (fenced) — the finish, with the job's events, is durable, and its flush covers the
    -- lease's WAL as well
    SELECT set_config('synchronous_commit', 'off', true) AS was
     WHERE cardinality($1::text::text[]) = 0 AND cardinality($3::text::text[]) = 0
), waiting AS (
    INSERT INTO job_waiters (owner, pool, channel, expires_at)
    SELECT $4, $21, $24, now() + make_interval(secs => $25)
     WHERE $24::text IS NOT NULL AND NOT EXISTS (SELECT 1 FROM leased)
    ON CONFLICT (owner) DO UPDATE
       SET pool = EXCLUDED.pool, channel = EXCLUDED.channel, expires_at = EXCLUDED.expires_at
), busy AS (
    DELETE FROM job_waiters
     WHERE owner = $4 AND ($24::text IS NULL OR EXISTS (SELECT 1 FROM leased))
)
SELECT true AS was_completed, f.out_job_id AS job_id, NULL AS execution_id,
       NULL AS action_id, NULL AS pool, NULL AS payload, NULL::integer AS attempt,
       NULL::integer AS max_attempts, NULL AS lease_owner, NULL AS lease_id,
       NULL::float8 AS lease_expires_at, NULL::bigint AS queue_seq
  FROM finished f
UNION ALL
SELECT false, l.job_id, l.execution_id, l.action_id, l.pool, l.payload, l.attempt,
       l.max_attempts, l.lease_owner, l.lease_id, l.lease_expires_at, l.queue_seq
  FROM leased l
 WHERE (SELECT count(*) FROM quick) >= 0;

-- name: append_fenced
-- A worker appending a finished task's events before its job completes, only while it holds
-- the current lease: one statement in autocommit. The job is locked for share first (the
-- reaper's SKIP LOCKED passes it by, a cancel waits for the append); the append's one-time
-- filter reads that lock's count, so nothing is appended when the lease is not current.
-- $1 the execution, $2..$14 the events as in append_events, $15 the job, $16 its lease.
WITH held AS (
    SELECT count(*) AS n
      FROM (SELECT 1 FROM jobs
             WHERE job_id = $15 AND lease_id = $16::uuid AND status = 'leased'
               FOR SHARE) j
), appended AS (
    SELECT a.out_seq
      FROM noetl_append_events(
        $1, $2::text::text[], $3::text::float8[], $4::text::text[], $5::text::text[],
        $6::text::text[], $7::text::text[], $8::text::text[], $9::text::integer[],
        $10::text::integer[], $11::text::text[], $12::text::text[], $13::text::integer[],
        $14::text::text[]) a
     WHERE (SELECT n FROM held) > 0
)
SELECT n AS held, (SELECT count(*) FROM appended) AS appended FROM held;
