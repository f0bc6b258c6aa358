-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_key_policy_delete.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_policy_delete: Delete a key policy: its keys behave as 'queue' again (or as the next
-- longest policy that matches them) from the next submit on.
--
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the policy's whole namespace);
--   p_policy_id.
-- Result (one row): the deleted policy's columns (see orbit_key_policy_set).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (no such policy, or another tenant's:
--   one answer).
-- Locks: the orbit_key_policy row.
DROP PROCEDURE IF EXISTS orbit_key_policy_delete;
DELIMITER $$
CREATE PROCEDURE orbit_key_policy_delete(IN p_token_hash BINARY(32), IN p_policy_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_whole TINYINT DEFAULT 0;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'queues:manage', v_application_id, v_environment_id, v_credential_id);
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT p.namespace_id INTO v_namespace_id FROM orbit_key_policy p WHERE p.id = p_policy_id FOR UPDATE;
  SELECT EXISTS (SELECT 1 FROM orbit_namespace n
                 WHERE n.id = v_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
                   AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '')) INTO v_whole;
  IF NOT v_whole THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: key policy not found';
  END IF;
  SELECT p.id AS policy_id, p.namespace_id, p.match_kind, p.key_pattern,
         p.on_busy, p.holder_limit, p.rate_grants, p.rate_per_seconds,
         p.created_at, p.updated_at FROM orbit_key_policy p WHERE p.id = p_policy_id;
  DELETE FROM orbit_key_policy WHERE id = p_policy_id;
  COMMIT;
END$$
DELIMITER ;
