-- The schema of a current embedded store (SQLite): what opening a store leaves in an empty
-- file. The statements that make it are store.sql's `store_schema` (with
-- `SQLiteStore._upgrade`, which adds the columns a store of an earlier noetlc lacks and sets
-- `user_version`), owners.sql's `owners_schema` (the first lease) and catalog.sql's
-- `catalog_schema` (the service's tables, in the same file); this file is their result in
-- one place, to read and to review. tests/runtime_contract/test_schema_sql.py applies both to
-- empty files and compares the tables, columns, keys and indexes: a change of those
-- statements updates this file in the same change. Not applied by the code.

PRAGMA user_version = 3;

-- The event store (store.sql): executions, their events (`seq` per execution, assigned by the
-- store), requests from other processes (cancel, signal), stored results, task logs.
CREATE TABLE executions (
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
CREATE TABLE events (
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
CREATE TABLE requests (
    request_id INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT,
    data TEXT,
    ts REAL NOT NULL
);
CREATE TABLE results (
    key TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
CREATE TABLE logs (
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
CREATE INDEX logs_by_execution ON logs (execution_id, seq);

-- Who runs an execution (owners.sql, runtime/ownership.py): one lease row per execution.
CREATE TABLE owners (
    execution_id TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    token TEXT NOT NULL,
    renewed_at REAL NOT NULL
);

-- The service's tables (catalog.sql): the playbook catalog, credentials (ciphertext only),
-- their read log, per-execution variables, and the catalog entry each API execution ran.
CREATE TABLE catalog (
    catalog_id  TEXT PRIMARY KEY,
    path        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    content     TEXT NOT NULL,
    payload     TEXT NOT NULL,
    program     BLOB,
    findings    TEXT NOT NULL,
    created_at  REAL NOT NULL,
    UNIQUE (path, version)
);
CREATE INDEX catalog_digest ON catalog (path, digest);
CREATE TABLE credentials (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    type        TEXT NOT NULL,
    data        BLOB NOT NULL,
    meta        TEXT,
    tags        TEXT NOT NULL,
    description TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE TABLE credential_reads (
    read_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    credential_id TEXT NOT NULL,
    name          TEXT NOT NULL,
    who           TEXT NOT NULL,
    execution_id  TEXT,
    ts            REAL NOT NULL
);
CREATE TABLE execution_vars (
    execution_id  TEXT NOT NULL,
    name          TEXT NOT NULL,
    value         TEXT NOT NULL,
    type          TEXT NOT NULL,
    source_step   TEXT,
    created_at    REAL NOT NULL,
    accessed_at   REAL,
    access_count  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (execution_id, name)
);
CREATE TABLE api_executions (
    execution_id TEXT PRIMARY KEY,
    catalog_id   TEXT,
    path         TEXT,
    version      INTEGER
);
