-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_attempt_end.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_attempt_end: Internal: end a set of active attempts, release their permits and move their tasks on.
--
-- The one place that decides what an ending means (SPEC §4), and the one path every ending takes:
-- a worker's results (one or a group: orbit_attempt_finish), a cancel (orbit_task_cancel, a key
-- policy's cancel in orbit_task_create) and lease recovery (orbit_lease_recover), each a set of
-- one or more results. Every result's attempt row is locked first, in input order, in one read
-- (a caller that checked an attempt under its own lock reads it again); then the results are
-- taken in input order, one at a time: each ends its attempt only while it is LEASED or RUNNING
-- and, with p_session_id, that session's. In the same
-- transaction an ending records the outcome and releases the queue permit (released_at),
-- releases the key permit (orbit_key_release, which hands the key to the next blocked task) and
-- moves the task. A result that ends nothing changes nothing, except that a result of the
-- session's for an attempt already ended with another outcome (by recovery or a cancel, or by an
-- earlier result) is kept as the attempt's late_result, acting on nothing. A result for no
-- attempt of the session, or a repeated one, changes nothing.
-- The caller then does, once for all the attempts it ended, from the rows this wrote: their
-- history rows (m::attempt_end_events, before anything else moves their tasks) and the quota
-- charges they free (the attempt's active attempt; the task's incomplete task when the task
-- ended; m::quota_give_back_ended): a session's group of results locks its slot row once.
-- Why one result at a time and not one UPDATE per table for the whole set: MariaDB updates only
-- the first table of a multi-table UPDATE's join in place (here the results' JSON_TABLE) and
-- buffers the others' new values in a temporary table, on disk for the TEXT output; and each
-- keyed ending records what its key's release wrote (BENCHMARKS.md, "What bounds").
--   succeeded           -> attempt SUCCEEDED, task SUCCEEDED
--   failed, retryable   -> attempt FAILED, task RETRY_WAIT after backoff (FAILED when no attempts are left)
--   failed              -> attempt FAILED, task FAILED
--   unknown             -> attempt UNKNOWN, task NEEDS_REVIEW (RETRY_WAIT if retry_unknown and attempts left)
--   expired (lease ran out) -> LEASED: attempt EXPIRED, task WAITING; RUNNING: as unknown
--   cancelled           -> attempt CANCELLED, task CANCELLED
-- Parameters: p_session_id (the session whose results these are; 0 = any: a cancel, recovery or
--   a policy's cancel); p_results (checked by the caller): a JSON array of results
--   {"attempt_id": N, "outcome": one of the above, "retryable": true/false (default false),
--   "output": JSON or null, "error": JSON or null}; p_now; p_hand_off: 1 when the caller grants
--   in the same transaction (see orbit_key_release; the key's next task it returns is recorded
--   as the attempt's handoff_task_id, for that grant).
-- Out: o_ended, how many attempts were ended.
-- Result: none. Signals: none (callers validate).
-- Locks, in order: every result's orbit_attempt row, in input order (one read, c_results); then
--   per result in input order: its orbit_task row (read FOR UPDATE for an outcome that needs its
--   retry settings, otherwise by its update, which comes before the key's release either way),
--   orbit_resource row and orbit_key_slot row (via orbit_key_release), promoted task rows (SKIP
--   LOCKED); no quota row (the caller's).
DROP PROCEDURE IF EXISTS orbit_attempt_end;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_end(
  IN p_session_id BIGINT UNSIGNED,
  IN p_results MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_now DATETIME(6),
  IN p_hand_off TINYINT,
  OUT o_ended INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_i INT DEFAULT 0;
  -- The result's position in p_results, from 1 (c_results' ord; v_i counts the results read).
  DECLARE v_ord INT;
  -- Result v_i (from 0), read out of p_results once (each JSON_EXTRACT parses the document up
  -- to the member), and its members.
  DECLARE v_result MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_outcome_in VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_retryable TINYINT;
  DECLARE v_output MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_error MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  -- Its attempt, as locked.
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_session_id BIGINT UNSIGNED;
  DECLARE v_attempt_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_key_slot SMALLINT UNSIGNED;
  -- Its task's retry settings (a failure or an unknown outcome only).
  DECLARE v_attempt_count INT UNSIGNED;
  DECLARE v_max_attempts INT UNSIGNED;
  DECLARE v_retry_base_ms INT UNSIGNED;
  DECLARE v_retry_max_ms INT UNSIGNED;
  DECLARE v_retry_unknown TINYINT;
  -- What the ending decides and what the key's release wrote.
  DECLARE v_outcome VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_attempts_left TINYINT;
  DECLARE v_delay_ms BIGINT UNSIGNED;
  DECLARE v_attempt_state_new VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_task_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_terminal TINYINT;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_handoff_task_id BIGINT UNSIGNED;
  DECLARE v_release_version BIGINT UNSIGNED;
  DECLARE v_done TINYINT DEFAULT 0;
  -- 1 while this result ends its attempt.
  DECLARE v_ends TINYINT;
  -- Every result with its attempt, each attempt locked as it is read: one statement for the
  -- call's attempts instead of one per result. Its values are as the rows were before this call
  -- ended any of them: a result that repeats an attempt is caught by its task's update (below).
  -- In input order without an ORDER BY, which costs a sort of the cursor's temporary table on
  -- every call: JSON_TABLE is the outer table of the join, read in document order, and its
  -- attempts are primary-key probes (no join buffer); the loop checks the order. (Fixed-width
  -- columns only: a cursor is materialised, and a TEXT column would put its temporary table on
  -- disk. retryable, output and error are read per result from p_results.) JSON_TABLE in a
  -- derived table: MySQL refuses FOR UPDATE over a join with a table function (error 3569, "Table
  -- r appears in multiple locking clauses"), and MariaDB has no FOR UPDATE OF.
  DECLARE c_results CURSOR FOR
    SELECT r.ord, r.attempt_id, r.outcome, a.task_id, a.state, a.resource_id, a.key_slot, a.session_id
      FROM (SELECT j.ord, j.attempt_id, j.outcome
              FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY, attempt_id BIGINT UNSIGNED PATH '$.attempt_id',
                              outcome VARCHAR(16) PATH '$.outcome')) j) r
      LEFT JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = r.attempt_id
       FOR UPDATE;

  SET o_ended = 0;
  OPEN c_results;
  results: LOOP
    fetch_result: BEGIN
      DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
      SET v_attempt_state = NULL, v_session_id = NULL;
      FETCH c_results INTO v_ord, v_attempt_id, v_outcome_in, v_task_id, v_attempt_state, v_resource_id, v_key_slot,
                           v_session_id;
    END fetch_result;
    IF v_done THEN
      LEAVE results;
    END IF;
    IF v_ord <> v_i + 1 THEN
      -- Which of repeated results ends their attempt depends on the order (see c_results).
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INTERNAL: orbit_attempt_end read its results out of order';
    END IF;
    SET v_result = JSON_EXTRACT(p_results, CONCAT('$[', v_i, ']')), v_i = v_i + 1,
        v_ends = COALESCE(v_attempt_state IN ('LEASED', 'RUNNING') AND p_session_id IN (0, v_session_id), 0);
    IF v_ends THEN
      SET v_retryable = COALESCE(JSON_UNQUOTE(JSON_EXTRACT(v_result, '$.retryable')) = 'true', 0),
          v_output = NULLIF(JSON_EXTRACT(v_result, '$.output'), 'null'),
          v_error = NULLIF(JSON_EXTRACT(v_result, '$.error'), 'null'),
          -- A RUNNING attempt whose lease ran out may have had effects: an unknown outcome.
          v_outcome = IF(v_outcome_in = 'expired' AND v_attempt_state = 'RUNNING', 'unknown', v_outcome_in),
          v_delay_ms = 0;
      -- Only a failure or an unknown outcome reads the task, for its retry settings. (An active
      -- attempt's task is in the attempt's state.)
      IF v_outcome IN ('failed', 'unknown') THEN
        SELECT t.attempt_count, t.max_attempts, t.retry_base_ms, t.retry_max_ms, t.retry_unknown
          INTO v_attempt_count, v_max_attempts, v_retry_base_ms, v_retry_max_ms, v_retry_unknown
          FROM orbit_task t
         WHERE t.id = v_task_id
           FOR UPDATE;
        SET v_attempts_left = v_attempt_count < v_max_attempts,
            v_delay_ms = LEAST(v_retry_max_ms, v_retry_base_ms * POW(2, LEAST(v_attempt_count, 40) - 1));
      END IF;
      CASE v_outcome
        WHEN 'succeeded' THEN
          SET v_attempt_state_new = 'SUCCEEDED', v_task_state = 'SUCCEEDED';
        WHEN 'failed' THEN
          SET v_attempt_state_new = 'FAILED',
              v_task_state = IF(v_retryable AND v_attempts_left, 'RETRY_WAIT', 'FAILED');
        WHEN 'unknown' THEN
          SET v_attempt_state_new = 'UNKNOWN',
              v_task_state = IF(v_retry_unknown AND v_attempts_left, 'RETRY_WAIT', 'NEEDS_REVIEW');
        WHEN 'expired' THEN
          SET v_attempt_state_new = 'EXPIRED', v_task_state = 'WAITING';
        ELSE
          SET v_attempt_state_new = 'CANCELLED', v_task_state = 'CANCELLED';
      END CASE;
      SET v_terminal = v_task_state IN ('SUCCEEDED', 'FAILED', 'CANCELLED');
      -- The task before the key (the lock order above); placed in a lane only after the release,
      -- so a retried task sees its key free. Its new state, a retry's run_at, a success's output, a
      -- failure's error, finished_at when terminal.
      UPDATE orbit_task t
         SET t.state = v_task_state, t.lane = 'none',
             t.run_at = IF(v_task_state IN ('WAITING', 'RETRY_WAIT'), DATE_ADD(p_now, INTERVAL v_delay_ms * 1000 MICROSECOND), t.run_at),
             t.output = IF(v_outcome = 'succeeded', v_output, t.output),
             t.error = IF(v_outcome IN ('failed', 'unknown'), v_error, t.error),
             t.finished_at = IF(v_terminal, p_now, NULL), t.updated_at = p_now
       WHERE t.id = v_task_id AND t.state IN ('LEASED', 'RUNNING');
      -- None when an earlier result of this call ended the attempt (the cursor read it before).
      SET v_ends = ROW_COUNT();
    END IF;
    IF NOT v_ends THEN
      -- Not ended by this result: another session's attempt, or none; a repeated result; or one
      -- ended another way first, whose different outcome is kept as its late result.
      UPDATE orbit_attempt a
         SET a.late_result = v_outcome_in
       WHERE a.id = v_attempt_id AND a.session_id = p_session_id AND a.state NOT IN ('LEASED', 'RUNNING')
         AND a.outcome <> v_outcome_in AND a.late_result = '';
      ITERATE results;
    END IF;
    -- The key next: the attempt's update records the version its release wrote.
    SET v_handoff_task_id = 0, v_release_version = 0;
    IF v_resource_id <> 0 THEN
      CALL orbit_key_release(v_resource_id, v_attempt_id, v_key_slot, p_now, p_hand_off, v_handoff_task_id,
                             v_release_version);
    END IF;
    IF v_task_state IN ('WAITING', 'RETRY_WAIT') THEN
      CALL orbit_task_place(v_task_id, p_now, v_task_state, v_lane);
    END IF;
    -- The attempt last: its state and outcome, the result as reported, and released_at, which
    -- releases its queue permit.
    UPDATE orbit_attempt a
       SET a.state = v_attempt_state_new, a.outcome = v_outcome, a.retryable = v_retryable,
           a.output = v_output, a.error = v_error, a.released_at = p_now,
           a.release_version = IF(v_release_version > 0, v_release_version, a.release_version),
           a.handoff_task_id = v_handoff_task_id
     WHERE a.id = v_attempt_id;
    SET o_ended = o_ended + 1;
  END LOOP results;
  CLOSE c_results;
END$$
DELIMITER ;
