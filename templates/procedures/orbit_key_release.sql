-- orbit_key_release: Internal: release an attempt's key permit and hand the key on.
--
-- Deletes the permit (only if this attempt holds it: a late or duplicate release changes nothing),
-- advances the resource row's version (recorded as the attempt's release_version), and promotes one blocked task per queue that has blocked
-- tasks of the key (orbit_key_promote), all in the caller's transaction. Cost: one index probe
-- per such queue, independent of how many tasks are blocked.
-- Parameters: p_resource_id; p_attempt_id; p_now.
-- Result: none. Signals: none.
-- Locks: orbit_resource row FOR UPDATE, then the promoted task rows (SKIP LOCKED).
CREATE PROCEDURE orbit_key_release(IN p_resource_id BIGINT UNSIGNED, IN p_attempt_id BIGINT UNSIGNED, IN p_now DATETIME(6))
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_lock BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT '';
  SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = p_resource_id FOR UPDATE;
  DELETE FROM orbit_key_permit WHERE resource_id = p_resource_id AND attempt_id = p_attempt_id;
  IF ROW_COUNT() = 0 THEN
    LEAVE body;
  END IF;
  UPDATE orbit_resource r SET r.version = r.version + 1, r.updated_at = p_now WHERE r.id = p_resource_id;
  UPDATE orbit_attempt a
     SET a.release_version = (SELECT r.version FROM orbit_resource r WHERE r.id = p_resource_id)
   WHERE a.id = p_attempt_id;
  -- Walk the queues that have blocked tasks of this key, in queue id order.
  queues: LOOP
    SELECT MIN(t.queue_id) INTO v_queue_id
      FROM orbit_task t
     WHERE t.resource_id = p_resource_id AND t.lane = 'blocked' AND t.queue_id > v_queue_id;
    IF v_queue_id IS NULL THEN
      LEAVE queues;
    END IF;
    CALL orbit_key_promote(p_resource_id, v_queue_id, p_now);
  END LOOP queues;
END
