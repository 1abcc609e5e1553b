-- The migration runner's own bookkeeping (runtime/postgres/migrate.py).

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_migrations
SELECT version, name, checksum, applied_at::text AS applied_at
  FROM schema_migrations ORDER BY version;

-- name: record_migration
INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3);

-- name: migrations_table_exists
SELECT to_regclass(quote_ident(current_schema()) || '.schema_migrations') IS NOT NULL AS present;
