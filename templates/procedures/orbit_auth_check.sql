{% import "_macros.sql" as m %}
-- orbit_auth_check: Internal: authenticate a token hash and require one scope.
--
-- Called first by every API procedure, so a DBA calling a procedure gets the same rules as an HTTP
-- client. Tokens are never stored: callers pass the SHA-256 of the bearer token.
-- Parameters: p_token_hash BINARY(32); p_scope: one of queues:manage, tasks:submit, tasks:read,
--   workers:connect, workers:consume, metrics:read.
-- Out: o_application_id, o_environment_id, o_credential_id of the active credential.
-- Signals: UNAUTHENTICATED (unknown or revoked token), PERMISSION_DENIED (scope not granted).
-- Locks: none.
CREATE PROCEDURE orbit_auth_check(
  IN p_token_hash BINARY(32),
  IN p_scope VARCHAR(32) {{ c.ascii }},
  OUT o_application_id BIGINT UNSIGNED,
  OUT o_environment_id BIGINT UNSIGNED,
  OUT o_credential_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_scopes VARCHAR(255) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4;
  SET o_application_id = NULL, o_environment_id = NULL, o_credential_id = NULL;
  SELECT c.id, c.application_id, c.environment_id, c.scopes
    INTO o_credential_id, o_application_id, o_environment_id, v_scopes
    FROM orbit_credential c
   WHERE c.token_hash = p_token_hash AND c.revoked_at IS NULL;
  {% call m::credential_checked("o_credential_id", "v_scopes", "p_scope") %};
END
