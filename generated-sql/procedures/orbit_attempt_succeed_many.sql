-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_attempt_succeed_many.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_attempt_succeed_many: Internal: end a session's group of successes of its active, unkeyed attempts, all or none, in the caller's transaction.
--
-- The usual group of a worker's results (orbit_attempt_finish): successes, each for a different
-- attempt. Each attempt is ended as orbit_attempt_end ends a success, by the same two updates
-- (their SET lists are m::attempt_end_set and m::task_end_set; a test compares the rows), but
-- without a call and a locking read per result. The attempts are read once, in input order, by
-- a plain read. Each attempt is then checked where its update locks it (its WHERE: this
-- session's, still in the state read, active, holding no key); that update also releases its
-- queue permit (released_at). An active attempt's task is in the attempt's state, which the
-- task's update checks too. When a result finds no such attempt (none, another session's, a
-- keyed one, or one ended meanwhile), everything this call wrote is rolled back to its
-- savepoint: nothing is ended, and the caller ends every result on its own (orbit_attempt_end).
-- As with orbit_attempt_end, the caller then writes the history and gives back the quota
-- charges, from the rows.
-- Parameters: p_session_id; p_results (orbit_attempt_finish's, checked there: a JSON array of
--   results, each for a different attempt, every outcome succeeded); p_now.
-- Out: o_ended (1 = every result's attempt was ended; 0 = none was).
-- Result: none. Signals: none.
-- Locks, in order: per result, in input order: its orbit_attempt row, then its orbit_task row.
DROP PROCEDURE IF EXISTS orbit_attempt_succeed_many;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_succeed_many(
  IN p_session_id BIGINT UNSIGNED,
  IN p_results MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_now DATETIME(6),
  OUT o_ended TINYINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_count INT DEFAULT JSON_LENGTH(p_results);
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_ord INT;
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  -- Result v_i, read out of p_results once, and the members it stores.
  DECLARE v_result MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_retryable TINYINT;
  DECLARE v_output MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_error MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  -- The results' attempts in input order, as they were before (each is checked again where
  -- locked).
  DECLARE c_group CURSOR FOR
    SELECT r.ord, a.id, a.task_id, a.state
      FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY, attempt_id BIGINT UNSIGNED PATH '$.attempt_id',
                  outcome VARCHAR(16) PATH '$.outcome')) r
      STRAIGHT_JOIN orbit_attempt a ON a.id = r.attempt_id
     ORDER BY r.ord;
  SET o_ended = 1;
  SAVEPOINT orbit_attempt_succeed_many;
  OPEN c_group;
  WHILE o_ended AND v_i < v_count DO
    -- (A result for no attempt leaves a gap in the cursor's ord.)
    fetch_group: BEGIN
      DECLARE CONTINUE HANDLER FOR NOT FOUND SET o_ended = 0;
      FETCH c_group INTO v_ord, v_attempt_id, v_task_id, v_state;
    END fetch_group;
    SET o_ended = o_ended AND v_ord = v_i + 1;
    IF o_ended THEN
      SET v_result = JSON_EXTRACT(p_results, CONCAT('$[', v_i, ']'));
      SET v_retryable = COALESCE(JSON_UNQUOTE(JSON_EXTRACT(v_result, '$.retryable')) = 'true', 0),
        v_output = NULLIF(JSON_EXTRACT(v_result, '$.output'), 'null'),
        v_error = NULLIF(JSON_EXTRACT(v_result, '$.error'), 'null');
      UPDATE orbit_attempt a
         SET a.state = 'SUCCEEDED', a.outcome = 'succeeded', a.retryable = COALESCE(v_retryable, 0),
             a.output = v_output, a.error = v_error, a.released_at = p_now
       WHERE a.id = v_attempt_id AND a.session_id = p_session_id AND a.state = v_state
         AND a.state IN ('LEASED', 'RUNNING') AND a.resource_id = 0;
      SET o_ended = ROW_COUNT() = 1;
    END IF;
    IF o_ended THEN
      UPDATE orbit_task t
         SET t.state = 'SUCCEEDED', t.lane = 'none',
             t.run_at = IF('SUCCEEDED' IN ('WAITING', 'RETRY_WAIT'), DATE_ADD(p_now, INTERVAL 0 * 1000 MICROSECOND), t.run_at),
             t.output = IF('succeeded' = 'succeeded', v_output, t.output),
             t.error = IF('succeeded' IN ('failed', 'unknown'), NULL, t.error),
             t.finished_at = IF(1, p_now, NULL), t.updated_at = p_now
       WHERE t.id = v_task_id AND t.current_attempt_id = v_attempt_id AND t.state = v_state;
      SET o_ended = ROW_COUNT() = 1;
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  CLOSE c_group;
  IF NOT o_ended THEN
    ROLLBACK TO SAVEPOINT orbit_attempt_succeed_many;
  END IF;
END$$
DELIMITER ;
