{% import "_macros.sql" as m %}
-- orbit_key_policy_delete: Delete a key policy: its keys behave as 'queue' again (or as the next
-- longest policy that matches them) from the next submit on.
--
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the policy's whole namespace);
--   p_policy_id.
-- Result (one row): the deleted policy's columns (see orbit_key_policy_set).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (no such policy, or another tenant's:
--   one answer).
-- Locks: the orbit_key_policy row.
CREATE PROCEDURE orbit_key_policy_delete(IN p_token_hash BINARY(32), IN p_policy_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_whole TINYINT DEFAULT 0;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  {% call m::rollback_on_error() %};

  CALL orbit_auth_check(p_token_hash, 'queues:manage', v_application_id, v_environment_id, v_credential_id);
  {% call m::begin() %};
  SELECT p.namespace_id INTO v_namespace_id FROM orbit_key_policy p WHERE p.id = p_policy_id FOR UPDATE;
  SELECT {% call m::namespace_whole("v_namespace_id") %} INTO v_whole;
  IF NOT v_whole THEN
    ROLLBACK;
    {% call m::raise("NOT_FOUND", "key policy not found") %};
  END IF;
  SELECT {% call m::key_policy_columns("p") %} FROM orbit_key_policy p WHERE p.id = p_policy_id;
  DELETE FROM orbit_key_policy WHERE id = p_policy_id;
  COMMIT;
END
