-- orbit_key_promote_all: Internal: make a key's best blocked task ready in every queue that has blocked tasks of it, where the key has room.
--
-- The caller holds the resource row lock. Walks the queues that have blocked tasks of the key, in
-- queue id order, and calls orbit_key_promote for each (which promotes nothing while the key has
-- no room for another holder or the queue already has a ready task of the key). Cost: one index probe per
-- such queue, independent of how many tasks are blocked.
-- Parameters: p_resource_id; p_now.
-- Result: none. Signals: none.
-- Locks: the promoted orbit_task rows (SKIP LOCKED, via orbit_key_promote).
CREATE PROCEDURE orbit_key_promote_all(IN p_resource_id BIGINT UNSIGNED, IN p_now DATETIME(6))
  MODIFIES SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT '';
  queues: LOOP
    SELECT MIN(t.queue_id) INTO v_queue_id
      FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = p_resource_id AND t.lane = 'blocked' AND t.queue_id > v_queue_id;
    IF v_queue_id IS NULL THEN
      LEAVE queues;
    END IF;
    CALL orbit_key_promote(p_resource_id, v_queue_id, p_now);
  END LOOP queues;
END
