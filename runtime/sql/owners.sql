-- Who runs an embedded execution (runtime/ownership.py): one lease row per execution, in the
-- event store's file. Parameters are named (`:execution_id`).

-- name: owners_schema
CREATE TABLE IF NOT EXISTS owners (
    execution_id TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    token TEXT NOT NULL,
    renewed_at REAL NOT NULL
)

-- name: owner_of
SELECT pid, host, renewed_at FROM owners WHERE execution_id = :execution_id

-- name: owner_lease
-- what a fenced write checks inside its transaction (SQLiteStore.fence)
SELECT token, pid, host, renewed_at FROM owners WHERE execution_id = :execution_id

-- name: owner_claim
INSERT OR REPLACE INTO owners (execution_id, pid, host, token, renewed_at)
VALUES (:execution_id, :pid, :host, :token, :renewed_at)

-- name: owner_renew
UPDATE owners SET renewed_at = :renewed_at WHERE execution_id = :execution_id AND token = :token

-- name: owner_release
DELETE FROM owners WHERE execution_id = :execution_id AND token = :token
