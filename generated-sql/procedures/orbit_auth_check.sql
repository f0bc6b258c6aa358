-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_auth_check.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_auth_check: Internal: authenticate a token hash and require one scope.
--
-- Called first by every API procedure, so a DBA calling a procedure gets the same rules as an HTTP
-- client. Tokens are never stored: callers pass the SHA-256 of the bearer token.
-- Parameters: p_token_hash BINARY(32); p_scope: one of queues:manage, tasks:submit, tasks:read,
--   workers:connect, workers:consume, metrics:read.
-- Out: o_application_id, o_environment_id, o_credential_id of the active credential.
-- Signals: UNAUTHENTICATED (unknown or revoked token), PERMISSION_DENIED (scope not granted).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_auth_check;
DELIMITER $$
CREATE PROCEDURE orbit_auth_check(
  IN p_token_hash BINARY(32),
  IN p_scope VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  OUT o_application_id BIGINT UNSIGNED,
  OUT o_environment_id BIGINT UNSIGNED,
  OUT o_credential_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_scopes VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4;
  SET o_application_id = NULL, o_environment_id = NULL, o_credential_id = NULL;
  SELECT c.id, c.application_id, c.environment_id, c.scopes
    INTO o_credential_id, o_application_id, o_environment_id, v_scopes
    FROM orbit_credential c
   WHERE c.token_hash = p_token_hash AND c.revoked_at IS NULL;
  IF o_credential_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: unknown or revoked bearer token';
  END IF;
  IF FIND_IN_SET(p_scope, v_scopes) = 0 THEN
    SET v_message = CONCAT('PERMISSION_DENIED: the credential lacks the ', p_scope, ' scope');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END$$
DELIMITER ;
