{% import "_macros.sql" as m %}
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
  CALL orbit_auth_check(p_token_hash, p_scope, o_application_id, o_environment_id, o_credential_id);
  SELECT EXISTS (SELECT 1 FROM orbit_queue q
                  WHERE q.id = p_queue_id AND q.application_id = o_application_id
                    AND q.environment_id = o_environment_id
                    AND {% call m::queue_in_scope("q.namespace_id", "q.id", "o_credential_id") %})
    INTO o_visible;
END
