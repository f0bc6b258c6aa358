-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_credential_check.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_credential_check: Authenticate a token and require one scope (e.g. before a WebSocket upgrade).
--
-- Parameters: p_token_hash BINARY(32); p_scope (see orbit_auth_check).
-- Result (one row): credential_id, application_id, environment_id.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED.
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_credential_check;
DELIMITER $$
CREATE PROCEDURE orbit_credential_check(IN p_token_hash BINARY(32), IN p_scope TEXT CHARACTER SET ascii COLLATE ascii_bin)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  IF p_scope IS NULL OR CHAR_LENGTH(p_scope) NOT BETWEEN 1 AND 32 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: scope must be a scope name';
  END IF;
  CALL orbit_auth_check(p_token_hash, p_scope, v_application_id, v_environment_id, v_credential_id);
  SELECT v_credential_id AS credential_id, v_application_id AS application_id, v_environment_id AS environment_id;
END$$
DELIMITER ;
