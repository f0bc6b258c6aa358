{% import "_macros.sql" as m %}
-- orbit_attempt_get: Read one attempt, as its credential may see it.
--
-- History only: the concurrency_token shows what the resource saw; it grants nothing. An attempt
-- whose queue is outside the credential's reach is NOT_FOUND.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the attempt's queue); p_attempt_id.
-- Result (one row): the attempt columns:
{% call m::attempt_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND (no such attempt, or out
--   of reach).
-- Locks: none.
CREATE PROCEDURE orbit_attempt_get(IN p_token_hash BINARY(32), IN p_attempt_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  SELECT a.queue_id INTO v_queue_id FROM orbit_attempt a WHERE a.id = p_attempt_id;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    {% call m::raise("NOT_FOUND", "attempt not found") %};
  END IF;
  SELECT {% call m::attempt_columns("a") %} FROM orbit_attempt a WHERE a.id = p_attempt_id;
END
