-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_attempt_list.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_attempt_list: List every attempt of a task, in attempt_no order.
--
-- History only: an attempt's concurrency_token shows what the resource saw; it grants nothing.
-- A task outside the credential's reach is NOT_FOUND. A task without attempts gives no rows.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the task's queue); p_task_id.
-- Result (0..max_attempts rows, attempt_no order): the attempt columns:
--   attempt_id, task_id, attempt_no, queue_id, state VARCHAR, worker_id, session_id,
--   concurrency_token BIGINT UNSIGNED (0 = the task has no key), granted_at, lease_expires_at,
--   started_at (NULL = never started), released_at (NULL = still holds its permits), outcome
--   ('' while active), retryable, output (JSON or NULL), error (JSON or NULL), late_result
--   ('' = none); all times UTC.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND (no such task, or out of
--   reach).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_attempt_list;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_list(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: task not found';
  END IF;
  SELECT a.id AS attempt_id, a.task_id, a.attempt_no, a.queue_id,
         a.state, a.worker_id, a.session_id, a.concurrency_token, a.granted_at,
         a.lease_expires_at, a.started_at, a.released_at, a.outcome, a.retryable,
         a.output, a.error, a.late_result
    FROM orbit_attempt a
   WHERE a.task_id = p_task_id
   ORDER BY a.attempt_no;
END$$
DELIMITER ;
