-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_session_sweep.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_session_sweep: Close open worker sessions not heard from for p_idle_ms (their socket is gone).
--
-- A session is closed by its server when its socket ends; when that write fails (the database
-- was busy or away), or the server died, the session would stay open for ever. The façade
-- touches last_seen_at on hello and at most once per lease on a worker's renewals
-- (orbit_session_attempts); a session silent for p_idle_ms (serve uses three leases) has no live
-- worker. Closing releases nothing: its attempts end by lease expiry as usual
-- (orbit_lease_recover). A frame that still arrives on such a session is refused
-- (UNAUTHENTICATED) and the server ends the socket. Safe from several servers at once.
-- Parameters: p_idle_ms 1000-86400000; p_limit 1-10000 (sessions closed at most).
-- Result (one row): closed INT (sessions closed), next_due_at DATETIME(6) (when the longest
--   silent open session reaches p_idle_ms; NULL when none is open).
-- Signals: INVALID_ARGUMENT.
-- Locks: the closed orbit_session rows (ix_session_seen range).
DROP PROCEDURE IF EXISTS orbit_session_sweep;
DELIMITER $$
CREATE PROCEDURE orbit_session_sweep(IN p_idle_ms INT, IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_closed INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF p_idle_ms IS NULL OR p_idle_ms NOT BETWEEN 1000 AND 86400000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: idle_ms must be between 1000 and 86400000';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  UPDATE orbit_session s FORCE INDEX (ix_session_seen)
     SET s.state = 'closed', s.closed_at = v_now
   WHERE s.state IN ('active', 'draining')
     AND s.last_seen_at < DATE_SUB(v_now, INTERVAL p_idle_ms * 1000 MICROSECOND)
   LIMIT p_limit;
  SET v_closed = ROW_COUNT();
  COMMIT;
  SELECT v_closed AS closed,
         DATE_ADD((SELECT MIN(s.last_seen_at) FROM orbit_session s WHERE s.state IN ('active', 'draining')),
                  INTERVAL p_idle_ms * 1000 MICROSECOND) AS next_due_at;
END$$
DELIMITER ;
