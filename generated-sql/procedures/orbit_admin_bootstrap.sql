-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_admin_bootstrap.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_admin_bootstrap: Create what is missing of application, environment, namespace and queue, plus a credential.
--
-- Operator entry point (`orbit admin bootstrap`), not reachable over HTTP: it takes no token.
-- Idempotent for the four objects (found by name); every call adds one new credential whose
-- hash the caller computed from a fresh random token. The credential reaches every queue of the
-- namespace (present and future).
-- Parameters: p_application, p_environment, p_namespace, p_queue: names, 1-191 characters;
--   p_new_queue_id: the id to give the queue if it is created (32 lowercase hex digits; NULL =
--   derive one); p_token_hash BINARY(32); p_token_hint (first 8 characters of the token);
--   p_scopes: comma-separated subset of queues:manage,tasks:submit,tasks:read,workers:connect,
--   workers:consume,metrics:read; p_label: free text.
-- Result (one row): application_id, environment_id, namespace_id, queue_id, credential_id.
-- Signals: INVALID_ARGUMENT.
-- Locks: the four objects' rows (insert or update), the new credential rows.
DROP PROCEDURE IF EXISTS orbit_admin_bootstrap;
DELIMITER $$
CREATE PROCEDURE orbit_admin_bootstrap(
  IN p_application TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_environment TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_namespace TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_queue TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_new_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_token_hash BINARY(32),
  IN p_token_hint TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_scopes TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_label TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF CHAR_LENGTH(COALESCE(p_application, '')) NOT BETWEEN 1 AND 191
     OR CHAR_LENGTH(COALESCE(p_environment, '')) NOT BETWEEN 1 AND 191
     OR CHAR_LENGTH(COALESCE(p_namespace, '')) NOT BETWEEN 1 AND 191
     OR CHAR_LENGTH(COALESCE(p_queue, '')) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: application, environment, namespace and queue names must be 1-191 characters';
  END IF;
  IF p_new_queue_id IS NOT NULL AND p_new_queue_id NOT REGEXP '^[0-9a-f]{32}$' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: queue id must be 32 lowercase hex digits';
  END IF;
  IF p_token_hash IS NULL OR LENGTH(p_token_hash) <> 32 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: token_hash must be a 32-byte SHA-256';
  END IF;
  IF p_scopes IS NULL OR p_scopes = '' OR p_scopes NOT REGEXP
     '^((queues:manage|tasks:submit|tasks:read|workers:connect|workers:consume|metrics:read)(,|$))+$' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: scopes must be a comma-separated list of known scopes';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO orbit_application (name, created_at) VALUES (p_application, v_now)
  ON DUPLICATE KEY UPDATE name = name;
  SELECT a.id INTO v_application_id FROM orbit_application a WHERE a.name = p_application;
  -- Every quota slot of the application (0..15), with the default limits.
  INSERT INTO orbit_application_quota (application_id, slot, updated_at)
  SELECT v_application_id, s.n, v_now
    FROM (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) s
  ON DUPLICATE KEY UPDATE application_id = application_id;
  INSERT INTO orbit_environment (application_id, name, created_at) VALUES (v_application_id, p_environment, v_now)
  ON DUPLICATE KEY UPDATE name = name;
  SELECT e.id INTO v_environment_id FROM orbit_environment e
   WHERE e.application_id = v_application_id AND e.name = p_environment;
  INSERT INTO orbit_namespace (application_id, environment_id, name, created_at)
  VALUES (v_application_id, v_environment_id, p_namespace, v_now)
  ON DUPLICATE KEY UPDATE name = name;
  SELECT n.id INTO v_namespace_id FROM orbit_namespace n
   WHERE n.environment_id = v_environment_id AND n.name = p_namespace;
  INSERT INTO orbit_queue (id, application_id, environment_id, namespace_id, name, created_at, updated_at)
  VALUES (COALESCE(p_new_queue_id, CONVERT(LEFT(SHA2(CONCAT(UUID(), RAND(), v_namespace_id, p_queue), 256), 32) USING ascii)),
          v_application_id, v_environment_id, v_namespace_id, p_queue, v_now, v_now)
  ON DUPLICATE KEY UPDATE name = name;
  SELECT q.id INTO v_queue_id FROM orbit_queue q WHERE q.namespace_id = v_namespace_id AND q.name = p_queue;
  INSERT INTO orbit_credential (application_id, environment_id, label, token_hash, token_hint, scopes, created_at)
  VALUES (v_application_id, v_environment_id, COALESCE(p_label, ''), p_token_hash, LEFT(COALESCE(p_token_hint, ''), 8),
          p_scopes, v_now);
  SET v_credential_id = LAST_INSERT_ID();
  INSERT INTO orbit_credential_scope (credential_id, namespace_id, queue_id) VALUES (v_credential_id, v_namespace_id, '');
  COMMIT;
  SELECT v_application_id AS application_id, v_environment_id AS environment_id, v_namespace_id AS namespace_id,
         v_queue_id AS queue_id, v_credential_id AS credential_id;
END$$
DELIMITER ;
