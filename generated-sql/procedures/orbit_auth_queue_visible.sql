-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_auth_queue_visible.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_auth_queue_visible: Internal: authenticate, require a scope, and tell whether a queue is visible.
--
-- For reads whose answer for anything outside the credential's reach is NOT_FOUND (queue get,
-- attempts): unlike orbit_auth_queue_check, a queue of the credential's namespace that is not in
-- its queue list is simply not visible. The caller raises its own NOT_FOUND.
-- The same rules as orbit_auth_check, with the queue read in the same statement
-- (m::credential_queue_read).
-- Parameters: p_token_hash BINARY(32); p_scope (see orbit_auth_check); p_queue_id (NULL = none).
-- Out: o_application_id, o_environment_id, o_credential_id; o_visible 1 when the queue exists in
--   the credential's application and environment and within its queue scope, else 0.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_auth_queue_visible;
DELIMITER $$
CREATE PROCEDURE orbit_auth_queue_visible(
  IN p_token_hash BINARY(32),
  IN p_scope VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  OUT o_application_id BIGINT UNSIGNED,
  OUT o_environment_id BIGINT UNSIGNED,
  OUT o_credential_id BIGINT UNSIGNED,
  OUT o_visible TINYINT)
  READS SQL DATA
BEGIN
  DECLARE v_scopes VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  SET o_application_id = NULL, o_environment_id = NULL, o_credential_id = NULL, o_visible = 0;
  SELECT c.id, c.application_id, c.environment_id, c.scopes, q.namespace_id,
         whole.credential_id IS NOT NULL OR listed.credential_id IS NOT NULL
    INTO o_credential_id, o_application_id, o_environment_id, v_scopes, v_namespace_id, o_visible
    FROM orbit_credential c
    LEFT JOIN orbit_queue q
      ON q.id = p_queue_id AND q.application_id = c.application_id AND q.environment_id = c.environment_id
    LEFT JOIN orbit_credential_scope whole
      ON whole.credential_id = c.id AND whole.namespace_id = q.namespace_id AND whole.queue_id = ''
    LEFT JOIN orbit_credential_scope listed
      ON listed.credential_id = c.id AND listed.namespace_id = q.namespace_id AND listed.queue_id = p_queue_id
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
