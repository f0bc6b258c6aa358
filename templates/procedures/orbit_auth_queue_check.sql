{% import "_macros.sql" as m %}
-- orbit_auth_queue_check: Internal: authenticate, require a scope, and authorise one queue.
--
-- The same rules as orbit_auth_check followed by the queue's, read in one statement
-- (m::credential_queue_read; a single submit runs this on every task).
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
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_scopes VARCHAR(255) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_queue_granted TINYINT DEFAULT 0;
  DECLARE v_namespace_grants INT DEFAULT 0;
  SET o_application_id = NULL, o_namespace_id = NULL, o_credential_id = NULL;
  {% call m::credential_queue_read("o_credential_id", "o_application_id", "v_environment_id", "v_scopes", "o_namespace_id",
                                  "v_queue_granted") %};
  {% call m::credential_checked("o_credential_id", "v_scopes", "p_scope") %};
  IF NOT v_queue_granted THEN
    -- Refused: NOT_FOUND unless the credential has a grant in the queue's namespace.
    IF o_namespace_id IS NOT NULL THEN
      SELECT COUNT(*) INTO v_namespace_grants
        FROM orbit_credential_scope s
       WHERE s.credential_id = o_credential_id AND s.namespace_id = o_namespace_id;
    END IF;
    IF v_namespace_grants = 0 THEN
      {% call m::raise("NOT_FOUND", "queue not found") %};
    END IF;
    {% call m::raise("PERMISSION_DENIED", "the queue is outside the credential queue scope") %};
  END IF;
END
