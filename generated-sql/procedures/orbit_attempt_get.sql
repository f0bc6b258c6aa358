-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_attempt_get.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_attempt_get: Read one attempt, as its credential may see it.
--
-- History only: the concurrency_token shows what the resource saw; it grants nothing. An attempt
-- whose queue is outside the credential's reach is NOT_FOUND.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the attempt's queue); p_attempt_id.
-- Result (one row): the attempt columns:
--   attempt_id, task_id, attempt_no, queue_id, state VARCHAR, worker_id, session_id,
--   concurrency_token BIGINT UNSIGNED (0 = the task has no key), granted_at, lease_expires_at,
--   started_at (NULL = never started), released_at (NULL = still holds its permits), outcome
--   ('' while active), retryable, output (JSON or NULL), error (JSON or NULL), late_result
--   ('' = none); all times UTC.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND (no such attempt, or out
--   of reach).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_attempt_get;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_get(IN p_token_hash BINARY(32), IN p_attempt_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  SELECT a.queue_id INTO v_queue_id FROM orbit_attempt a WHERE a.id = p_attempt_id;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: attempt not found';
  END IF;
  SELECT a.id AS attempt_id, a.task_id, a.attempt_no, a.queue_id,
         a.state, a.worker_id, a.session_id, a.concurrency_token, a.granted_at,
         a.lease_expires_at, a.started_at, a.released_at, a.outcome, a.retryable,
         a.output, a.error, a.late_result FROM orbit_attempt a WHERE a.id = p_attempt_id;
END$$
DELIMITER ;
