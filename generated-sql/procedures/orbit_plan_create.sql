-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_plan_create.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_plan_create: Create a plan: a named interval schedule that fires tasks into a queue.
--
-- Version 1 holds the schedule and the task definition, validated by the same rules as a submit
-- (orbit_task_validate); versions are immutable. Tasks fired from a version inherit its
-- concurrency_key verbatim (no interpolation). The first slot is now + interval.
-- Parameters (NULL = default where one is given):
--   p_token_hash BINARY(32)   SHA-256 of the bearer token (scope queues:manage on the queue)
--   p_queue_id                CHAR(32): where fired tasks go
--   p_name                    1-191 characters, unique within the queue's namespace
--   p_interval_seconds        1-31536000
--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none
-- Result (one row): the plan columns:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC), created_at,
--   updated_at, then the current version's schedule_kind ('interval'), schedule_spec (interval
--   seconds), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (queue), INVALID_ARGUMENT (naming the
--   field), STATE_CONFLICT (a plan of that name exists in the namespace).
-- Locks: the new orbit_plan and orbit_plan_version rows.
DROP PROCEDURE IF EXISTS orbit_plan_create;
DELIMITER $$
CREATE PROCEDURE orbit_plan_create(
  IN p_token_hash BINARY(32),
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_name TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_interval_seconds BIGINT,
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_plan_id BIGINT UNSIGNED;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_queue_check(p_token_hash, 'queues:manage', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: name must be 1-191 characters';
  END IF;
  IF p_interval_seconds IS NULL OR p_interval_seconds NOT BETWEEN 1 AND 31536000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: interval_seconds must be between 1 and 31536000';
  END IF;
  CALL orbit_task_validate(p_handler, p_handler_version, p_payload_version, p_payload, p_business_key,
                           p_concurrency_key, p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms,
                           p_retry_unknown, p_deadline_seconds);

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO orbit_plan (application_id, namespace_id, queue_id, name, current_version, paused, next_fire_at,
                          created_at, updated_at)
  VALUES (v_application_id, v_namespace_id, p_queue_id, p_name, 1, 0,
          DATE_ADD(v_now, INTERVAL p_interval_seconds SECOND), v_now, v_now);
  IF v_duplicate THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: a plan with this name already exists in the namespace';
  END IF;
  SET v_plan_id = LAST_INSERT_ID();
  INSERT INTO orbit_plan_version (plan_id, version, schedule_kind, schedule_spec, handler, handler_version,
                                  payload_version, payload, business_key, concurrency_key, priority, max_attempts,
                                  retry_base_ms, retry_max_ms, retry_unknown, deadline_seconds, created_at)
  VALUES (v_plan_id, 1, 'interval', CAST(p_interval_seconds AS CHAR), p_handler, p_handler_version,
          p_payload_version, p_payload, p_business_key, p_concurrency_key, p_priority, p_max_attempts,
          p_retry_base_ms, p_retry_max_ms, p_retry_unknown, p_deadline_seconds, v_now);
  COMMIT;
  SELECT p.id AS plan_id, p.queue_id, p.namespace_id, p.name,
         p.current_version, p.paused, p.next_fire_at, p.created_at, p.updated_at,
         v.schedule_kind, v.schedule_spec, v.handler, v.handler_version,
         v.payload_version, v.payload, v.business_key, v.concurrency_key,
         v.priority, v.max_attempts, v.retry_base_ms, v.retry_max_ms,
         v.retry_unknown, v.deadline_seconds
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = v_plan_id;
END$$
DELIMITER ;
