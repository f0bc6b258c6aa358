-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_credential_create.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_credential_create: Create a credential for one namespace: all of its queues, or a list.
--
-- Operator entry point (like orbit_admin_bootstrap), not reachable over HTTP: it takes no token.
-- Unlike bootstrap it creates nothing but the credential: the application, environment,
-- namespace and every listed queue must exist. The caller computes the hash from a fresh random
-- token; the token itself is never stored.
-- Parameters: p_application, p_environment, p_namespace: names; p_queue_ids_json: JSON array of
--   queue ids of that namespace ('[]' = every queue of the namespace, present and future; at most
--   1000); p_token_hash (the 32 bytes of a SHA-256; BLOB so a wrong length is refused, not
--   padded); p_token_hint (first 8 characters of the token); p_scopes:
--   comma-separated subset of queues:manage,tasks:submit,tasks:read,workers:connect,
--   workers:consume,metrics:read; p_label: free text (NULL = '').
-- Result (one row): credential_id, application_id, environment_id, namespace_id.
-- Signals: INVALID_ARGUMENT, NOT_FOUND (application, environment, namespace, or a queue not in
--   the namespace), STATE_CONFLICT (a credential with this token hash exists).
-- Locks: the new orbit_credential and orbit_credential_scope rows.
DROP PROCEDURE IF EXISTS orbit_credential_create;
DELIMITER $$
CREATE PROCEDURE orbit_credential_create(
  IN p_application TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_environment TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_namespace TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_queue_ids_json TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_token_hash BLOB,
  IN p_token_hint TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_scopes TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_label TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_found INT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_environment_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_count INT;
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_queue_ids_json IS NULL OR NOT JSON_VALID(p_queue_ids_json) OR JSON_TYPE(p_queue_ids_json) <> 'ARRAY'
     OR JSON_LENGTH(p_queue_ids_json) > 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: queue_ids must be an array of at most 1000 queue ids ([] = all)';
  END IF;
  IF p_token_hash IS NULL OR LENGTH(p_token_hash) <> 32 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: token_hash must be a 32-byte SHA-256';
  END IF;
  IF p_scopes IS NULL OR p_scopes = '' OR p_scopes NOT REGEXP
     '^((queues:manage|tasks:submit|tasks:read|workers:connect|workers:consume|metrics:read)(,|$))+$' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: scopes must be a comma-separated list of known scopes';
  END IF;
  IF CHAR_LENGTH(COALESCE(p_label, '')) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: label must be at most 191 characters';
  END IF;
  SELECT a.id INTO v_application_id FROM orbit_application a WHERE a.name = p_application;
  IF v_application_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: application not found';
  END IF;
  SELECT e.id INTO v_environment_id FROM orbit_environment e
   WHERE e.application_id = v_application_id AND e.name = p_environment;
  IF v_environment_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: environment not found in the application';
  END IF;
  SELECT n.id INTO v_namespace_id FROM orbit_namespace n
   WHERE n.environment_id = v_environment_id AND n.name = p_namespace;
  IF v_namespace_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: namespace not found in the environment';
  END IF;
  SET v_count = JSON_LENGTH(p_queue_ids_json);
  WHILE v_i < v_count DO
    SET v_queue_id = JSON_UNQUOTE(JSON_EXTRACT(p_queue_ids_json, CONCAT('$[', v_i, ']')));
    -- Queues are never deleted, so checking before the transaction is enough.
    SELECT COUNT(*) INTO v_found FROM orbit_queue q WHERE q.id = v_queue_id AND q.namespace_id = v_namespace_id;
    IF v_queue_id = '' OR v_found = 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: queue not found in the namespace';
    END IF;
    SET v_i = v_i + 1;
  END WHILE;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO orbit_credential (application_id, environment_id, label, token_hash, token_hint, scopes, created_at)
  VALUES (v_application_id, v_environment_id, COALESCE(p_label, ''), p_token_hash, LEFT(COALESCE(p_token_hint, ''), 8),
          p_scopes, v_now);
  IF v_duplicate THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: a credential with this token hash already exists';
  END IF;
  SET v_credential_id = LAST_INSERT_ID();
  IF v_count = 0 THEN
    INSERT INTO orbit_credential_scope (credential_id, namespace_id, queue_id) VALUES (v_credential_id, v_namespace_id, '');
  END IF;
  SET v_i = 0;
  WHILE v_i < v_count DO
    -- INSERT IGNORE: a queue listed twice is granted once.
    INSERT IGNORE INTO orbit_credential_scope (credential_id, namespace_id, queue_id)
    VALUES (v_credential_id, v_namespace_id, JSON_UNQUOTE(JSON_EXTRACT(p_queue_ids_json, CONCAT('$[', v_i, ']'))));
    SET v_i = v_i + 1;
  END WHILE;
  COMMIT;
  SELECT v_credential_id AS credential_id, v_application_id AS application_id, v_environment_id AS environment_id,
         v_namespace_id AS namespace_id;
END$$
DELIMITER ;
