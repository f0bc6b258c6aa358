-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_expire_due.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_expire_due: Expire waiting tasks whose total deadline has passed.
--
-- WAITING and RETRY_WAIT tasks (lanes ready, blocked, scheduled) past deadline_at become EXPIRED.
-- A ready keyed task hands its queue's slot of the key to the next blocked task. Tasks already
-- LEASED or RUNNING finish by their lease or result. One short transaction per task.
-- Parameters: p_limit 1-10000.
-- Result (one row): expired INT, next_deadline_at DATETIME(6) (earliest deadline of a waiting task,
--   NULL when none).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per task in order: orbit_task row, orbit_resource row (ready keyed task), promoted task
--   rows (SKIP LOCKED), the orbit_application_quota slot row the task charged (orbit_task.quota_slot).
DROP PROCEDURE IF EXISTS orbit_task_expire_due;
DELIMITER $$
CREATE PROCEDURE orbit_task_expire_due(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_deadline DATETIME(6);
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_slot TINYINT UNSIGNED;
  DECLARE v_expired INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  due: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_task_id = NULL;
    -- The earliest due task of each lane, then the earliest of the three.
    SELECT d.id INTO v_task_id
      FROM (
                  (SELECT t.id, t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'ready' AND t.deadline_at <= v_now ORDER BY t.deadline_at LIMIT 1)
                  UNION ALL
                  (SELECT t.id, t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'blocked' AND t.deadline_at <= v_now ORDER BY t.deadline_at LIMIT 1)
                  UNION ALL
                  (SELECT t.id, t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'scheduled' AND t.deadline_at <= v_now ORDER BY t.deadline_at LIMIT 1)) d
     ORDER BY d.deadline_at
     LIMIT 1;
    IF v_task_id IS NULL THEN
      LEAVE due;
    END IF;
    SET v_seen = v_seen + 1;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
    SELECT t.lane, t.state, t.deadline_at, t.resource_id, t.queue_id, t.application_id, t.quota_slot
      INTO v_lane, v_state, v_deadline, v_resource_id, v_queue_id, v_application_id, v_slot
      FROM orbit_task t
     WHERE t.id = v_task_id
       FOR UPDATE;
    IF v_lane IN ('ready', 'blocked', 'scheduled') AND v_deadline <= v_now THEN
      IF v_resource_id <> 0 AND v_lane = 'ready' THEN
        SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = v_resource_id FOR UPDATE;
      END IF;
      UPDATE orbit_task t
     SET t.state = 'EXPIRED', t.lane = 'none', t.finished_at = v_now, t.updated_at = v_now
   WHERE t.id = v_task_id;
  INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
  VALUES (v_task_id, 'deadline_expired', v_state, 'EXPIRED', 'total deadline passed', v_now);
      IF v_resource_id <> 0 AND v_lane = 'ready' THEN
        CALL orbit_key_promote(v_resource_id, v_queue_id, v_now);
      END IF;
      UPDATE orbit_application_quota q
         SET q.incomplete_tasks = q.incomplete_tasks - 1, q.updated_at = v_now
       WHERE q.application_id = v_application_id AND q.slot = v_slot;
      SET v_expired = v_expired + 1;
    END IF;
    COMMIT;
  END WHILE due;
  SELECT v_expired AS expired,
         (SELECT MIN(d.deadline_at)
            FROM (
                  (SELECT t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'ready' AND t.deadline_at IS NOT NULL ORDER BY t.deadline_at LIMIT 1)
                  UNION ALL
                  (SELECT t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'blocked' AND t.deadline_at IS NOT NULL ORDER BY t.deadline_at LIMIT 1)
                  UNION ALL
                  (SELECT t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'scheduled' AND t.deadline_at IS NOT NULL ORDER BY t.deadline_at LIMIT 1)) d
         ) AS next_deadline_at;
END$$
DELIMITER ;
