-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_auth_queue_check.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

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
DROP PROCEDURE IF EXISTS orbit_auth_queue_check;
DELIMITER $$
CREATE PROCEDURE orbit_auth_queue_check(
  IN p_token_hash BINARY(32),
  IN p_scope VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  OUT o_application_id BIGINT UNSIGNED,
  OUT o_namespace_id BIGINT UNSIGNED,
  OUT o_credential_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_scopes VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_queue_granted TINYINT DEFAULT 0;
  DECLARE v_namespace_grants INT DEFAULT 0;
  SET o_application_id = NULL, o_namespace_id = NULL, o_credential_id = NULL;
  SELECT c.id, c.application_id, c.environment_id, c.scopes, q.namespace_id,
         whole.credential_id IS NOT NULL OR listed.credential_id IS NOT NULL
    INTO o_credential_id, o_application_id, v_environment_id, v_scopes, o_namespace_id, v_queue_granted
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
  IF NOT v_queue_granted THEN
    -- Refused: NOT_FOUND unless the credential has a grant in the queue's namespace.
    IF o_namespace_id IS NOT NULL THEN
      SELECT COUNT(*) INTO v_namespace_grants
        FROM orbit_credential_scope s
       WHERE s.credential_id = o_credential_id AND s.namespace_id = o_namespace_id;
    END IF;
    IF v_namespace_grants = 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: queue not found';
    END IF;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'PERMISSION_DENIED: the queue is outside the credential queue scope';
  END IF;
END$$
DELIMITER ;
