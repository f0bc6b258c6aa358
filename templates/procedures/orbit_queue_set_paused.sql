{% import "_macros.sql" as m %}
-- orbit_queue_set_paused: Pause or resume a queue's dispatch.
--
-- Pausing stops new grants from the queue; it releases nothing: in-flight attempts end by their
-- result or lease. Submits to a paused queue are still accepted.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the queue); p_queue_id; p_paused 0/1.
-- Result (one row): the queue columns and retention_seconds (see orbit_queue_create).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT.
-- Locks: the orbit_queue row.
CREATE PROCEDURE orbit_queue_set_paused(IN p_token_hash BINARY(32), IN p_queue_id TEXT {{ c.ascii }}, IN p_paused TINYINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  {% call m::rollback_on_error() %};
  CALL orbit_auth_queue_check(p_token_hash, 'queues:manage', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  IF p_paused IS NULL OR p_paused NOT IN (0, 1) THEN
    {% call m::raise("INVALID_ARGUMENT", "paused must be true or false") %};
  END IF;
  {% call m::begin() %};
  UPDATE orbit_queue q SET q.paused = p_paused, q.updated_at = v_now WHERE q.id = p_queue_id;
  COMMIT;
  SELECT {% call m::queue_columns("q") %}, q.retention_seconds FROM orbit_queue q WHERE q.id = p_queue_id;
END
