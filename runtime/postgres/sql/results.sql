-- The result store: large payloads by key (reference-first results).

-- name: put_result
INSERT INTO results (key, execution_id, size, checksum, content)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (key) DO NOTHING;

-- name: get_result
SELECT content, size, checksum FROM results WHERE key = $1;

-- name: delete_execution_results
DELETE FROM results WHERE execution_id = $1;
