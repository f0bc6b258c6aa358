{% import "_macros.sql" as m %}
-- orbit_key_policy_list: The key policies of a namespace.
--
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the whole namespace); p_namespace_id.
-- Result (0..{{ c.key_policies_max }} rows, exact policies first, then prefixes, each by pattern):
--   the policy columns (see orbit_key_policy_set).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (a namespace the credential does not
--   reach as a whole).
-- Locks: none.
CREATE PROCEDURE orbit_key_policy_list(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_whole TINYINT DEFAULT 0;
  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  SELECT {% call m::namespace_whole("p_namespace_id") %} INTO v_whole;
  IF NOT v_whole THEN
    {% call m::raise("NOT_FOUND", "namespace not found") %};
  END IF;
  SELECT {% call m::key_policy_columns("p") %}
    FROM orbit_key_policy p
   WHERE p.namespace_id = p_namespace_id
   ORDER BY p.match_kind, p.key_pattern;
END
