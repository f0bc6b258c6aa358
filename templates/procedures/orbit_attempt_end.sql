{% import "_macros.sql" as m %}
-- orbit_attempt_end: Internal: end an active attempt, release its permits and move its task on.
--
-- The one place that decides what an ending means (SPEC §4). It locks the attempt row FOR UPDATE
-- (the first lock of a result; a caller that checked the attempt under its own lock first reads
-- it again) and ends it only while it is LEASED or RUNNING and, with p_session_id, that
-- session's: otherwise it changes nothing and its out parameters are NULL (a result for no
-- attempt of the session, a repeated result, or an attempt ended another way first). In the same
-- transaction this records the outcome and releases the queue permit (released_at), releases the
-- key permit (orbit_key_release, which hands the key to the next blocked task) and moves the
-- task. The caller then does, once for all the attempts it ends, from the rows this wrote: their
-- history rows (m::attempt_end_events, before anything else moves their tasks) and the quota
-- charges they free (the attempt's active attempt; the task's incomplete task when the task
-- ended; m::quota_give_back_ended): a session's group of results locks its slot row once.
-- orbit_attempt_succeed_many ends a group of successes of unkeyed attempts without this call, by
-- the same two updates: their SET lists are m::task_end_set and m::attempt_end_set (a test
-- compares the rows).
--   succeeded           -> attempt SUCCEEDED, task SUCCEEDED
--   failed, retryable   -> attempt FAILED, task RETRY_WAIT after backoff (FAILED when no attempts are left)
--   failed              -> attempt FAILED, task FAILED
--   unknown             -> attempt UNKNOWN, task NEEDS_REVIEW (RETRY_WAIT if retry_unknown and attempts left)
--   expired (lease ran out) -> LEASED: attempt EXPIRED, task WAITING; RUNNING: as unknown
--   cancelled           -> attempt CANCELLED, task CANCELLED
-- Parameters: p_attempt_id; p_session_id (the session whose result this is; 0 = any: a cancel,
--   recovery or a policy's cancel); p_outcome; p_retryable; p_output, p_error (JSON text or
--   NULL); p_now; p_hand_off: 1 when the caller grants in the same transaction (see
--   orbit_key_release; the key's next task it returns is recorded as the attempt's
--   handoff_task_id, for that grant).
-- Out: o_task_state (the task's new state); o_attempt_state (the attempt's); o_handoff_task_id
--   (the key's next task left for the caller's grant, as recorded; 0 when none); all NULL when
--   nothing was ended.
-- Signals: none (callers validate). Locks, in order: the orbit_attempt row, orbit_task row (read
--   FOR UPDATE for an outcome that needs its retry settings, otherwise by its update, which
--   comes before the key's release either way), orbit_resource row and orbit_key_slot row (via
--   orbit_key_release), promoted task rows (SKIP LOCKED); no quota row (the caller's).
CREATE PROCEDURE orbit_attempt_end(
  IN p_attempt_id BIGINT UNSIGNED,
  IN p_session_id BIGINT UNSIGNED,
  IN p_outcome VARCHAR(16) {{ c.ascii }},
  IN p_retryable TINYINT,
  IN p_output MEDIUMTEXT CHARACTER SET utf8mb4,
  IN p_error MEDIUMTEXT CHARACTER SET utf8mb4,
  IN p_now DATETIME(6),
  IN p_hand_off TINYINT,
  OUT o_task_state VARCHAR(16) {{ c.ascii }},
  OUT o_attempt_state VARCHAR(16) {{ c.ascii }},
  OUT o_handoff_task_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_session_id BIGINT UNSIGNED;
  DECLARE v_attempt_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_key_slot SMALLINT UNSIGNED;
  DECLARE v_attempt_count INT UNSIGNED;
  DECLARE v_max_attempts INT UNSIGNED;
  DECLARE v_retry_base_ms INT UNSIGNED;
  DECLARE v_retry_max_ms INT UNSIGNED;
  DECLARE v_retry_unknown TINYINT;
  DECLARE v_new_attempt_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_outcome VARCHAR(16) {{ c.ascii }} DEFAULT p_outcome;
  DECLARE v_delay_ms BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_terminal TINYINT DEFAULT 0;
  DECLARE v_attempts_left TINYINT;
  DECLARE v_lane VARCHAR(16) {{ c.ascii }};
  DECLARE v_release_version BIGINT UNSIGNED;

  SET o_task_state = NULL, o_attempt_state = NULL, o_handoff_task_id = NULL;
  SELECT a.task_id, a.state, a.resource_id, a.key_slot, a.session_id
    INTO v_task_id, v_attempt_state, v_resource_id, v_key_slot, v_session_id
    FROM orbit_attempt a
   WHERE a.id = p_attempt_id
     FOR UPDATE;
  IF NOT COALESCE(v_attempt_state IN ('LEASED', 'RUNNING') AND p_session_id IN (0, v_session_id), 0) THEN
    LEAVE body;
  END IF;
  -- A RUNNING attempt whose lease ran out may have had effects: it is an unknown outcome.
  IF v_outcome = 'expired' AND v_attempt_state = 'RUNNING' THEN
    SET v_outcome = 'unknown';
  END IF;
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
      SET v_new_attempt_state = 'SUCCEEDED', o_task_state = 'SUCCEEDED';
    WHEN 'failed' THEN
      SET v_new_attempt_state = 'FAILED',
          o_task_state = IF(p_retryable AND v_attempts_left, 'RETRY_WAIT', 'FAILED');
    WHEN 'unknown' THEN
      SET v_new_attempt_state = 'UNKNOWN',
          o_task_state = IF(v_retry_unknown AND v_attempts_left, 'RETRY_WAIT', 'NEEDS_REVIEW');
    WHEN 'expired' THEN
      SET v_new_attempt_state = 'EXPIRED', o_task_state = 'WAITING', v_delay_ms = 0;
    ELSE
      SET v_new_attempt_state = 'CANCELLED', o_task_state = 'CANCELLED';
  END CASE;
  SET v_terminal = o_task_state IN ('SUCCEEDED', 'FAILED', 'CANCELLED');

  -- The task before the key (the lock order above); placed in a lane only after the release, so
  -- a retried task sees its key free.
  UPDATE orbit_task t
     SET {% call m::task_end_set("o_task_state", "v_outcome", "p_output", "p_error", "v_delay_ms", "v_terminal", "p_now", "         ") %}
   WHERE t.id = v_task_id;
  -- The key next: the attempt's update records the version its release wrote.
  SET o_handoff_task_id = 0, v_release_version = 0;
  IF v_resource_id <> 0 THEN
    CALL orbit_key_release(v_resource_id, p_attempt_id, v_key_slot, p_now, p_hand_off, o_handoff_task_id,
                           v_release_version);
  END IF;
  IF o_task_state IN ('WAITING', 'RETRY_WAIT') THEN
    CALL orbit_task_place(v_task_id, p_now, o_task_state, v_lane);
  END IF;
  UPDATE orbit_attempt a
     SET {% call m::attempt_end_set("v_new_attempt_state", "v_outcome", "p_retryable", "p_output", "p_error", "p_now", "         ") %},
         a.release_version = IF(v_release_version > 0, v_release_version, a.release_version),
         a.handoff_task_id = o_handoff_task_id
   WHERE a.id = p_attempt_id;
  SET o_attempt_state = v_new_attempt_state;
END
