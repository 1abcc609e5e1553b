-- Execution ownership: one server runs an execution's control VM at a time. A lease that is
-- not renewed expires and any server may then claim (steal) the execution; `epoch` grows on
-- every change of owner.

-- name: offer_executions
-- Make executions claimable (a new submission, or a handoff); idempotent.
WITH offered AS (
    INSERT INTO execution_owners (execution_id)
    SELECT unnest($1::text[])
    ON CONFLICT (execution_id) DO NOTHING
    RETURNING execution_id
), notified AS (
    SELECT pg_notify('noetl_executions', '') WHERE EXISTS (SELECT 1 FROM offered)
)
SELECT count(*) AS offered FROM offered WHERE (SELECT count(*) FROM notified) >= 0;

-- name: claim_executions
-- Unowned or expired executions, oldest first.
WITH picked AS (
    SELECT execution_id FROM execution_owners
     WHERE owner IS NULL OR lease_expires_at < now()
     ORDER BY created_at, execution_id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
UPDATE execution_owners o
   SET owner = $1, epoch = o.epoch + 1, acquired_at = now(), renewed_at = now(),
       lease_expires_at = now() + make_interval(secs => $3)
  FROM picked
 WHERE o.execution_id = picked.execution_id
RETURNING o.execution_id, o.epoch, extract(epoch FROM o.lease_expires_at)::float8 AS expires_at;

-- name: acquire_execution
-- One named execution: succeeds when it is unowned, expired, or already ours.
UPDATE execution_owners
   SET epoch = CASE WHEN owner = $2 AND lease_expires_at >= now() THEN epoch ELSE epoch + 1 END,
       owner = $2,
       acquired_at = CASE WHEN owner = $2 AND lease_expires_at >= now() THEN acquired_at ELSE now() END,
       renewed_at = now(),
       lease_expires_at = now() + make_interval(secs => $3)
 WHERE execution_id = $1
   AND (owner IS NULL OR owner = $2 OR lease_expires_at < now())
RETURNING execution_id, epoch, extract(epoch FROM lease_expires_at)::float8 AS expires_at;

-- name: renew_executions
UPDATE execution_owners
   SET lease_expires_at = now() + make_interval(secs => $3), renewed_at = now()
 WHERE execution_id = ANY($2::text[]) AND owner = $1
RETURNING execution_id;

-- name: release_executions
-- Hand executions back (graceful shutdown): another server can claim them at once.
WITH released AS (
    UPDATE execution_owners
       SET owner = NULL, lease_expires_at = NULL
     WHERE execution_id = ANY($2::text[]) AND owner = $1
    RETURNING execution_id
), notified AS (
    SELECT pg_notify('noetl_executions', '') WHERE EXISTS (SELECT 1 FROM released)
)
SELECT execution_id FROM released WHERE (SELECT count(*) FROM notified) >= 0;

-- name: retire_execution
-- A finished execution needs no owner any more (only its current owner may retire it).
DELETE FROM execution_owners WHERE execution_id = $1 AND owner = $2
RETURNING execution_id;

-- name: get_owner
SELECT execution_id, owner, epoch,
       extract(epoch FROM lease_expires_at)::float8 AS expires_at,
       (owner IS NOT NULL AND lease_expires_at >= now()) AS live
  FROM execution_owners
 WHERE execution_id = $1;
