{% import "_macros.sql" as m %}
-- orbit_auth_queue_check: Internal: authenticate, require a scope, and authorise one queue.
--
-- Parameters: p_token_hash BINARY(32); p_scope (see orbit_auth_check); p_queue_id CHAR(32).
-- Out: o_application_id, o_namespace_id, o_credential_id.
-- Signals: UNAUTHENTICATED; PERMISSION_DENIED (scope missing, or the queue is in the credential's
--   namespace but not in its queue list); NOT_FOUND (no such queue in the credential's
--   application, environment and namespaces: another tenant's queue does not leak its existence).
-- Locks: none.
CREATE PROCEDURE orbit_auth_queue_check(
  IN p_token_hash BINARY(32),
  IN p_scope VARCHAR(32) {{ c.ascii }},
  IN p_queue_id TEXT {{ c.ascii }},
  OUT o_application_id BIGINT UNSIGNED,
  OUT o_namespace_id BIGINT UNSIGNED,
  OUT o_credential_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_environment_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_namespace_grants INT DEFAULT 0;
  DECLARE v_queue_grants INT DEFAULT 0;
  CALL orbit_auth_check(p_token_hash, p_scope, o_application_id, v_environment_id, o_credential_id);
  SET o_namespace_id = NULL;
  SELECT q.namespace_id INTO o_namespace_id
    FROM orbit_queue q
   WHERE q.id = p_queue_id AND q.application_id = o_application_id AND q.environment_id = v_environment_id;
  IF o_namespace_id IS NOT NULL THEN
    SELECT COUNT(*), COALESCE(SUM(s.queue_id = '' OR s.queue_id = p_queue_id), 0)
      INTO v_namespace_grants, v_queue_grants
      FROM orbit_credential_scope s
     WHERE s.credential_id = o_credential_id AND s.namespace_id = o_namespace_id;
  END IF;
  IF o_namespace_id IS NULL OR v_namespace_grants = 0 THEN
    {% call m::raise("NOT_FOUND", "queue not found") %};
  END IF;
  IF v_queue_grants = 0 THEN
    {% call m::raise("PERMISSION_DENIED", "the queue is outside the credential queue scope") %};
  END IF;
END
