-- 0010: an append that holds nothing a server reads (a worker's `task.started`, a finished
-- task of a pipeline of several) no longer wakes the servers: it notifies `noetl_progress`
-- instead of `noetl_events`. Servers listen to `noetl_events` only; followers of a log
-- (`noetl-vm events --follow`, `submit --wait`) to both. The names are the events a server
-- reads (runtime/server_state.py SERVER_READS; tests/postgres/test_pg_notify_split.py checks
-- that the two lists agree): a batch with any of them wakes the servers as before.
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
    v_ended bigint;
    v_added bigint;
    v_terminal bigint;
    v_stored text[];
BEGIN
    SELECT e.last_seq, e.ended_seq INTO v_last, v_ended FROM executions e
     WHERE e.execution_id = p_execution_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown execution %', p_execution_id USING ERRCODE = 'no_data_found';
    END IF;
    IF v_ended IS NOT NULL THEN
        RETURN;  -- the execution has ended: nothing more is logged
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
        SELECT f.* FROM first_of_batch f WHERE f.event_id <> ALL (v_stored)
    ), until_end AS (
        -- the batch up to and with its first terminal event
        SELECT f.*, row_number() OVER (ORDER BY f.ord) AS rn FROM fresh f
         WHERE f.ord <= coalesce(
                 (SELECT min(t.ord) FROM fresh t
                   WHERE t.name IN ('workflow.finished', 'execution.failed',
                                    'execution.cancelled')),
                 f.ord)
    ), stored AS (
        INSERT INTO events (execution_id, seq, event_id, ts, name, source, step, step_run_id,
                            task_run_id, iteration, attempt, parent_id, action_id, pc, payload)
        SELECT p_execution_id, v_last + f.rn, f.event_id, f.ts, f.name, f.source, f.step,
               f.step_run_id, f.task_run_id, f.iteration, f.attempt, f.parent_id, f.action_id,
               f.pc, f.payload::json
          FROM until_end f
        RETURNING events.event_id, events.seq, events.name
    )
    SELECT s.event_id, s.seq FROM stored s ORDER BY s.seq;
    GET DIAGNOSTICS v_added = ROW_COUNT;
    IF v_added > 0 THEN
        SELECT min(e.seq) INTO v_terminal FROM events e
         WHERE e.execution_id = p_execution_id AND e.seq > v_last
           AND e.name IN ('workflow.finished', 'execution.failed', 'execution.cancelled');
        UPDATE executions SET last_seq = v_last + v_added, ended_seq = v_terminal
         WHERE execution_id = p_execution_id;
        -- Servers owning the execution wake up on `noetl_events` (payload: the execution
        -- id) when the batch holds something a server reads (0010); a batch of progress
        -- only (a task started or done) notifies `noetl_progress`, which followers of the
        -- log listen to and servers do not.
        IF p_names && ARRAY['step.done', 'step.failed', 'loop.iteration.done',
                            'loop.iteration.failed', 'signal.received', 'timer.fired',
                            'execution.cancelled', 'execution.cancel.requested'] THEN
            PERFORM pg_notify('noetl_events', p_execution_id);
        ELSE
            PERFORM pg_notify('noetl_progress', p_execution_id);
        END IF;
    END IF;
END
$$;
