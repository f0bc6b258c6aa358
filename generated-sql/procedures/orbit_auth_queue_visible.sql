-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_auth_queue_visible.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_auth_queue_visible: Internal: authenticate, require a scope, and tell whether a queue is visible.
--
-- For reads whose answer for anything outside the credential's reach is NOT_FOUND (queue get,
-- attempts): unlike orbit_auth_queue_check, a queue of the credential's namespace that is not in
-- its queue list is simply not visible. The caller raises its own NOT_FOUND.
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
  CALL orbit_auth_check(p_token_hash, p_scope, o_application_id, o_environment_id, o_credential_id);
  SELECT EXISTS (SELECT 1 FROM orbit_queue q
                  WHERE q.id = p_queue_id AND q.application_id = o_application_id
                    AND q.environment_id = o_environment_id
                    AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                WHERE s.credential_id = o_credential_id AND s.namespace_id = q.namespace_id
                  AND s.queue_id IN ('', q.id)))
    INTO o_visible;
END$$
DELIMITER ;
