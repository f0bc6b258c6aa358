{% import "_macros.sql" as m %}
-- orbit_task_create: Internal: create one accepted task inside the caller's transaction.
--
-- Shared by orbit_task_submit and orbit_plan_fire_due, so a submitted and a plan-fired task are
-- created by the same code: the key's resource row (insert or lock), the task row, its lane
-- (orbit_task_place), the history event, and the application's incomplete-task counter. The
-- definition must already be validated (orbit_task_validate). When the incomplete-task quota is
-- full, o_task_id is 0 and the caller must roll back what this call wrote. The counter is charged
-- to one quota slot (see orbit_application_quota): the connection's slot when it is within its
-- share, otherwise, under a lock on every slot and an exact check of the total, the lowest slot
-- below its share. The task row records the slot.
-- Parameters: p_application_id, p_namespace_id, p_queue_id (the queue's tenancy, already
--   authorised); the validated definition (see orbit_task_validate); p_idempotency_key ('' for a
--   plan-fired task); p_plan_id, p_plan_version (0 for a submitted task); p_now.
-- Out: o_task_id (0 = refused by the quota).
-- Result: none. Signals: none.
-- Locks, in order: orbit_resource row (keyed; insert or FOR UPDATE), the new orbit_task row,
--   orbit_application_quota slot rows: the connection's slot; or, when it cannot take the charge
--   alone, every slot of the application in ascending slot order.
CREATE PROCEDURE orbit_task_create(
  IN p_application_id BIGINT UNSIGNED,
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_queue_id TEXT {{ c.ascii }},
  {% call m::task_definition_params() %},
  IN p_idempotency_key BLOB,
  IN p_plan_id BIGINT UNSIGNED,
  IN p_plan_version INT UNSIGNED,
  IN p_now DATETIME(6),
  OUT o_task_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_slot TINYINT UNSIGNED DEFAULT {% call m::quota_slot() %};
  DECLARE v_limit BIGINT UNSIGNED;
  DECLARE v_total BIGINT UNSIGNED;
  DECLARE v_over INT;
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
          p_payload, p_business_key, p_concurrency_key, v_resource_id, 'WAITING', 'none', p_priority,
          p_max_attempts, 0, p_retry_base_ms, p_retry_max_ms, p_retry_unknown, p_now,
          IF(p_deadline_seconds > 0, DATE_ADD(p_now, INTERVAL p_deadline_seconds SECOND), NULL),
          p_idempotency_key, p_plan_id, p_plan_version, v_slot, p_now, p_now);
  SET o_task_id = LAST_INSERT_ID();
  CALL orbit_task_place(o_task_id, p_now);
  INSERT INTO orbit_task_event (task_id, event, to_state, detail, created_at)
  SELECT o_task_id, IF(p_plan_id = 0, 'submitted', 'plan_fired'), t.state,
         IF(p_plan_id = 0, CONCAT('lane ', t.lane), CONCAT('plan ', p_plan_id, ' version ', p_plan_version, ', lane ', t.lane)),
         p_now
    FROM orbit_task t WHERE t.id = o_task_id;
  UPDATE orbit_application_quota q
     SET q.incomplete_tasks = q.incomplete_tasks + 1, q.updated_at = p_now
   WHERE q.application_id = p_application_id AND q.slot = v_slot
     AND {% call m::quota_checked("q", "max_incomplete_tasks") %}
     AND q.incomplete_tasks < {% call m::quota_share("q", "max_incomplete_tasks") %};
  IF ROW_COUNT() = 0 THEN
    -- The connection's slot cannot take it alone (READ COMMITTED released that row): lock every
    -- slot in ascending order and check the exact total.
    SELECT MIN(q.max_incomplete_tasks), SUM(q.incomplete_tasks) INTO v_limit, v_total
      FROM orbit_application_quota q
     WHERE q.application_id = p_application_id
       FOR UPDATE;
    SET v_slot = NULL;
    IF v_total < v_limit THEN
      SELECT q.slot INTO v_slot
        FROM orbit_application_quota q
       WHERE q.application_id = p_application_id
         AND q.incomplete_tasks < {% call m::quota_share("q", "max_incomplete_tasks") %}
       ORDER BY q.slot
       LIMIT 1;
    END IF;
    IF v_slot IS NULL THEN
      SET o_task_id = 0;
    ELSE
      UPDATE orbit_application_quota q
         SET q.incomplete_tasks = q.incomplete_tasks + 1, q.updated_at = p_now
       WHERE q.application_id = p_application_id AND q.slot = v_slot;
      UPDATE orbit_task t SET t.quota_slot = v_slot WHERE t.id = o_task_id;
      SELECT COUNT(*) INTO v_over
        FROM orbit_application_quota q
       WHERE q.application_id = p_application_id
         AND q.incomplete_tasks > {% call m::quota_share("q", "max_incomplete_tasks") %};
      IF v_over = 0 THEN
        -- Every slot is within its share of the current limit: one-slot charges may resume.
        UPDATE orbit_application_quota q
           SET q.checked_max_incomplete_tasks = q.max_incomplete_tasks
         WHERE q.application_id = p_application_id;
      END IF;
    END IF;
  END IF;
END
