{% import "_macros.sql" as m %}
-- orbit_task_get: Read one task, as its credential may see it.
--
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the task's queue); p_task_id.
-- Result (one row): the task columns:
{% call m::task_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (no such task, or another tenant's).
-- Locks: none.
CREATE PROCEDURE orbit_task_get(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  IF v_queue_id IS NULL THEN
    CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_namespace_id, v_credential_id);
    {% call m::raise("NOT_FOUND", "task not found") %};
  END IF;
  CALL orbit_auth_queue_check(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_namespace_id, v_credential_id);
  SELECT {% call m::task_columns("t") %} FROM orbit_task t WHERE t.id = p_task_id;
END
