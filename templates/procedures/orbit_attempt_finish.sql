{% import "_macros.sql" as m %}
-- orbit_attempt_finish: Record a worker's result for an attempt, once; release its permits.
--
-- Idempotent per attempt: the first result ends the attempt (see orbit_attempt_end for what each
-- outcome does to the task and the permits); a repeated result gets the same answer with
-- duplicate = 1 and releases nothing again. A result arriving after the attempt already ended
-- another way (lease expiry recovery, cancel) is recorded in late_result and changes no permit
-- and no other attempt.
-- Parameters: p_session_id; p_attempt_id; p_outcome 'succeeded' | 'failed' | 'unknown';
--   p_retryable 0/1 (failed only); p_output, p_error: JSON text or NULL.
-- Result (one row): attempt_id, task_id, task_state, attempt_state, duplicate TINYINT.
-- Signals: INVALID_ARGUMENT (outcome, JSON), NOT_FOUND (no such attempt), PERMISSION_DENIED
--   (another session's attempt).
-- Locks, in order: orbit_attempt row, then as orbit_attempt_end (task, resource, promoted tasks,
--   quota).
CREATE PROCEDURE orbit_attempt_finish(
  IN p_session_id BIGINT UNSIGNED,
  IN p_attempt_id BIGINT UNSIGNED,
  IN p_outcome TEXT {{ c.ascii }},
  IN p_retryable TINYINT,
  IN p_output MEDIUMTEXT {{ c.utf8 }},
  IN p_error MEDIUMTEXT {{ c.utf8 }})
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_session_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_outcome VARCHAR(16) {{ c.ascii }};
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_task_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_duplicate TINYINT DEFAULT 0;
  {% call m::rollback_on_error() %};

  IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed', 'unknown') THEN
    {% call m::raise("INVALID_ARGUMENT", "outcome must be succeeded, failed or unknown") %};
  END IF;
  IF (p_output IS NOT NULL AND NOT JSON_VALID(p_output)) OR (p_error IS NOT NULL AND NOT JSON_VALID(p_error)) THEN
    {% call m::raise("INVALID_ARGUMENT", "output and error must be valid JSON") %};
  END IF;
  {% call m::begin() %};
  SELECT a.session_id, a.state, a.outcome, a.task_id INTO v_session_id, v_state, v_outcome, v_task_id
    FROM orbit_attempt a
   WHERE a.id = p_attempt_id
     FOR UPDATE;
  IF v_session_id IS NULL THEN
    ROLLBACK;
    {% call m::raise("NOT_FOUND", "attempt not found") %};
  END IF;
  IF v_session_id <> p_session_id THEN
    ROLLBACK;
    {% call m::raise("PERMISSION_DENIED", "the attempt belongs to another session") %};
  END IF;
  IF v_state IN ('LEASED', 'RUNNING') THEN
    CALL orbit_attempt_end(p_attempt_id, p_outcome, COALESCE(p_retryable, 0), p_output, p_error, v_now, v_task_state);
    SELECT a.state INTO v_state FROM orbit_attempt a WHERE a.id = p_attempt_id;
  ELSE
    SET v_duplicate = 1;
    IF v_outcome <> p_outcome THEN
      -- Ended another way first (recovery, cancel): keep the report, act on nothing.
      UPDATE orbit_attempt a SET a.late_result = p_outcome WHERE a.id = p_attempt_id AND a.late_result = '';
    END IF;
    SELECT t.state INTO v_task_state FROM orbit_task t WHERE t.id = v_task_id;
  END IF;
  COMMIT;
  SELECT p_attempt_id AS attempt_id, v_task_id AS task_id, v_task_state AS task_state,
         v_state AS attempt_state, v_duplicate AS duplicate;
END
