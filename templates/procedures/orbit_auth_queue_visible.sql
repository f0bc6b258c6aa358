{% import "_macros.sql" as m %}
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
CREATE PROCEDURE orbit_auth_queue_visible(
  IN p_token_hash BINARY(32),
  IN p_scope VARCHAR(32) {{ c.ascii }},
  IN p_queue_id TEXT {{ c.ascii }},
  OUT o_application_id BIGINT UNSIGNED,
  OUT o_environment_id BIGINT UNSIGNED,
  OUT o_credential_id BIGINT UNSIGNED,
  OUT o_visible TINYINT)
  READS SQL DATA
BEGIN
  DECLARE v_scopes VARCHAR(255) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  SET o_application_id = NULL, o_environment_id = NULL, o_credential_id = NULL, o_visible = 0;
  {% call m::credential_queue_read("o_credential_id", "o_application_id", "o_environment_id", "v_scopes", "v_namespace_id",
                                  "o_visible") %};
  {% call m::credential_checked("o_credential_id", "v_scopes", "p_scope") %};
END
