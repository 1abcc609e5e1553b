-- 0006: fewer writes per job row (docs/distributed.md, "Fewer writes per job row").
--
-- The index of jobs by execution holds only the jobs still queued or leased — what
-- `cancel_execution_jobs` looks for. 0001's index over every job took one more entry each
-- time a job was finished (a job's update from queued or leased to done is never a HOT
-- update: the status is in the partial indexes' predicates, so every index over all rows
-- gets the new row version); now a job enters it when enqueued and when leased, not when
-- finished, and the index stays as small as the live queue however many finished jobs the
-- table keeps.
DROP INDEX jobs_execution;
CREATE INDEX jobs_execution_live ON jobs (execution_id) WHERE status IN ('queued', 'leased');

-- The server's round enqueues its jobs with a plain INSERT: `ON CONFLICT DO NOTHING` is a
-- speculative insertion — one more probe of the primary key and one more WAL record per row —
-- paid for a conflict that only a takeover's re-enqueue (or two servers' overlap during one)
-- can cause. A batch that does hit a stored job fails with unique_violation, which rolls back
-- the plain insert (and its notification) only, and is inserted again skipping the stored
-- jobs, as before. Same signature, same protocol as 0002.
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
    v_pools bigint;
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
            PERFORM pg_notify('noetl_jobs', p.pool)
               FROM (SELECT DISTINCT x AS pool FROM unnest(p_job_pools) x) p;
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
            ), notified AS (
                SELECT pg_notify('noetl_jobs', p.pool) FROM (SELECT DISTINCT pool FROM stored) p
            )
            SELECT count(*) INTO v_pools FROM notified;
        END;
    END IF;
    IF cardinality(p_event_ids) > 0 THEN
        RETURN QUERY SELECT a.out_event_id, a.out_seq
          FROM noetl_append_events(p_execution_id, p_event_ids, p_ts, p_names, p_sources,
                                   p_steps, p_step_run_ids, p_task_run_ids, p_iterations,
                                   p_attempts, p_parent_ids, p_action_ids, p_pcs,
                                   p_payloads) a;
    END IF;
END
$$;
