-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_attempt_start.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_attempt_start: Confirm the execution right of leased attempts: LEASED -> RUNNING, each on its own, in one transaction.
--
-- Business code may run only after its attempt is accepted. The lease is re-checked inside the
-- transaction: an attempt whose lease has run out (or that recovery already ended) is rejected,
-- so a worker that was paused past its lease never starts. Starting an attempt that is already
-- RUNNING for the same session is accepted again (a repeated start message). A worker's start
-- messages that arrive together share one call and one commit (SPEC §10); each attempt is
-- answered on its own, in the order given. No history row: the attempt's started_at records the
-- start (see orbit_task_event).
-- Parameters: p_session_id; p_attempt_ids: a JSON array of 1-1000 attempt ids.
-- Result (one row): answers, a JSON array with one object per id in input order {"attempt_id",
--   "accepted" (0/1), "code" ("" when accepted; LEASE_EXPIRED, NOT_FOUND (no such attempt, or
--   another session's: one answer) or STATE_CONFLICT (attempt ended)), "state" (the attempt's state
--   after the call; "" when not found or foreign), "lease_expires_at" (UTC, RFC 3339; null when
--   not found or foreign), "concurrency_token" (0 when not found or foreign)}.
-- Signals: INVALID_ARGUMENT (p_attempt_ids), UNAUTHENTICATED (the session is closed: its socket
--   went away, the sweep closed it, or its credential was revoked); none for the answers above.
-- Locks, in order, per id: orbit_attempt row, orbit_task row.
DROP PROCEDURE IF EXISTS orbit_attempt_start;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_start(IN p_session_id BIGINT UNSIGNED, IN p_attempt_ids TEXT CHARACTER SET ascii COLLATE ascii_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_count INT DEFAULT 0;
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_session_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6);
  DECLARE v_token BIGINT UNSIGNED;
  DECLARE v_code VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_answers MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_session_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_attempt_ids IS NULL OR NOT JSON_VALID(p_attempt_ids) OR JSON_TYPE(p_attempt_ids) <> 'ARRAY'
     OR JSON_LENGTH(p_attempt_ids) NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: attempt_ids must be a JSON array of 1-1000 ids';
  END IF;
  SET v_count = JSON_LENGTH(p_attempt_ids), v_i = 0;
  WHILE v_i < v_count DO
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']'))), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
       OR JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']')) < 1 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: attempt_ids must be positive integers';
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  SET v_session_state = NULL;
  SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id;
  IF v_session_state IS NULL OR v_session_state = 'closed' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: the session is closed';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET v_i = 0;
  WHILE v_i < v_count DO
    SET v_attempt_id = CAST(JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']')) AS UNSIGNED),
        v_session_id = NULL, v_state = '', v_expires = NULL, v_token = 0, v_code = '';
    SELECT a.session_id, a.state, a.task_id, a.lease_expires_at, a.concurrency_token
      INTO v_session_id, v_state, v_task_id, v_expires, v_token
      FROM orbit_attempt a
     WHERE a.id = v_attempt_id
       FOR UPDATE;
    IF v_session_id IS NULL THEN
      SET v_code = 'NOT_FOUND';
    ELSEIF v_session_id <> p_session_id THEN
      SET v_code = 'NOT_FOUND';
    ELSEIF v_state = 'RUNNING' THEN
      SET v_code = '';
    ELSEIF v_state <> 'LEASED' THEN
      SET v_code = 'STATE_CONFLICT';
    ELSEIF v_expires <= v_now THEN
      SET v_code = 'LEASE_EXPIRED';
    ELSE
      SELECT t.id INTO v_lock FROM orbit_task t WHERE t.id = v_task_id FOR UPDATE;
      UPDATE orbit_attempt a SET a.state = 'RUNNING', a.started_at = v_now WHERE a.id = v_attempt_id;
      UPDATE orbit_task t SET t.state = 'RUNNING', t.updated_at = v_now WHERE t.id = v_task_id;
      SET v_state = 'RUNNING';
    END IF;
    IF v_code = 'NOT_FOUND' THEN
      SET v_state = '', v_expires = NULL, v_token = 0;
    END IF;
    SET v_answers = CONCAT(v_answers, IF(v_i > 0, ',', ''),
                           JSON_OBJECT('attempt_id', CAST(v_attempt_id AS UNSIGNED), 'accepted', CAST(v_code = '' AS UNSIGNED),
                                       'code', v_code, 'state', v_state, 'lease_expires_at', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                       'concurrency_token', CAST(v_token AS UNSIGNED))),
        v_i = v_i + 1;
  END WHILE;
  COMMIT;
  SELECT CONCAT('[', v_answers, ']') AS answers;
END$$
DELIMITER ;
