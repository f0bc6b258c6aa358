-- orbit_key_release: Internal: release an attempt's key permit and hand the key on.
--
-- Frees the permit's slot (slot 0: the resource row's holder_attempt_id; 1 and up: its
-- orbit_key_slot row), only if this attempt holds it: a late or duplicate release changes
-- nothing. Counts the key's holders down and advances its version (the caller records it as the
-- attempt's release_version, in the update that ends the attempt), and makes the key's blocked
-- tasks claimable, all in the caller's transaction:
--   p_hand_off = 0, or a key that may have more than one holder or waits for its rate: one blocked
--     task per queue that has blocked tasks of the key, where the key has room
--     (orbit_key_promote_all);
--   p_hand_off = 1 and a key of one holder that its holder frees: none. The key's next task,
--     the best queue head (priority, then age) over those queues, is returned (p_head) for the
--     caller's grant in the same transaction (orbit_attempt_finish, through the attempt's
--     handoff_task_id), which takes it straight from the blocked lane: readying it first would
--     cost a write of the task row and a scan of the ready lane to find it again. The caller
--     must call orbit_key_promote_all after its grant if the key still has room.
-- Cost: one index probe per queue with blocked tasks of the key, independent of how many tasks
-- are blocked.
-- Parameters: p_resource_id; p_attempt_id; p_slot (the attempt's key_slot); p_now; p_hand_off
--   (0 or 1); OUT p_head: with the hand-off of one holder's key, the key's next task (left in the
--   blocked lane, unlocked), otherwise, or when this attempt held no permit, 0; OUT p_release_version: the resource row's
--   version this release wrote, for the caller to record as the attempt's release_version (0
--   when this attempt held no permit: nothing written).
-- Result: none. Signals: none.
-- Locks: (the caller holds the attempt's row already) the orbit_resource row (updated), the
--   orbit_key_slot row (slots 1 and up), then the promoted task rows (SKIP LOCKED).
CREATE PROCEDURE orbit_key_release(IN p_resource_id BIGINT UNSIGNED, IN p_attempt_id BIGINT UNSIGNED,
                                   IN p_slot SMALLINT UNSIGNED, IN p_now DATETIME(6),
                                   IN p_hand_off TINYINT, OUT p_head BIGINT UNSIGNED,
                                   OUT p_release_version BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT '';
  DECLARE v_priority INT;
  DECLARE v_head BIGINT UNSIGNED;
  DECLARE v_last_queue_id CHAR(32) {{ c.ascii }};
  DECLARE v_best_priority INT;
  DECLARE v_best BIGINT UNSIGNED;
  SET p_head = 0, p_release_version = 0;
  -- The common case in one update: a key of one holder, not waiting for its rate, freed by its
  -- holder (slot 0). It writes nothing otherwise. The version written is read back without a
  -- statement: LAST_INSERT_ID(expr) returns expr and keeps it for LAST_INSERT_ID() (the
  -- documented counter idiom of MariaDB and MySQL).
  UPDATE orbit_resource r
     SET r.holder_attempt_id = 0, r.holders = r.holders - 1, r.version = LAST_INSERT_ID(r.version + 1),
         r.updated_at = p_now
   WHERE r.id = p_resource_id AND r.holder_attempt_id = p_attempt_id AND p_slot = 0
     AND r.holder_limit = 1 AND r.rate_wake_at IS NULL;
  IF ROW_COUNT() = 0 THEN
    -- Otherwise the attempt's slot, if the attempt still holds it: slot 0 (a key of several
    -- holders, or one that waits for its rate) in one update of the row as above; another slot
    -- in its orbit_key_slot row, under the resource row's lock, then the count on the row.
    IF p_slot = 0 THEN
      UPDATE orbit_resource r
         SET r.holder_attempt_id = 0, r.holders = r.holders - 1, r.version = LAST_INSERT_ID(r.version + 1),
             r.updated_at = p_now
       WHERE r.id = p_resource_id AND r.holder_attempt_id = p_attempt_id;
      IF ROW_COUNT() = 0 THEN
        LEAVE body;
      END IF;
    ELSE
      SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = p_resource_id FOR UPDATE;
      UPDATE orbit_key_slot s
         SET s.attempt_id = 0, s.updated_at = p_now
       WHERE s.resource_id = p_resource_id AND s.slot = p_slot AND s.attempt_id = p_attempt_id;
      IF ROW_COUNT() = 0 THEN
        LEAVE body;
      END IF;
      UPDATE orbit_resource r
         SET r.holders = r.holders - 1, r.version = LAST_INSERT_ID(r.version + 1), r.updated_at = p_now
       WHERE r.id = p_resource_id;
    END IF;
    SET p_release_version = LAST_INSERT_ID();
    -- Several may hold the key, or it waits for its rate: each queue's head, where it has room.
    CALL orbit_key_promote_all(p_resource_id, p_now);
    LEAVE body;
  END IF;
  SET p_release_version = LAST_INSERT_ID();
  IF NOT p_hand_off THEN
    CALL orbit_key_promote_all(p_resource_id, p_now);
    LEAVE body;
  END IF;
  -- Each queue's head, in queue id order: ix_task_key's order, so each probe reads one entry
  -- past the previous queue (the tasks a grant may not take, blocked_reason set, are passed over).
  -- Plain reads (the caller's grant locks the head it takes): locking reads here would also lock
  -- and pass over the entries the key's last hand-offs moved out of the lane and purge has not
  -- removed yet (BENCHMARKS.md, hotkey). FORCE INDEX, as in every probe
  -- of ix_task_key: without it the optimizer estimates the range in each index that starts with
  -- queue_id or lane as well (five of them, two B-tree dives each), which costs more than the
  -- probe.
  -- The first probe also reads the last queue with blocked tasks of the key (one entry, from the
  -- range's end; COALESCE evaluates it only while v_last_queue_id is NULL), so the walk stops at
  -- it without a probe that finds nothing: most keys have blocked tasks in one queue.
  heads: LOOP
    SET v_head = NULL;
    SELECT t.queue_id, t.priority, t.id,
           COALESCE(v_last_queue_id,
                    (SELECT MAX(l.queue_id) FROM orbit_task l FORCE INDEX (ix_task_key)
                      WHERE l.resource_id = p_resource_id AND l.lane = 'blocked'))
      INTO v_queue_id, v_priority, v_head, v_last_queue_id
      FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = p_resource_id AND t.lane = 'blocked' AND t.queue_id > v_queue_id
       AND t.blocked_reason = ''
     ORDER BY t.queue_id, t.priority, t.id
     LIMIT 1;
    IF v_head IS NULL THEN
      LEAVE heads;
    END IF;
    IF v_best IS NULL OR v_priority < v_best_priority OR (v_priority = v_best_priority AND v_head < v_best) THEN
      SET v_best_priority = v_priority, v_best = v_head;
    END IF;
    IF v_queue_id >= v_last_queue_id THEN
      LEAVE heads;
    END IF;
  END LOOP heads;
  SET p_head = COALESCE(v_best, 0);
END
