-- The service tables of an embedded (SQLite) store: the playbook catalog, the credential
-- store, its read log, and per-execution variables. They live in the same file as the event
-- log, so a `kind: playbook` task of an embedded run finds catalog entries where the run's
-- events are. Each `-- name:` section is one statement.

-- name: schema
CREATE TABLE IF NOT EXISTS catalog (
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
CREATE INDEX IF NOT EXISTS catalog_digest ON catalog (path, digest);
CREATE TABLE IF NOT EXISTS credentials (
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
CREATE TABLE IF NOT EXISTS credential_reads (
    read_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    credential_id TEXT NOT NULL,
    name          TEXT NOT NULL,
    who           TEXT NOT NULL,
    execution_id  TEXT,
    ts            REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS execution_vars (
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
CREATE TABLE IF NOT EXISTS api_executions (
    execution_id TEXT PRIMARY KEY,
    catalog_id   TEXT,
    path         TEXT,
    version      INTEGER
);

-- name: same_content
SELECT catalog_id FROM catalog WHERE path = ? AND digest = ? ORDER BY version DESC LIMIT 1

-- name: next_version
SELECT COALESCE(MAX(version), 0) + 1 FROM catalog WHERE path = ?

-- name: insert_entry
INSERT INTO catalog (catalog_id, path, version, kind, digest, content, payload, program,
                     findings, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: entries
SELECT catalog_id, path, version, kind, content, payload, findings, created_at
FROM catalog
WHERE (? IS NULL OR kind = ?) AND (? IS NULL OR path = ?)
ORDER BY created_at DESC, version DESC

-- name: entry_by_id
SELECT catalog_id, path, version, kind, content, payload, findings, created_at, program
FROM catalog WHERE catalog_id = ?

-- name: entry_by_path
SELECT catalog_id, path, version, kind, content, payload, findings, created_at, program
FROM catalog WHERE path = ? AND (? IS NULL OR version = ?)
ORDER BY version DESC LIMIT 1

-- name: upsert_credential
INSERT INTO credentials (id, name, type, data, meta, tags, description, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
    type = excluded.type, data = excluded.data, meta = excluded.meta, tags = excluded.tags,
    description = excluded.description, updated_at = excluded.updated_at

-- name: credentials
SELECT id, name, type, data, meta, tags, description, created_at, updated_at
FROM credentials
WHERE (? IS NULL OR type = ?)
  AND (? IS NULL OR lower(name) LIKE ? OR lower(COALESCE(description, '')) LIKE ?)
ORDER BY name

-- name: credential_by_id
SELECT id, name, type, data, meta, tags, description, created_at, updated_at
FROM credentials WHERE id = ?

-- name: credential_by_name
SELECT id, name, type, data, meta, tags, description, created_at, updated_at
FROM credentials WHERE name = ?

-- name: delete_credential
DELETE FROM credentials WHERE id = ?

-- name: record_read
INSERT INTO credential_reads (credential_id, name, who, execution_id, ts) VALUES (?, ?, ?, ?, ?)

-- name: reads
SELECT credential_id, name, who, execution_id, ts FROM credential_reads
WHERE name = ? ORDER BY read_id

-- name: set_var
INSERT INTO execution_vars (execution_id, name, value, type, source_step, created_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (execution_id, name) DO UPDATE SET
    value = excluded.value, type = excluded.type, source_step = excluded.source_step

-- name: vars
SELECT name, value, type, source_step, created_at, accessed_at, access_count
FROM execution_vars WHERE execution_id = ? ORDER BY name

-- name: touch_var
UPDATE execution_vars SET access_count = access_count + 1, accessed_at = ?
WHERE execution_id = ? AND name = ?

-- name: var
SELECT name, value, type, source_step, created_at, accessed_at, access_count
FROM execution_vars WHERE execution_id = ? AND name = ?

-- name: delete_var
DELETE FROM execution_vars WHERE execution_id = ? AND name = ?

-- name: delete_vars
DELETE FROM execution_vars WHERE execution_id = ?

-- name: record_origin
INSERT OR IGNORE INTO api_executions (execution_id, catalog_id, path, version) VALUES (?, ?, ?, ?)

-- name: origins
SELECT execution_id, catalog_id, path, version FROM api_executions

-- name: origin
SELECT execution_id, catalog_id, path, version FROM api_executions WHERE execution_id = ?
