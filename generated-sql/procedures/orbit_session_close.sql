-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_session_close.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_session_close: Mark a session draining (no new grants) or closed (socket gone).
--
-- Releases nothing: the session's attempts keep their permits until their result or their lease
-- expiry (SPEC §4: stopping dispatch or disconnecting releases nothing directly).
-- Parameters: p_session_id; p_state 'draining' | 'closed'.
-- Result (one row): session_id, state, in_flight (LEASED + RUNNING attempts it still owns).
-- Signals: NOT_FOUND, INVALID_ARGUMENT.
-- Locks: orbit_session row.
DROP PROCEDURE IF EXISTS orbit_session_close;
DELIMITER $$
CREATE PROCEDURE orbit_session_close(IN p_session_id BIGINT UNSIGNED, IN p_state TEXT CHARACTER SET ascii COLLATE ascii_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_found INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF p_state IS NULL OR p_state NOT IN ('draining', 'closed') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: state must be draining or closed';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  UPDATE orbit_session s
     SET s.state = IF(s.state = 'closed', 'closed', p_state),
         s.closed_at = IF(p_state = 'closed', COALESCE(s.closed_at, v_now), s.closed_at),
         s.last_seen_at = v_now
   WHERE s.id = p_session_id;
  COMMIT;
  SELECT COUNT(*) INTO v_found FROM orbit_session s WHERE s.id = p_session_id;
  IF v_found = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: session not found';
  END IF;
  SELECT s.id AS session_id, s.state,
         (SELECT COUNT(*) FROM orbit_attempt a WHERE a.session_id = s.id AND a.state IN ('LEASED', 'RUNNING')) AS in_flight
    FROM orbit_session s
   WHERE s.id = p_session_id;
END$$
DELIMITER ;
