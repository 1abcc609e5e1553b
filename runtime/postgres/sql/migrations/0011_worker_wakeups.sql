-- 0011: one idle worker woken per job instead of every listener of the pool. A worker about
-- to sleep for want of jobs registers in `job_waiters` (in the statement that found the queue
-- drained: `finish_and_lease_jobs`) with a channel of its own it listens to; an enqueue takes
-- (deletes) one registered waiter per job and notifies its channel, and notifies the pool's
-- `noetl_jobs` as before only when fewer waiters than jobs were registered. A registration
-- expires (a worker that died asleep): a live idle worker renews it at every poll. The table
-- holds hints only (a lost one costs a poll interval at most): unlogged, not WAL-logged.

CREATE UNLOGGED TABLE job_waiters (
    owner      text PRIMARY KEY,
    pool       text NOT NULL,
    channel    text NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE FUNCTION noetl_wake_workers(p_pools text[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_pool text;
    v_jobs bigint;
    v_woken bigint;
    v_total bigint := 0;
BEGIN
    FOR v_pool, v_jobs IN
        SELECT x, count(*) FROM unnest(p_pools) AS x WHERE x IS NOT NULL GROUP BY x ORDER BY x
    LOOP
        -- one idle worker per job, the latest to register first (the likeliest asleep);
        -- SKIP LOCKED: a registration being written, or a waiter another enqueue is taking,
        -- is passed by
        WITH popped AS (
            DELETE FROM job_waiters w
             WHERE w.owner IN (SELECT i.owner FROM job_waiters i
                                WHERE i.pool = v_pool AND i.expires_at > now()
                                ORDER BY i.expires_at DESC
                                LIMIT v_jobs
                                  FOR UPDATE SKIP LOCKED)
            RETURNING w.channel
        ), notified AS (
            SELECT pg_notify(p.channel, v_pool) FROM popped p
        )
        SELECT count(*) INTO v_woken FROM notified;
        IF v_woken < v_jobs THEN
            -- fewer idle workers registered than jobs: every listener of the pool hears it
            PERFORM pg_notify('noetl_jobs', v_pool);
        END IF;
        v_total := v_total + v_woken;
    END LOOP;
    RETURN v_total;
END
$$;

CREATE OR REPLACE FUNCTION noetl_append_and_enqueue(
    p_execution_id text,
    p_event_ids    text[],
    p_ts           double precision[],
    p_names        text[],
    p_sources      text[],
    p_steps        text[],
    p_step_run_ids text[],
    p_task_run_ids text[],
    p_iterations   integer[],
    p_attempts     integer[],
    p_parent_ids   text[],
    p_action_ids   text[],
    p_pcs          integer[],
    p_payloads     text[],
    p_job_ids          text[],
    p_job_action_ids   text[],
    p_job_pools        text[],
    p_job_payloads     text[],
    p_job_max_attempts integer[],
    p_job_delays       double precision[]
) RETURNS TABLE (out_event_id text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_woken text[] := '{}';  -- the pool of each job stored
BEGIN
    IF cardinality(p_job_ids) > 0 THEN
        BEGIN
            -- the usual case, no job of the batch stored yet: a plain insert
            INSERT INTO jobs (job_id, execution_id, action_id, pool, payload, max_attempts,
                              available_at)
            SELECT t.job_id, p_execution_id, t.action_id, t.pool, t.payload::json,
                   t.max_attempts, now() + make_interval(secs => t.delay)
              FROM unnest(p_job_ids, p_job_action_ids, p_job_pools, p_job_payloads,
                          p_job_max_attempts, p_job_delays)
                   AS t(job_id, action_id, pool, payload, max_attempts, delay);
            v_woken := p_job_pools;
        EXCEPTION WHEN unique_violation THEN
            -- some were (a takeover re-enqueues what the dead owner may have enqueued):
            -- those are skipped
            WITH stored AS (
                INSERT INTO jobs (job_id, execution_id, action_id, pool, payload,
                                  max_attempts, available_at)
                SELECT t.job_id, p_execution_id, t.action_id, t.pool, t.payload::json,
                       t.max_attempts, now() + make_interval(secs => t.delay)
                  FROM unnest(p_job_ids, p_job_action_ids, p_job_pools, p_job_payloads,
                              p_job_max_attempts, p_job_delays)
                       AS t(job_id, action_id, pool, payload, max_attempts, delay)
                ON CONFLICT (job_id) DO NOTHING
                RETURNING jobs.pool
            )
            SELECT coalesce(array_agg(pool), '{}') INTO v_woken FROM stored;
        END;
    END IF;
    IF cardinality(p_event_ids) > 0 THEN
        RETURN QUERY SELECT a.out_event_id, a.out_seq
          FROM noetl_append_events(p_execution_id, p_event_ids, p_ts, p_names, p_sources,
                                   p_steps, p_step_run_ids, p_task_run_ids, p_iterations,
                                   p_attempts, p_parent_ids, p_action_ids, p_pcs,
                                   p_payloads) a;
    END IF;
    -- after the append: a worker's finish locks the execution's row before its own waiter
    -- row (last in its statement), so this order cannot deadlock with it
    IF cardinality(v_woken) > 0 THEN
        PERFORM noetl_wake_workers(v_woken);
    END IF;
END
$$;
