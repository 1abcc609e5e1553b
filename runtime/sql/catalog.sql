-- The service tables of an embedded (SQLite) store: the playbook catalog, the credential
-- store, its read log, and per-execution variables. They live in the same file as the event
-- log, so a `kind: playbook` task of an embedded run finds catalog entries where the run's
-- events are. Each `-- name:` section is one statement with named parameters (`:path`); the
-- names of the statements are those of the PostgreSQL queries
-- (runtime/postgres/sql/catalog.sql), whose positional parameters ($1, $2, ...) take the same
-- values in the order the names are passed (runtime/catalog.py's `CatalogTables` calls both
-- alike, with keywords).

-- name: catalog_schema
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

-- name: catalog_same_content
SELECT catalog_id FROM catalog WHERE path = :path AND digest = :digest
ORDER BY version DESC LIMIT 1

-- name: catalog_next_version
-- past the versions executions ran too: a deleted version's number is not given again
SELECT COALESCE(MAX(version), 0) + 1 FROM (
    SELECT version FROM catalog WHERE path = :path
    UNION ALL SELECT version FROM api_executions WHERE path = :path
)

-- name: catalog_insert
INSERT INTO catalog (catalog_id, path, version, kind, digest, content, payload, program,
                     findings, created_at)
VALUES (:catalog_id, :path, :version, :kind, :digest, :content, :payload, :program, :findings,
        :created_at)

-- name: catalog_entries
SELECT catalog_id, path, version, kind, content, payload, findings, created_at
FROM catalog
WHERE (:kind IS NULL OR kind = :kind) AND (:path IS NULL OR path = :path)
ORDER BY created_at DESC, version DESC

-- name: catalog_summaries
SELECT catalog_id, path, version, kind, created_at, length(content), findings
FROM catalog
WHERE (:kind IS NULL OR kind = :kind) AND (:path IS NULL OR path = :path)
ORDER BY created_at DESC, version DESC
LIMIT :limit OFFSET :offset

-- name: catalog_count
SELECT count(*) FROM catalog
WHERE (:kind IS NULL OR kind = :kind) AND (:path IS NULL OR path = :path)

-- name: catalog_delete_entry
DELETE FROM catalog WHERE catalog_id = :catalog_id

-- name: catalog_delete_path
DELETE FROM catalog WHERE path = :path

-- name: catalog_entry_by_id
SELECT catalog_id, path, version, kind, content, payload, findings, created_at, program
FROM catalog WHERE catalog_id = :catalog_id

-- name: catalog_entry_by_path
SELECT catalog_id, path, version, kind, content, payload, findings, created_at, program
FROM catalog WHERE path = :path AND (:version IS NULL OR version = :version)
ORDER BY version DESC LIMIT 1

-- name: credential_upsert
INSERT INTO credentials (id, name, type, data, meta, tags, description, created_at, updated_at)
VALUES (:id, :name, :type, :data, :meta, :tags, :description, :created_at, :updated_at)
ON CONFLICT (name) DO UPDATE SET
    type = excluded.type, data = excluded.data, meta = excluded.meta, tags = excluded.tags,
    description = excluded.description, updated_at = excluded.updated_at

-- name: credential_list
SELECT id, name, type, data, meta, tags, description, created_at, updated_at
FROM credentials
WHERE (:type IS NULL OR type = :type)
  AND (:like IS NULL OR lower(name) LIKE :like OR lower(COALESCE(description, '')) LIKE :like)
ORDER BY name

-- name: credential_by_id
SELECT id, name, type, data, meta, tags, description, created_at, updated_at
FROM credentials WHERE id = :id

-- name: credential_by_name
SELECT id, name, type, data, meta, tags, description, created_at, updated_at
FROM credentials WHERE name = :name

-- name: credential_delete
DELETE FROM credentials WHERE id = :id

-- name: credential_record_read
INSERT INTO credential_reads (credential_id, name, who, execution_id, ts)
VALUES (:credential_id, :name, :who, :execution_id, :ts)

-- name: credential_reads
SELECT credential_id, name, who, execution_id, ts FROM credential_reads
WHERE name = :name ORDER BY read_id

-- name: var_set
INSERT INTO execution_vars (execution_id, name, value, type, source_step, created_at)
VALUES (:execution_id, :name, :value, :type, :source_step, :created_at)
ON CONFLICT (execution_id, name) DO UPDATE SET
    value = excluded.value, type = excluded.type, source_step = excluded.source_step

-- name: var_list
SELECT name, value, type, source_step, created_at, accessed_at, access_count
FROM execution_vars WHERE execution_id = :execution_id ORDER BY name

-- name: var_touch
UPDATE execution_vars SET access_count = access_count + 1, accessed_at = :now
WHERE execution_id = :execution_id AND name = :name
RETURNING name, value, type, source_step, created_at, accessed_at, access_count

-- name: var_delete
DELETE FROM execution_vars WHERE execution_id = :execution_id AND name = :name

-- name: var_delete_all
DELETE FROM execution_vars WHERE execution_id = :execution_id

-- name: origin_record
INSERT OR IGNORE INTO api_executions (execution_id, catalog_id, path, version)
VALUES (:execution_id, :catalog_id, :path, :version)

-- name: origin_list
SELECT execution_id, catalog_id, path, version FROM api_executions

-- name: origin_one
SELECT execution_id, catalog_id, path, version FROM api_executions
WHERE execution_id = :execution_id
