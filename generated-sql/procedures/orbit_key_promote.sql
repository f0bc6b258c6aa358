-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_key_promote.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_promote: Internal: make the best blocked task of one key and queue ready, if the key has room.
--
-- The caller holds the resource row lock. Promotes nothing when the key has no room for another
-- holder (its holder limit is reached, or its rate holds grants back: m::key_full) or the queue
-- already has a ready task of the key. Blocked tasks locked by someone else (being
-- cancelled or expired) are skipped, never waited for.
-- Parameters: p_resource_id; p_queue_id; p_now.
-- Result: none. Signals: none.
-- Locks: the promoted orbit_task row (FOR UPDATE SKIP LOCKED).
DROP PROCEDURE IF EXISTS orbit_key_promote;
DELIMITER $$
CREATE PROCEDURE orbit_key_promote(IN p_resource_id BIGINT UNSIGNED, IN p_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin, IN p_now DATETIME(6))
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_next BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_taken TINYINT DEFAULT 0;
  -- A plain read (SELECT ... INTO; IF EXISTS (...) would take shared locks): exact, because every
  -- change to the key's permits and ready tasks commits under the resource row lock we hold.
  SELECT EXISTS (SELECT 1 FROM orbit_resource k WHERE k.id = p_resource_id AND (k.holders >= k.holder_limit OR COALESCE(k.rate_wake_at > p_now, 0)))
      OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                  WHERE h.resource_id = p_resource_id AND h.lane = 'ready' AND h.queue_id = p_queue_id)
    INTO v_taken;
  IF v_taken THEN
    LEAVE body;
  END IF;
  SELECT t.id INTO v_next
    FROM orbit_task t FORCE INDEX (ix_task_key)
   WHERE t.resource_id = p_resource_id AND t.lane = 'blocked' AND t.queue_id = p_queue_id
     AND t.blocked_reason = ''
   ORDER BY t.priority, t.id
   LIMIT 1
   FOR UPDATE SKIP LOCKED;
  IF v_next IS NOT NULL THEN
    UPDATE orbit_task t SET t.lane = 'ready', t.updated_at = p_now WHERE t.id = v_next;
  END IF;
END$$
DELIMITER ;
