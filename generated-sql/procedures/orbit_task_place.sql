-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_place.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_place: Internal: put a WAITING or RETRY_WAIT task into its dispatch lane.
--
-- The caller holds the task row lock. A task whose run_at is in the future goes to 'scheduled'.
-- An unkeyed task goes to 'ready'. A keyed task goes to 'ready' only when its key has room for
-- another holder (m::key_full) and its queue has no ready task of that key yet (at most one ready
-- task per key and queue); otherwise it goes to 'blocked', outside the range the claim scans. Every change of a
-- keyed task into or out of 'ready' happens under the resource row lock, so the check below is
-- exact under READ COMMITTED.
-- Parameters: p_task_id; p_now (the caller's UTC timestamp).
-- Out: o_state (WAITING, or RETRY_WAIT for a retry scheduled later), o_lane (the lane it went to).
-- Result: none. Signals: none.
-- Locks: orbit_resource row FOR UPDATE (keyed tasks).
DROP PROCEDURE IF EXISTS orbit_task_place;
DELIMITER $$
CREATE PROCEDURE orbit_task_place(IN p_task_id BIGINT UNSIGNED, IN p_now DATETIME(6),
                                  OUT o_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin, OUT o_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_run_at DATETIME(6) DEFAULT NULL;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT 'ready';
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_attempt_count INT UNSIGNED DEFAULT 0;
  SELECT t.queue_id, t.resource_id, t.run_at, t.attempt_count INTO v_queue_id, v_resource_id, v_run_at, v_attempt_count
    FROM orbit_task t
   WHERE t.id = p_task_id;
  IF v_run_at > p_now THEN
    SET v_lane = 'scheduled';
  ELSEIF v_resource_id <> 0 THEN
    SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = v_resource_id FOR UPDATE;
    -- A plain read (a subquery of a locking read takes locks); exact under the resource lock.
    SELECT IF((r.holders >= r.holder_limit OR COALESCE(r.rate_wake_at > p_now, 0))
              OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                          WHERE h.resource_id = r.id AND h.lane = 'ready' AND h.queue_id = v_queue_id),
              'blocked', 'ready')
      INTO v_lane
      FROM orbit_resource r
     WHERE r.id = v_resource_id;
  END IF;
  SET o_state = IF(v_lane = 'scheduled' AND v_attempt_count > 0, 'RETRY_WAIT', 'WAITING'), o_lane = v_lane;
  UPDATE orbit_task t
     SET t.state = o_state, t.lane = v_lane, t.updated_at = p_now
   WHERE t.id = p_task_id;
END$$
DELIMITER ;
