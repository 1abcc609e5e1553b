-- 0001: executions, the event log, the job queue, execution ownership, the result store.
-- Applied by `noetl-vm db upgrade` in one transaction; the runner records it in
-- schema_migrations. Objects are created in the current schema (the URL's `schema=`).

-- One row per execution. `last_seq` is the per-execution event counter: an append locks this
-- row, so appends to one execution are serialized and `seq` is gap-free; appends to different
-- executions never wait for each other.
CREATE TABLE executions (
    execution_id        text PRIMARY KEY,
    playbook            text NOT NULL,
    status              text NOT NULL DEFAULT 'running',
    parent_execution_id text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    summary             json,
    last_seq            bigint NOT NULL DEFAULT 0
);
CREATE INDEX executions_created ON executions (created_at);
CREATE INDEX executions_parent ON executions (parent_execution_id)
    WHERE parent_execution_id IS NOT NULL;

-- The event log, hash-partitioned by execution (docs/distributed.md says why). Every index
-- includes the partition key, so one execution's reads and appends touch one partition.
-- Payloads are `json` (kept verbatim, cheaper to write than jsonb; never queried by content).
CREATE TABLE events (
    execution_id text NOT NULL,
    seq          bigint NOT NULL,
    event_id     text NOT NULL,
    ts           double precision NOT NULL,
    name         text NOT NULL,
    source       text,
    step         text,
    step_run_id  text,
    task_run_id  text,
    iteration    integer,
    attempt      integer,
    parent_id    text,
    action_id    text,
    pc           integer,
    payload      json NOT NULL,
    PRIMARY KEY (execution_id, seq),
    UNIQUE (execution_id, event_id)
) PARTITION BY HASH (execution_id);

DO $$
BEGIN
    FOR i IN 0..15 LOOP
        EXECUTE format(
            'CREATE TABLE events_p%s PARTITION OF events FOR VALUES WITH (MODULUS 16, REMAINDER %s)',
            lpad(i::text, 2, '0'), i);
    END LOOP;
END
$$;

-- The command queue. A job is leased by one worker at a time (`lease_id` is the lease's
-- fencing token: completion, heartbeat and release must present it). `attempt` counts leases
-- that expired; the reaper re-queues with attempt + 1 or fails the job at max_attempts.
CREATE TABLE jobs (
    job_id           text PRIMARY KEY,
    queue_seq        bigint GENERATED ALWAYS AS IDENTITY,
    execution_id     text NOT NULL,
    action_id        text NOT NULL,
    pool             text NOT NULL DEFAULT 'default',
    payload          json NOT NULL,
    status           text NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'leased', 'done', 'failed', 'cancelled')),
    attempt          integer NOT NULL DEFAULT 1,
    max_attempts     integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    lease_owner      text,
    lease_id         uuid,
    lease_expires_at timestamptz,
    heartbeat_at     timestamptz,
    available_at     timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    leased_at        timestamptz,
    finished_at      timestamptz,
    last_error       text
);
-- Leasing walks this partial index in FIFO order; it only holds queued jobs, so it stays
-- small however many finished jobs the table keeps.
CREATE INDEX jobs_ready ON jobs (pool, queue_seq) WHERE status = 'queued';
CREATE INDEX jobs_leased ON jobs (lease_expires_at) WHERE status = 'leased';
CREATE INDEX jobs_execution ON jobs (execution_id);

-- Which server runs an execution's control VM. `epoch` grows on every change of owner: a
-- fencing token a server can present with its writes.
CREATE TABLE execution_owners (
    execution_id     text PRIMARY KEY,
    owner            text,
    epoch            bigint NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    acquired_at      timestamptz,
    renewed_at       timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX execution_owners_claimable ON execution_owners (lease_expires_at NULLS FIRST);

-- Reference-first results: payloads over limits.max_payload_bytes live here and events carry
-- {store, key, size, checksum}.
CREATE TABLE results (
    key          text PRIMARY KEY,
    execution_id text,
    size         bigint NOT NULL,
    checksum     text NOT NULL,
    content      bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX results_execution ON results (execution_id);

-- Idempotent, gap-free batched append: one round trip per batch. The first statement locks
-- the execution's counter row; every later statement runs with a fresh snapshot (READ
-- COMMITTED), so it sees all events committed by earlier holders of the lock. Events whose
-- event_id is already stored (or repeated in the batch) are skipped and take no seq.
-- Returns the newly stored events' ids and seqs, in input order.
CREATE FUNCTION noetl_append_events(
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
BEGIN
    SELECT e.last_seq INTO v_last FROM executions e
     WHERE e.execution_id = p_execution_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown execution %', p_execution_id USING ERRCODE = 'no_data_found';
    END IF;
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
         WHERE NOT EXISTS (SELECT 1 FROM events s
                            WHERE s.execution_id = p_execution_id AND s.event_id = f.event_id)
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
        -- Servers owning the execution wake up on this (payload: the execution id).
        PERFORM pg_notify('noetl_events', p_execution_id);
    END IF;
END
$$;
