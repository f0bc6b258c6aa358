{% import "_macros.sql" as m %}
-- orbit_credential_check: Authenticate a token and require one scope (e.g. before a WebSocket upgrade).
--
-- Parameters: p_token_hash BINARY(32); p_scope (see orbit_auth_check).
-- Result (one row): credential_id, application_id, environment_id.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED.
-- Locks: none.
CREATE PROCEDURE orbit_credential_check(IN p_token_hash BINARY(32), IN p_scope TEXT {{ c.ascii }})
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  IF p_scope IS NULL OR CHAR_LENGTH(p_scope) NOT BETWEEN 1 AND 32 THEN
    {% call m::raise("INVALID_ARGUMENT", "scope must be a scope name") %};
  END IF;
  CALL orbit_auth_check(p_token_hash, p_scope, v_application_id, v_environment_id, v_credential_id);
  SELECT v_credential_id AS credential_id, v_application_id AS application_id, v_environment_id AS environment_id;
END
