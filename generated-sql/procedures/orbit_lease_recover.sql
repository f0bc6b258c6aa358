-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_lease_recover.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_lease_recover: End attempts whose lease ran out, releasing their permits.
--
-- An expired LEASED attempt (never started) ends EXPIRED and its task returns to WAITING; an
-- expired RUNNING attempt ends UNKNOWN and its task goes to NEEDS_REVIEW (RETRY_WAIT if the task
-- declared retry_unknown and has attempts left). Either way the key's next grant gets a larger
-- token. Each attempt is recovered in its own short transaction, re-checked under its row lock, so
-- a renew or result that wins the race is respected. There is no manual unlock. The live leases
-- are the attempts that hold their permits (released_at NULL), by lease expiry
-- (ix_attempt_active_lease).
-- Parameters: p_limit 1-10000 (attempts to recover in this call).
-- Result (one row): recovered INT (attempts ended), next_expiry_at DATETIME(6) (earliest lease
--   still running, NULL when none: when to call again).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per attempt in order: orbit_attempt row, then as orbit_attempt_end, then the quota slot
--   row the attempt charged, where its task's incomplete charge goes back too
--   (m::quota_give_back_ended).
DROP PROCEDURE IF EXISTS orbit_lease_recover;
DELIMITER $$
CREATE PROCEDURE orbit_lease_recover(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6);
  DECLARE v_ended INT;
  DECLARE v_recovered INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  expired: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_attempt_id = NULL, v_state = NULL;
    SELECT a.id INTO v_attempt_id
      FROM orbit_attempt a FORCE INDEX (ix_attempt_active_lease)
     WHERE a.released_at IS NULL AND a.lease_expires_at <= v_now
     ORDER BY a.lease_expires_at
     LIMIT 1;
    IF v_attempt_id IS NULL THEN
      LEAVE expired;
    END IF;
    SET v_seen = v_seen + 1;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
    SELECT a.state, a.lease_expires_at, a.application_id
      INTO v_state, v_expires, v_application_id
      FROM orbit_attempt a
     WHERE a.id = v_attempt_id
       FOR UPDATE;
    IF v_state IN ('LEASED', 'RUNNING') AND v_expires <= v_now THEN
      CALL orbit_attempt_end(0 /* p_session_id */,
                             JSON_ARRAY(JSON_OBJECT('attempt_id', v_attempt_id, 'outcome', 'expired',
                                                    'error', JSON_OBJECT('code', 'LEASE_EXPIRED',
                                                                         'message', 'the lease ran out before a result'))) /* p_results */,
                             v_now, 0 /* p_hand_off */, v_ended);
      INSERT INTO orbit_task_event (task_id, attempt_id, event, from_state, to_state, concurrency_token, detail, created_at)
    SELECT a.task_id, a.id, CONCAT('attempt_', a.outcome), IF(a.started_at IS NULL, 'LEASED', 'RUNNING'), t.state,
           a.concurrency_token, CONCAT('attempt ', a.state, '; permits released'), v_now
      FROM (SELECT v_attempt_id AS id) e
      STRAIGHT_JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = e.id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id
     ORDER BY a.id;
      UPDATE (SELECT a.quota_slot AS slot, COUNT(*) AS active,
                 CAST(SUM(t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) AS SIGNED) AS incomplete
            FROM (SELECT x.quota_slot, x.task_id FROM orbit_attempt x WHERE x.id = v_attempt_id) a
            JOIN orbit_task t ON t.id = a.task_id
           GROUP BY a.quota_slot) g
    STRAIGHT_JOIN orbit_application_quota q ON q.application_id = v_application_id AND q.slot = g.slot
     SET q.active_attempts = q.active_attempts - g.active,
         q.incomplete_tasks = q.incomplete_tasks - g.incomplete,
         q.updated_at = v_now;
      SET v_recovered = v_recovered + v_ended;
    END IF;
    COMMIT;
  END WHILE expired;
  SELECT v_recovered AS recovered,
         (SELECT MIN(a.lease_expires_at) FROM orbit_attempt a FORCE INDEX (ix_attempt_active_lease)
           WHERE a.released_at IS NULL) AS next_expiry_at;
END$$
DELIMITER ;
