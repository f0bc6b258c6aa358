-- orbit_key_rate_check: Internal: when a key's rate lets its next grant come, in the caller's transaction.
--
-- A key policy's rate: at most p_rate_grants (G) grants of the key in any p_rate_seconds. Grant
-- k = p_highest + 1 may come when grant k - G is that long ago, and not before grant k - 1 (so
-- grant times never go back). Both times come from orbit_key_rate_log, one row per position
-- token mod G; grant k - G from the key's attempts when the log does not hold it (the rate
-- changed or was just set). Plain reads, exact under the caller's lock on the key's resource row,
-- under which every grant of the key and every log row is written. orbit_attempt_grant calls this
-- for a key with a rate: a grant that would come before o_allowed goes back to the blocked lane
-- and the key waits for rate_wake_at (orbit_task_promote_due); one that may come writes its
-- time at its position of the log (updated when o_logged, inserted otherwise).
-- Parameters: p_resource_id; p_highest (the key's highest token granted so far); p_rate_grants
--   (G, 1 or more); p_rate_seconds; p_now.
-- Out: o_allowed (the earliest time grant k may come: p_now when it may come now);
--   o_logged (1 when grant k's position of orbit_key_rate_log has a row).
-- Result: none. Signals: none.
-- Locks: none (the caller holds the orbit_resource row).
CREATE PROCEDURE orbit_key_rate_check(
  IN p_resource_id BIGINT UNSIGNED,
  IN p_highest BIGINT UNSIGNED,
  IN p_rate_grants SMALLINT UNSIGNED,
  IN p_rate_seconds INT UNSIGNED,
  IN p_now DATETIME(6),
  OUT o_allowed DATETIME(6),
  OUT o_logged TINYINT)
  READS SQL DATA
BEGIN
  -- The times of grants k - G and k - 1.
  DECLARE v_then DATETIME(6);
  DECLARE v_last DATETIME(6);
  DECLARE v_back INT;
  SELECT MAX(IF(l.token + p_rate_grants = p_highest + 1, l.granted_at, NULL)),
         MAX(IF(l.token = p_highest, l.granted_at, NULL)),
         MAX(l.position = (p_highest + 1) % p_rate_grants)
    INTO v_then, v_last, o_logged
    FROM orbit_key_rate_log l
   WHERE l.resource_id = p_resource_id
     AND l.position IN ((p_highest + 1) % p_rate_grants, p_highest % p_rate_grants);
  IF v_then IS NULL AND p_highest >= p_rate_grants THEN
    SET v_back = p_rate_grants - 1;
    SELECT a.granted_at INTO v_then
      FROM orbit_attempt a FORCE INDEX (ix_attempt_resource)
     WHERE a.resource_id = p_resource_id
     ORDER BY a.id DESC
     LIMIT v_back, 1;
  END IF;
  SET o_allowed = GREATEST(COALESCE(DATE_ADD(v_then, INTERVAL p_rate_seconds SECOND), p_now),
                           COALESCE(v_last, p_now));
END
