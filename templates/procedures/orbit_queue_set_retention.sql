{% import "_macros.sql" as m %}
-- orbit_queue_set_retention: Set how long a queue's finished tasks are kept.
--
-- Applies to every finished task of the queue, those finished before the change included: the
-- next orbit_task_purge deletes the queue's tasks that finished more than p_retention_seconds ago.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the queue); p_queue_id;
--   p_retention_seconds {{ c.retention_min_seconds }}-{{ c.retention_max_seconds }}.
-- Result (one row): the queue columns and retention_seconds (see orbit_queue_create).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT.
-- Locks: the orbit_queue row.
CREATE PROCEDURE orbit_queue_set_retention(IN p_token_hash BINARY(32), IN p_queue_id TEXT {{ c.ascii }}, IN p_retention_seconds BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  {% call m::rollback_on_error() %};
  CALL orbit_auth_queue_check(p_token_hash, 'queues:manage', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  IF p_retention_seconds IS NULL
     OR p_retention_seconds NOT BETWEEN {{ c.retention_min_seconds }} AND {{ c.retention_max_seconds }} THEN
    {% call m::raise("INVALID_ARGUMENT", "retention_seconds must be between " ~ c.retention_min_seconds ~ " and " ~ c.retention_max_seconds) %};
  END IF;
  {% call m::begin() %};
  UPDATE orbit_queue q
     SET q.retention_seconds = p_retention_seconds, q.updated_at = v_now
   WHERE q.id = p_queue_id;
  COMMIT;
  SELECT {% call m::queue_columns("q") %}, q.retention_seconds FROM orbit_queue q WHERE q.id = p_queue_id;
END
