-- The schema of a current distributed database: what `noetl-vm db upgrade` leaves in an empty
-- schema after every migration of migrations/ (the migrations are what runs; this file is
-- their result in one place, to read and to review). tests/postgres/test_pg_schema_sql.py
-- applies both to empty schemas and compares the tables, columns, constraints, indexes and
-- functions: a migration updates this file in the same change. Not applied by the code.

-- The runner's bookkeeping (migrations_table.sql).
CREATE TABLE schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

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
    last_seq            bigint NOT NULL DEFAULT 0,
    ended_seq           bigint,  -- 0008: the seq of its terminal event; nothing comes after
    stored_bytes        bigint NOT NULL DEFAULT 0  -- 0009: the stored_bytes budget's count
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
-- only the jobs still queued or leased (0006): what cancelling an execution's jobs looks for
CREATE INDEX jobs_execution_live ON jobs (execution_id) WHERE status IN ('queued', 'leased');

-- Idle workers waiting for jobs, each with a channel of its own (0011): an enqueue wakes one
-- per job. Hints only: unlogged.
CREATE UNLOGGED TABLE job_waiters (
    owner      text PRIMARY KEY,
    pool       text NOT NULL,
    channel    text NOT NULL,
    expires_at timestamptz NOT NULL
);

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

-- The service's tables (0004): the playbook catalog, the credential store (ciphertext only),
-- the log of credential reads, per-execution variables, and the catalog entry each execution
-- started through the API ran.
CREATE TABLE catalog (
    catalog_id  text PRIMARY KEY,
    path        text NOT NULL,
    version     integer NOT NULL,
    kind        text NOT NULL,
    digest      text NOT NULL,
    content     text NOT NULL,
    payload     json NOT NULL,
    program     bytea,
    findings    json NOT NULL,
    created_at  double precision NOT NULL,
    UNIQUE (path, version)
);
CREATE INDEX catalog_digest ON catalog (path, digest);

CREATE TABLE credentials (
    id          text PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    type        text NOT NULL,
    data        bytea NOT NULL,
    meta        json,
    tags        json NOT NULL,
    description text,
    created_at  double precision NOT NULL,
    updated_at  double precision NOT NULL
);

CREATE TABLE credential_reads (
    read_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    credential_id text NOT NULL,
    name          text NOT NULL,
    who           text NOT NULL,
    execution_id  text,
    ts            double precision NOT NULL
);

CREATE TABLE execution_vars (
    execution_id  text NOT NULL,
    name          text NOT NULL,
    value         json NOT NULL,
    type          text NOT NULL,
    source_step   text,
    created_at    double precision NOT NULL,
    accessed_at   double precision,
    access_count  integer NOT NULL DEFAULT 0,
    PRIMARY KEY (execution_id, name)
);

CREATE TABLE api_executions (
    execution_id text PRIMARY KEY,
    catalog_id   text,
    path         text,
    version      integer
);

-- Task logs (0007): what tasks printed, bounded, escaped and redacted by the worker.
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

-- Idempotent, gap-free batched append that drops every event after a terminal one (0001,
-- 0002, 0008, 0010).
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

-- The append of several executions' events in one round trip (0002).
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

-- One idle worker woken per job (0011).
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

-- A round's events and its jobs in one round trip (0002, 0006, 0011).
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

-- Fenced, batched job completion (0003, 0005).
CREATE FUNCTION noetl_finish_jobs(
    p_done_job_ids    text[],
    p_done_lease_ids  uuid[],
    p_ran_job_ids     text[],
    p_owner           text,
    p_execution_ids   text[],
    p_event_ids       text[],
    p_ts              double precision[],
    p_names           text[],
    p_sources         text[],
    p_steps           text[],
    p_step_run_ids    text[],
    p_task_run_ids    text[],
    p_iterations      integer[],
    p_attempts        integer[],
    p_parent_ids      text[],
    p_action_ids      text[],
    p_pcs             integer[],
    p_payloads        text[],
    p_event_job_ids   text[],
    p_event_lease_ids uuid[]
) RETURNS TABLE (out_job_id text)
LANGUAGE plpgsql AS $$
DECLARE
    v_done_jobs   text[];
    v_done_leases uuid[];
    v_ran_jobs    text[];
    v_keep        integer[];
BEGIN
    WITH finished AS (
        UPDATE jobs j
           SET status = 'done', finished_at = now(), lease_expires_at = NULL, last_error = NULL
          FROM unnest(p_done_job_ids, p_done_lease_ids) AS t(job_id, lease_id)
         WHERE j.job_id = t.job_id AND j.lease_id = t.lease_id AND j.status = 'leased'
        RETURNING j.job_id, j.lease_id
    )
    SELECT coalesce(array_agg(f.job_id), '{}'), coalesce(array_agg(f.lease_id), '{}')
      INTO v_done_jobs, v_done_leases FROM finished f;
    WITH finished AS (
        UPDATE jobs j
           SET status = 'done', lease_owner = p_owner, leased_at = now(), finished_at = now(),
               last_error = NULL
          FROM unnest(p_ran_job_ids) AS r(job_id)
         WHERE j.job_id = r.job_id AND j.status = 'queued'
        RETURNING j.job_id
    )
    SELECT coalesce(array_agg(f.job_id), '{}') INTO v_ran_jobs FROM finished f;
    RETURN QUERY SELECT unnest(v_done_jobs || v_ran_jobs);
    IF cardinality(p_event_ids) = 0 THEN
        RETURN;
    END IF;
    IF cardinality(v_done_jobs) = cardinality(p_done_job_ids)
       AND cardinality(v_ran_jobs) = cardinality(p_ran_job_ids) THEN
        v_keep := NULL;  -- every completion was accepted: every event is appended
    ELSE
        -- the positions of the events whose completion was accepted (a hash join; a picked
        -- job's events have no lease token, matched as the nil uuid)
        SELECT coalesce(array_agg(u.o ORDER BY u.o), '{}') INTO v_keep
          FROM unnest(p_event_job_ids, p_event_lease_ids)
               WITH ORDINALITY AS u(job_id, lease_id, o)
          LEFT JOIN (SELECT d.job_id, d.lease_id
                       FROM unnest(v_done_jobs, v_done_leases) AS d(job_id, lease_id)
                     UNION ALL
                     SELECT r.job_id, NULL::uuid FROM unnest(v_ran_jobs) AS r(job_id)) a
            ON a.job_id = u.job_id
           AND coalesce(a.lease_id, '00000000-0000-0000-0000-000000000000')
             = coalesce(u.lease_id, '00000000-0000-0000-0000-000000000000')
         WHERE u.job_id IS NULL OR a.job_id IS NOT NULL;
    END IF;
    IF v_keep IS NULL OR cardinality(v_keep) = cardinality(p_event_ids) THEN
        PERFORM 1 FROM noetl_append_events_of(p_execution_ids, p_event_ids, p_ts, p_names,
                                              p_sources, p_steps, p_step_run_ids,
                                              p_task_run_ids, p_iterations, p_attempts,
                                              p_parent_ids, p_action_ids, p_pcs, p_payloads);
    ELSIF cardinality(v_keep) > 0 THEN
        PERFORM 1 FROM noetl_append_events_of(
            ARRAY(SELECT p_execution_ids[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_event_ids[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_ts[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_names[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_sources[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_steps[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_step_run_ids[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_task_run_ids[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_iterations[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_attempts[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_parent_ids[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_action_ids[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_pcs[i] FROM unnest(v_keep) i),
            ARRAY(SELECT p_payloads[i] FROM unnest(v_keep) i));
    END IF;
END
$$;
