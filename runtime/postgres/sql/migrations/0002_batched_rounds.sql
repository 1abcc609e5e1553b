-- 0002: fewer round trips and commits per round (docs/distributed.md, "Round trips and
-- commits"). The server's round is one statement (noetl_append_and_enqueue); a worker's round
-- is one transaction ending with one statement (noetl_finish_jobs). Either way the events
-- and the job changes commit together: a job is never visible (server) or finished (worker)
-- without the events that caused or reported it — DESIGN §6. Both touch the jobs first and
-- lock the executions' counter rows last, in execution-id order: every writer takes the
-- locks in the same order (no deadlock), and the counter row, which all writers of one
-- execution queue on, is held only for the append and the commit.

-- noetl_append_events of 0001 checked for ids already stored with an anti join, which the
-- planner (misled by the statistics of a fast-growing log) ran as a merge join over the whole
-- execution's events: each append cost O(events so far). Now the batch's ids are probed in
-- the (execution_id, event_id) index first: O(batch). Same signature, same protocol.
CREATE OR REPLACE FUNCTION noetl_append_events(
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
    p_payloads     text[]
) RETURNS TABLE (out_event_id text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_added bigint;
    v_stored text[];
BEGIN
    SELECT e.last_seq INTO v_last FROM executions e
     WHERE e.execution_id = p_execution_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown execution %', p_execution_id USING ERRCODE = 'no_data_found';
    END IF;
    SELECT coalesce(array_agg(s.event_id), '{}') INTO v_stored
      FROM unnest(p_event_ids) AS b(event_id)
      CROSS JOIN LATERAL (SELECT x.event_id FROM events x
                           WHERE x.execution_id = p_execution_id AND x.event_id = b.event_id
                           LIMIT 1) s;
    RETURN QUERY
    WITH incoming AS (
        SELECT * FROM unnest(p_event_ids, p_ts, p_names, p_sources, p_steps, p_step_run_ids,
                             p_task_run_ids, p_iterations, p_attempts, p_parent_ids,
                             p_action_ids, p_pcs, p_payloads)
               WITH ORDINALITY AS t(event_id, ts, name, source, step, step_run_id, task_run_id,
                                    iteration, attempt, parent_id, action_id, pc, payload, ord)
    ), first_of_batch AS (
        SELECT DISTINCT ON (i.event_id) i.* FROM incoming i ORDER BY i.event_id, i.ord
    ), fresh AS (
        SELECT f.*, row_number() OVER (ORDER BY f.ord) AS rn FROM first_of_batch f
         WHERE f.event_id <> ALL (v_stored)
    ), stored AS (
        INSERT INTO events (execution_id, seq, event_id, ts, name, source, step, step_run_id,
                            task_run_id, iteration, attempt, parent_id, action_id, pc, payload)
        SELECT p_execution_id, v_last + f.rn, f.event_id, f.ts, f.name, f.source, f.step,
               f.step_run_id, f.task_run_id, f.iteration, f.attempt, f.parent_id, f.action_id,
               f.pc, f.payload::json
          FROM fresh f
        RETURNING events.event_id, events.seq
    )
    SELECT s.event_id, s.seq FROM stored s ORDER BY s.seq;
    GET DIAGNOSTICS v_added = ROW_COUNT;
    IF v_added > 0 THEN
        UPDATE executions SET last_seq = v_last + v_added WHERE execution_id = p_execution_id;
        PERFORM pg_notify('noetl_events', p_execution_id);
    END IF;
END
$$;

-- `noetl_append_events` for events of several executions (parallel arrays, `p_execution_ids`
-- says whose each event is): the executions in id order, each event batch as in 0001.
CREATE FUNCTION noetl_append_events_of(
    p_execution_ids text[],
    p_event_ids     text[],
    p_ts            double precision[],
    p_names         text[],
    p_sources       text[],
    p_steps         text[],
    p_step_run_ids  text[],
    p_task_run_ids  text[],
    p_iterations    integer[],
    p_attempts      integer[],
    p_parent_ids    text[],
    p_action_ids    text[],
    p_pcs           integer[],
    p_payloads      text[]
) RETURNS TABLE (out_execution_id text, out_event_id text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_execution text;
    v_at integer[];
BEGIN
    FOR v_execution IN
        SELECT DISTINCT x FROM unnest(p_execution_ids) AS x ORDER BY 1
    LOOP
        SELECT array_agg(u.o ORDER BY u.o) INTO v_at
          FROM unnest(p_execution_ids) WITH ORDINALITY AS u(x, o) WHERE u.x = v_execution;
        IF cardinality(v_at) = cardinality(p_execution_ids) THEN
            RETURN QUERY SELECT v_execution, a.out_event_id, a.out_seq
              FROM noetl_append_events(v_execution, p_event_ids, p_ts, p_names, p_sources,
                                       p_steps, p_step_run_ids, p_task_run_ids, p_iterations,
                                       p_attempts, p_parent_ids, p_action_ids, p_pcs,
                                       p_payloads) a;
        ELSE
            RETURN QUERY SELECT v_execution, a.out_event_id, a.out_seq
              FROM noetl_append_events(
                  v_execution,
                  ARRAY(SELECT p_event_ids[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_ts[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_names[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_sources[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_steps[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_step_run_ids[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_task_run_ids[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_iterations[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_attempts[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_parent_ids[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_action_ids[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_pcs[i] FROM unnest(v_at) i),
                  ARRAY(SELECT p_payloads[i] FROM unnest(v_at) i)) a;
        END IF;
    END LOOP;
END
$$;

-- The server's round: enqueue the jobs an execution's new events caused and append those
-- events, atomically. Returns the appended events' (event_id, seq), like noetl_append_events.
CREATE FUNCTION noetl_append_and_enqueue(
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
        WITH stored AS (
            INSERT INTO jobs (job_id, execution_id, action_id, pool, payload, max_attempts,
                              available_at)
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

-- The end of a worker's round: finish the jobs it ran and append the events they produced
-- (any executions), in the worker's round transaction, so one commit covers the whole batch.
-- Two kinds of finished jobs: leased ones (they ran in threads; only the holder of the
-- current lease may finish them) and jobs this transaction picked (`pick_jobs`: row-locked,
-- still `queued`) and ran inline — those go from queued to done in one update, never
-- written as `leased`. Returns the ids of the jobs it finished.
CREATE FUNCTION noetl_finish_jobs(
    p_done_job_ids   text[],
    p_done_lease_ids uuid[],
    p_ran_job_ids    text[],
    p_owner          text,
    p_execution_ids  text[],
    p_event_ids      text[],
    p_ts             double precision[],
    p_names          text[],
    p_sources        text[],
    p_steps          text[],
    p_step_run_ids   text[],
    p_task_run_ids   text[],
    p_iterations     integer[],
    p_attempts       integer[],
    p_parent_ids     text[],
    p_action_ids     text[],
    p_pcs            integer[],
    p_payloads       text[]
) RETURNS TABLE (out_job_id text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    UPDATE jobs j
       SET status = 'done', finished_at = now(), lease_expires_at = NULL, last_error = NULL
      FROM unnest(p_done_job_ids, p_done_lease_ids) AS t(job_id, lease_id)
     WHERE j.job_id = t.job_id AND j.lease_id = t.lease_id AND j.status = 'leased'
    RETURNING j.job_id;
    RETURN QUERY
    UPDATE jobs j
       SET status = 'done', lease_owner = p_owner, leased_at = now(), finished_at = now(),
           last_error = NULL
     WHERE j.job_id = ANY (p_ran_job_ids) AND j.status = 'queued'
    RETURNING j.job_id;
    IF cardinality(p_event_ids) > 0 THEN
        PERFORM 1 FROM noetl_append_events_of(p_execution_ids, p_event_ids, p_ts, p_names,
                                              p_sources, p_steps, p_step_run_ids,
                                              p_task_run_ids, p_iterations, p_attempts,
                                              p_parent_ids, p_action_ids, p_pcs, p_payloads);
    END IF;
END
$$;
