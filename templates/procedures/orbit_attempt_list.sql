{% import "_macros.sql" as m %}
-- orbit_attempt_list: List every attempt of a task, in attempt_no order.
--
-- History only: an attempt's concurrency_token shows what the resource saw; it grants nothing.
-- A task outside the credential's reach is NOT_FOUND. A task without attempts gives no rows.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the task's queue); p_task_id.
-- Result (0..max_attempts rows, attempt_no order): the attempt columns:
{% call m::attempt_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND (no such task, or out of
--   reach).
-- Locks: none.
CREATE PROCEDURE orbit_attempt_list(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    {% call m::raise("NOT_FOUND", "task not found") %};
  END IF;
  SELECT {% call m::attempt_columns("a") %}
    FROM orbit_attempt a
   WHERE a.task_id = p_task_id
   ORDER BY a.attempt_no;
END
