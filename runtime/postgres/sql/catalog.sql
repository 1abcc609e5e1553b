-- The service tables (migration 0004): catalog, credentials, credential reads, variables.

-- name: catalog_lock_path
SELECT pg_advisory_xact_lock(hashtext('noetl.catalog:' || $1))

-- name: catalog_same_content
SELECT catalog_id FROM catalog WHERE path = $1 AND digest = $2 ORDER BY version DESC LIMIT 1

-- name: catalog_next_version
-- past the versions executions ran too: a deleted version's number is not given again
SELECT COALESCE(MAX(version), 0) + 1 FROM (
    SELECT version FROM catalog WHERE path = $1
    UNION ALL SELECT version FROM api_executions WHERE path = $1
) AS known

-- name: catalog_insert
INSERT INTO catalog (catalog_id, path, version, kind, digest, content, payload, program,
                     findings, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7::json, $8, $9::json, $10)

-- name: catalog_entries
SELECT catalog_id, path, version, kind, content, payload::text, findings::text, created_at
FROM catalog
WHERE ($1::text IS NULL OR kind = $1) AND ($2::text IS NULL OR path = $2)
ORDER BY created_at DESC, version DESC

-- name: catalog_summaries
SELECT catalog_id, path, version, kind, created_at, octet_length(content), findings::text
FROM catalog
WHERE ($1::text IS NULL OR kind = $1) AND ($2::text IS NULL OR path = $2)
ORDER BY created_at DESC, version DESC
LIMIT $3 OFFSET $4

-- name: catalog_count
SELECT count(*) FROM catalog
WHERE ($1::text IS NULL OR kind = $1) AND ($2::text IS NULL OR path = $2)

-- name: catalog_delete_entry
DELETE FROM catalog WHERE catalog_id = $1

-- name: catalog_delete_path
DELETE FROM catalog WHERE path = $1

-- name: catalog_entry_by_id
SELECT catalog_id, path, version, kind, content, payload::text, findings::text, created_at,
       program
FROM catalog WHERE catalog_id = $1

-- name: catalog_entry_by_path
SELECT catalog_id, path, version, kind, content, payload::text, findings::text, created_at,
       program
FROM catalog WHERE path = $1 AND ($2::integer IS NULL OR version = $2)
ORDER BY version DESC LIMIT 1

-- name: credential_upsert
INSERT INTO credentials (id, name, type, data, meta, tags, description, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5::json, $6::json, $7, $8, $9)
ON CONFLICT (name) DO UPDATE SET
    type = excluded.type, data = excluded.data, meta = excluded.meta, tags = excluded.tags,
    description = excluded.description, updated_at = excluded.updated_at

-- name: credential_list
SELECT id, name, type, data, meta::text, tags::text, description, created_at, updated_at
FROM credentials
WHERE ($1::text IS NULL OR type = $1)
  AND ($2::text IS NULL OR lower(name) LIKE $2 OR lower(COALESCE(description, '')) LIKE $2)
ORDER BY name

-- name: credential_by_id
SELECT id, name, type, data, meta::text, tags::text, description, created_at, updated_at
FROM credentials WHERE id = $1

-- name: credential_by_name
SELECT id, name, type, data, meta::text, tags::text, description, created_at, updated_at
FROM credentials WHERE name = $1

-- name: credential_delete
DELETE FROM credentials WHERE id = $1

-- name: credential_record_read
INSERT INTO credential_reads (credential_id, name, who, execution_id, ts)
VALUES ($1, $2, $3, $4, $5)

-- name: credential_reads
SELECT credential_id, name, who, execution_id, ts FROM credential_reads
WHERE name = $1 ORDER BY read_id

-- name: var_set
INSERT INTO execution_vars (execution_id, name, value, type, source_step, created_at)
VALUES ($1, $2, $3::json, $4, $5, $6)
ON CONFLICT (execution_id, name) DO UPDATE SET
    value = excluded.value, type = excluded.type, source_step = excluded.source_step

-- name: var_list
SELECT name, value::text, type, source_step, created_at, accessed_at, access_count
FROM execution_vars WHERE execution_id = $1 ORDER BY name

-- name: var_touch
UPDATE execution_vars SET access_count = access_count + 1, accessed_at = $3
WHERE execution_id = $1 AND name = $2
RETURNING name, value::text, type, source_step, created_at, accessed_at, access_count

-- name: var_delete
DELETE FROM execution_vars WHERE execution_id = $1 AND name = $2

-- name: var_delete_all
DELETE FROM execution_vars WHERE execution_id = $1

-- name: origin_record
INSERT INTO api_executions (execution_id, catalog_id, path, version) VALUES ($1, $2, $3, $4)
ON CONFLICT (execution_id) DO NOTHING

-- name: origin_list
SELECT execution_id, catalog_id, path, version FROM api_executions

-- name: origin_one
SELECT execution_id, catalog_id, path, version FROM api_executions WHERE execution_id = $1
