-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_create.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_create: Internal: create one accepted task inside the caller's transaction.
--
-- Shared by orbit_task_submit, orbit_task_submit_many and orbit_plan_fire_due, so every task is
-- created by the same code: the key's resource row (insert or lock), the task row, its lane
-- ('ready' for an unkeyed task, orbit_task_place for a keyed one) and (p_charge = 1) the application's incomplete-task counter (orbit_task_charge). The definition
-- must already be validated (orbit_task_validate). When the incomplete-task quota is full,
-- o_task_id is 0 and the caller must roll back what this call wrote. With p_charge = 0 the task
-- records the connection's quota slot and the caller charges it: orbit_task_submit_many charges a
-- whole batch with one statement, last. No history row: the task row's created_at, plan_id
-- and plan_version record the creation (see orbit_task_event). One exception: orbit_task_submit_many inserts a batch
-- without keys whole, writing the rows this writes for an unkeyed task (a test compares them).
-- Parameters: p_application_id, p_namespace_id, p_queue_id (the queue's tenancy, already
--   authorised); the validated definition (see orbit_task_validate); p_idempotency_key ('' for a
--   plan-fired task); p_plan_id, p_plan_version (0 for a submitted task); p_now; p_charge (1 =
--   charge the incomplete-task quota here, 0 = the caller does).
-- Out: o_task_id (0 = refused by the quota).
-- Result: none. Signals: none.
-- Locks, in order: orbit_resource row (keyed; insert or FOR UPDATE), the new orbit_task row,
--   then as orbit_task_charge (p_charge = 1).
DROP PROCEDURE IF EXISTS orbit_task_create;
DELIMITER $$
CREATE PROCEDURE orbit_task_create(
  IN p_application_id BIGINT UNSIGNED,
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
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
  IN p_deadline_seconds BIGINT,
  IN p_idempotency_key BLOB,
  IN p_plan_id BIGINT UNSIGNED,
  IN p_plan_version INT UNSIGNED,
  IN p_now DATETIME(6),
  IN p_charge TINYINT,
  OUT o_task_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_slot TINYINT UNSIGNED DEFAULT (CONNECTION_ID() % 16);
  DECLARE v_charged TINYINT DEFAULT 0;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  SET o_task_id = 0;
  IF p_concurrency_key <> '' THEN
    -- Insert-or-lock in one statement: ON DUPLICATE KEY UPDATE takes the row's exclusive lock
    -- directly, avoiding the shared-then-exclusive upgrade that deadlocks concurrent submitters.
    INSERT INTO orbit_resource (namespace_id, concurrency_key, highest_token, version, created_at, updated_at)
    VALUES (p_namespace_id, p_concurrency_key, 0, 0, p_now, p_now)
    ON DUPLICATE KEY UPDATE version = version;
    SELECT r.id INTO v_resource_id
      FROM orbit_resource r
     WHERE r.namespace_id = p_namespace_id AND r.concurrency_key = p_concurrency_key
       FOR UPDATE;
  END IF;
  INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                          payload, business_key, concurrency_key, resource_id, state, lane, priority,
                          max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
                          deadline_at, idempotency_key, plan_id, plan_version, quota_slot, created_at, updated_at)
  VALUES (p_application_id, p_namespace_id, p_queue_id, p_handler, p_handler_version, p_payload_version,
          p_payload, p_business_key, p_concurrency_key, v_resource_id, 'WAITING',
          IF(v_resource_id = 0, 'ready', 'none'), p_priority,
          p_max_attempts, 0, p_retry_base_ms, p_retry_max_ms, p_retry_unknown, p_now,
          IF(p_deadline_seconds > 0, DATE_ADD(p_now, INTERVAL p_deadline_seconds SECOND), NULL),
          p_idempotency_key, p_plan_id, p_plan_version, v_slot, p_now, p_now);
  SET o_task_id = LAST_INSERT_ID();
  -- An unkeyed task is due now and waits for nothing: it went straight into 'ready' above, where
  -- orbit_task_place would put it. A keyed one is placed behind its key.
  IF v_resource_id = 0 THEN
    SET v_state = 'WAITING', v_lane = 'ready';
  ELSE
    CALL orbit_task_place(o_task_id, p_now, v_state, v_lane);
  END IF;
  IF p_charge THEN
    CALL orbit_task_charge(p_application_id, p_now, v_charged);
    IF NOT v_charged THEN
      SET o_task_id = 0;
    END IF;
  END IF;
END$$
DELIMITER ;
