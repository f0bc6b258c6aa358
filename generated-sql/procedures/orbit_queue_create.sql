-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_queue_create.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_queue_create: Create a queue in one of the credential's namespaces.
--
-- Parameters: p_token_hash BINARY(32) (scope queues:manage, with every queue of the namespace in
--   scope); p_namespace_id (NULL = the credential's only namespace); p_name 1-191 characters;
--   p_max_active_attempts (queue permits; 0 or NULL = unlimited); p_retention_seconds (how long
--   finished tasks are kept, 60-315360000; NULL = the column default,
--   604800); p_new_queue_id (32 lowercase hex digits from a random source; NULL = derive one).
-- Result (one row): the queue columns: queue_id, namespace_id, name, paused, max_active_attempts,
--   created_at, updated_at, then retention_seconds.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (namespace), INVALID_ARGUMENT,
--   STATE_CONFLICT (a queue of that name exists in the namespace).
-- Locks: the new orbit_queue row.
DROP PROCEDURE IF EXISTS orbit_queue_create;
DELIMITER $$
CREATE PROCEDURE orbit_queue_create(
  IN p_token_hash BINARY(32),
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_name TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_max_active_attempts BIGINT,
  IN p_retention_seconds BIGINT,
  IN p_new_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_namespaces INT DEFAULT 0;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'queues:manage', v_application_id, v_environment_id, v_credential_id);
  -- Namespaces where the credential reaches every queue; creating a queue needs that.
  SELECT COUNT(*), MIN(s.namespace_id) INTO v_namespaces, v_namespace_id
    FROM orbit_credential_scope s
   WHERE s.credential_id = v_credential_id AND s.queue_id = ''
     AND (p_namespace_id IS NULL OR s.namespace_id = p_namespace_id);
  IF v_namespaces = 0 THEN
    IF p_namespace_id IS NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'PERMISSION_DENIED: the credential reaches no namespace as a whole';
    END IF;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: namespace not found';
  END IF;
  IF v_namespaces > 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: namespace_id is required: the credential reaches several namespaces';
  END IF;
  IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: name must be 1-191 characters';
  END IF;
  IF COALESCE(p_max_active_attempts, 0) NOT BETWEEN 0 AND 1000000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: max_active_attempts must be between 0 and 1000000';
  END IF;
  IF p_retention_seconds IS NOT NULL
     AND p_retention_seconds NOT BETWEEN 60 AND 315360000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: retention_seconds must be between 60 and 315360000';
  END IF;
  IF p_new_queue_id IS NOT NULL AND p_new_queue_id NOT REGEXP '^[0-9a-f]{32}$' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: queue id must be 32 lowercase hex digits';
  END IF;
  SET v_queue_id = COALESCE(p_new_queue_id, CONVERT(LEFT(SHA2(CONCAT(UUID(), RAND(), v_namespace_id, p_name), 256), 32) USING ascii));
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO orbit_queue (id, application_id, environment_id, namespace_id, name, max_active_attempts,
                           retention_seconds, created_at, updated_at)
  VALUES (v_queue_id, v_application_id, v_environment_id, v_namespace_id, p_name, COALESCE(p_max_active_attempts, 0),
          COALESCE(p_retention_seconds, 604800), v_now, v_now);
  IF v_duplicate THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: a queue with this name already exists in the namespace';
  END IF;
  COMMIT;
  SELECT q.id AS queue_id, q.namespace_id, q.name, q.paused,
         q.max_active_attempts, q.created_at, q.updated_at, q.retention_seconds FROM orbit_queue q WHERE q.id = v_queue_id;
END$$
DELIMITER ;
