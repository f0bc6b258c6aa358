{% import "_macros.sql" as m %}
-- orbit_attempt_finish: Record a worker's result for an attempt, once; release its permits; grant the next tasks.
--
-- Idempotent per attempt: the first result ends the attempt (see orbit_attempt_end for what each
-- outcome does to the task and the permits); a repeated result gets the same answer with
-- duplicate = 1 and releases nothing again. A result arriving after the attempt already ended
-- another way (lease expiry recovery, cancel) is recorded in late_result and changes no permit
-- and no other attempt.
-- With p_claim_max > 0 the same transaction then grants the session up to p_claim_max tasks
-- (orbit_task_grant, as orbit_task_claim would): the key this result released goes to its next
-- task with this one commit, and the worker gets the assignment with the acknowledgement instead
-- of after a claim of its own (the hand-off the SPEC's hot-key target asks for).
-- Parameters: p_session_id; p_attempt_id; p_outcome 'succeeded' | 'failed' | 'unknown';
--   p_retryable 0/1 (failed only); p_output, p_error: JSON text or NULL; p_claim_max 0-1000
--   (the session's free capacity after this result; 0 = grant nothing); p_lease_ms 1000-3600000
--   (the grants' lease; ignored when p_claim_max = 0).
-- Result (one row per grant, or one row when nothing was granted): the acknowledgement
--   finished_attempt_id, finished_task_id, finished_task_state, finished_attempt_state,
--   duplicate TINYINT, wake TINYINT (1 = this result may have made work claimable for other
--   sessions, which the grant did not take: the caller should wake them), the same in every row; then the grant as orbit_task_claim returns it, all
--   NULL in the row of no grant: attempt_id, attempt_no, lease_expires_at, concurrency_token,
--   then the task columns.
-- Signals: INVALID_ARGUMENT (outcome, JSON, p_claim_max, p_lease_ms), NOT_FOUND (no such
--   attempt, no such session), PERMISSION_DENIED (another session's attempt).
-- Locks, in order: orbit_session row (when granting: the claim's first lock, taken first so that
--   finishing and claiming sessions lock in one order), orbit_attempt row, then as
--   orbit_attempt_end (task, resource, promoted tasks, quota), then as orbit_task_grant.
CREATE PROCEDURE orbit_attempt_finish(
  IN p_session_id BIGINT UNSIGNED,
  IN p_attempt_id BIGINT UNSIGNED,
  IN p_outcome TEXT {{ c.ascii }},
  IN p_retryable TINYINT,
  IN p_output MEDIUMTEXT {{ c.utf8 }},
  IN p_error MEDIUMTEXT {{ c.utf8 }},
  IN p_claim_max INT,
  IN p_lease_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_session_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_outcome VARCHAR(16) {{ c.ascii }};
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) {{ c.ascii }};
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_wake TINYINT DEFAULT 0;
  DECLARE v_task_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE v_seq BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_lock BIGINT UNSIGNED;
  {% call m::rollback_on_error() %};

  IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed', 'unknown') THEN
    {% call m::raise("INVALID_ARGUMENT", "outcome must be succeeded, failed or unknown") %};
  END IF;
  IF (p_output IS NOT NULL AND NOT JSON_VALID(p_output)) OR (p_error IS NOT NULL AND NOT JSON_VALID(p_error)) THEN
    {% call m::raise("INVALID_ARGUMENT", "output and error must be valid JSON") %};
  END IF;
  IF p_claim_max IS NULL OR p_claim_max NOT BETWEEN 0 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "claim_max must be between 0 and 1000") %};
  END IF;
  IF p_claim_max > 0 AND (p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 3600000) THEN
    {% call m::raise("INVALID_ARGUMENT", "lease_ms must be between 1000 and 3600000") %};
  END IF;
  {% call m::begin() %};
  IF p_claim_max > 0 THEN
    SELECT s.id INTO v_lock FROM orbit_session s WHERE s.id = p_session_id FOR UPDATE;
  END IF;
  SELECT a.session_id, a.state, a.outcome, a.task_id, a.resource_id, a.queue_id, a.application_id
    INTO v_session_id, v_state, v_outcome, v_task_id, v_resource_id, v_queue_id, v_application_id
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
    SET v_wake = 1;
  ELSE
    SET v_duplicate = 1;
    IF v_outcome <> p_outcome THEN
      -- Ended another way first (recovery, cancel): keep the report, act on nothing.
      UPDATE orbit_attempt a SET a.late_result = p_outcome WHERE a.id = p_attempt_id AND a.late_result = '';
    END IF;
    SELECT t.state INTO v_task_state FROM orbit_task t WHERE t.id = v_task_id;
  END IF;
  IF p_claim_max > 0 THEN
    CALL orbit_task_grant(p_session_id, p_claim_max, p_lease_ms, v_now, v_seq);
  END IF;
  IF v_wake = 1 AND p_claim_max > 0 THEN
    -- Other sessions need waking only for what this release made claimable and the grant above
    -- left: the task itself back in the ready lane (a retry without backoff), a ready task of the
    -- released key, room under a queue's permit limit, or room under an application quota that
    -- was full (conservatively: at most one attempt below its limit).
    -- (SELECT ... INTO: a subquery in SET or IF would be a locking read.)
    SELECT EXISTS (SELECT 1 FROM orbit_task t WHERE t.id = v_task_id AND t.lane = 'ready')
        OR (v_resource_id <> 0
            AND EXISTS (SELECT 1 FROM orbit_task t WHERE t.resource_id = v_resource_id AND t.lane = 'ready'))
        OR EXISTS (SELECT 1 FROM orbit_queue q WHERE q.id = v_queue_id AND q.max_active_attempts > 0)
        OR (SELECT CAST(MIN(q.max_active_attempts) AS SIGNED) - CAST(SUM(q.active_attempts) AS SIGNED)
              FROM orbit_application_quota q WHERE q.application_id = v_application_id) <= 1
      INTO v_wake;
  END IF;
  COMMIT;
  SELECT p_attempt_id AS finished_attempt_id, v_task_id AS finished_task_id, v_task_state AS finished_task_state,
         v_state AS finished_attempt_state, v_duplicate AS duplicate, v_wake AS wake,
         {% call m::grant_columns("a", "t") %}
    FROM (SELECT 1 AS one) AS ack
    LEFT JOIN orbit_attempt a ON a.session_id = p_session_id AND a.claim_seq = v_seq AND v_seq > 0
    LEFT JOIN orbit_task t ON t.id = a.task_id
   ORDER BY a.id;
END
