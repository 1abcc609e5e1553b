-- The embedded event store (runtime/event_store.py's SQLiteStore): the executions, their events,
-- requests from other processes, stored results and task logs. Each `-- name:` section is one
-- statement; parameters are named (`:execution_id`), bound from a dict, except in
-- `event_insert`, the hot path, whose values bind by position (binding 15 values by name per
-- event cost 1.6x the insert; docs/runtime.md, "SQL").

-- name: store_schema
-- Every table of a new store (`CREATE ... IF NOT EXISTS`: opening never breaks a store an
-- earlier noetlc wrote; `SQLiteStore._upgrade` adds the columns such a store lacks).
-- schema.sql is the resulting schema.
CREATE TABLE IF NOT EXISTS executions (
    execution_id TEXT PRIMARY KEY,
    playbook TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    finished_at REAL,
    summary TEXT,
    program BLOB,
    workload TEXT,
    parent_id TEXT
);
CREATE TABLE IF NOT EXISTS events (
    execution_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL UNIQUE,
    ts REAL NOT NULL,
    name TEXT NOT NULL,
    source TEXT,
    step TEXT,
    step_run_id TEXT,
    task_run_id TEXT,
    iteration INTEGER,
    attempt INTEGER,
    parent_id TEXT,
    action_id TEXT,
    pc INTEGER,
    payload TEXT NOT NULL,
    PRIMARY KEY (execution_id, seq)
);
CREATE TABLE IF NOT EXISTS requests (
    request_id INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT,
    data TEXT,
    ts REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS logs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id TEXT NOT NULL,
    ts REAL NOT NULL,
    step TEXT,
    iteration INTEGER,
    task TEXT,
    attempt INTEGER,
    action_id TEXT,
    stream TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS logs_by_execution ON logs (execution_id, seq);

-- name: execution_create
INSERT OR IGNORE INTO executions (execution_id, playbook, status, created_at, program, workload,
                                  parent_id)
VALUES (:execution_id, :playbook, 'running', :created_at, :program, :workload, :parent_id)

-- name: execution_finish
UPDATE executions SET status = :status, finished_at = :finished_at, summary = :summary
WHERE execution_id = :execution_id

-- name: execution_list
SELECT execution_id, playbook, status, created_at, finished_at, summary, workload, parent_id
FROM executions ORDER BY created_at

-- name: execution_one
SELECT execution_id, playbook, status, created_at, finished_at, summary, workload, parent_id,
       program
FROM executions WHERE execution_id = :execution_id

-- name: event_last_seq
SELECT COALESCE(MAX(seq), 0) FROM events WHERE execution_id = :execution_id

-- name: event_ids_known
-- which of the ids (a JSON array) the store holds already: the careful path of an append
SELECT event_id FROM events WHERE event_id IN (SELECT value FROM json_each(:event_ids))

-- name: event_insert
-- by position, in this order: (execution_id, seq, the envelope's fields (vm/protocol.py's
-- ENVELOPE), payload); see the top of the file
INSERT INTO events (execution_id, seq, event_id, ts, name, source, step, step_run_id,
                    task_run_id, iteration, attempt, parent_id, action_id, pc, payload)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: event_read
-- the columns in this order: seq, the envelope's fields (ENVELOPE), payload
SELECT seq, event_id, ts, name, source, step, step_run_id, task_run_id, iteration, attempt,
       parent_id, action_id, pc, payload
FROM events WHERE execution_id = :execution_id AND seq > :after_seq ORDER BY seq

-- name: request_add
INSERT INTO requests (execution_id, kind, name, data, ts)
VALUES (:execution_id, :kind, :name, :data, :ts)

-- name: request_list
SELECT request_id, kind, name, data, ts FROM requests
WHERE execution_id = :execution_id AND request_id > :after_id ORDER BY request_id

-- name: result_put
INSERT OR IGNORE INTO results (key, data) VALUES (:key, :data)

-- name: result_get
SELECT data FROM results WHERE key = :key

-- name: log_append
INSERT INTO logs (execution_id, ts, step, iteration, task, attempt, action_id, stream, text)
VALUES (:execution_id, :ts, :step, :iteration, :task, :attempt, :action_id, :stream, :text)

-- name: log_read
-- the columns in this order: seq, runtime/event_store.py's LOG_COLUMNS
SELECT seq, ts, step, iteration, task, attempt, action_id, stream, text FROM logs
WHERE execution_id = :execution_id AND seq > :after
  AND (:step IS NULL OR step = :step) AND (:iteration IS NULL OR iteration = :iteration)
ORDER BY seq LIMIT :limit
