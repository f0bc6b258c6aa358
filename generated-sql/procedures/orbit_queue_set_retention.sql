-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_queue_set_retention.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_queue_set_retention: Set how long a queue's finished tasks are kept.
--
-- Applies to every finished task of the queue, those finished before the change included: the
-- next orbit_task_purge deletes the queue's tasks that finished more than p_retention_seconds ago.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the queue); p_queue_id;
--   p_retention_seconds 60-315360000.
-- Result (one row): the queue columns and retention_seconds (see orbit_queue_create).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT.
-- Locks: the orbit_queue row.
DROP PROCEDURE IF EXISTS orbit_queue_set_retention;
DELIMITER $$
CREATE PROCEDURE orbit_queue_set_retention(IN p_token_hash BINARY(32), IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_retention_seconds BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL orbit_auth_queue_check(p_token_hash, 'queues:manage', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  IF p_retention_seconds IS NULL
     OR p_retention_seconds NOT BETWEEN 60 AND 315360000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: retention_seconds must be between 60 and 315360000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  UPDATE orbit_queue q
     SET q.retention_seconds = p_retention_seconds, q.updated_at = v_now
   WHERE q.id = p_queue_id;
  COMMIT;
  SELECT q.id AS queue_id, q.namespace_id, q.name, q.paused,
         q.max_active_attempts, q.created_at, q.updated_at, q.retention_seconds FROM orbit_queue q WHERE q.id = p_queue_id;
END$$
DELIMITER ;
