-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_key_policy_list.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_policy_list: The key policies of a namespace.
--
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the whole namespace); p_namespace_id.
-- Result (0..1000 rows, exact policies first, then prefixes, each by pattern):
--   the policy columns (see orbit_key_policy_set).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (a namespace the credential does not
--   reach as a whole).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_key_policy_list;
DELIMITER $$
CREATE PROCEDURE orbit_key_policy_list(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_whole TINYINT DEFAULT 0;
  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  SELECT EXISTS (SELECT 1 FROM orbit_namespace n
                 WHERE n.id = p_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
                   AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '')) INTO v_whole;
  IF NOT v_whole THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: namespace not found';
  END IF;
  SELECT p.id AS policy_id, p.namespace_id, p.match_kind, p.key_pattern,
         p.on_busy, p.holder_limit, p.rate_grants, p.rate_per_seconds,
         p.created_at, p.updated_at
    FROM orbit_key_policy p
   WHERE p.namespace_id = p_namespace_id
   ORDER BY p.match_kind, p.key_pattern;
END$$
DELIMITER ;
