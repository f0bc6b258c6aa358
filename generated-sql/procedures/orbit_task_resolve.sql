-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_resolve.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_resolve: Settle a NEEDS_REVIEW task: mark it succeeded or failed, or requeue it.
--
-- The unknown attempt's permits were released when it ended; resolving changes no permit.
-- 'requeue' puts the task back to WAITING with one more attempt allowed; its next grant gets a
-- larger token than any before it.
-- Parameters: p_token_hash BINARY(32) (scope tasks:submit on the task's queue); p_task_id;
--   p_resolution 'succeeded' | 'failed' | 'requeue'; p_note (JSON text or NULL, kept as the
--   task's output for succeeded, error for failed).
-- Result (one row): the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
--   then wake_queues: a JSON array, the task's queue when a requeue left it ready (unpaused),
--   else empty; the caller wakes the sessions that serve it.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope), NOT_FOUND (no such task, another tenant's,
--   or outside the credential's queues: one answer), INVALID_ARGUMENT, STATE_CONFLICT (not in
--   NEEDS_REVIEW).
-- Locks, in order: orbit_task row, orbit_resource row (requeue of a keyed task),
--   the orbit_application_quota slot row the task charged (orbit_task.quota_slot).
DROP PROCEDURE IF EXISTS orbit_task_resolve;
DELIMITER $$
CREATE PROCEDURE orbit_task_resolve(
  IN p_token_hash BINARY(32),
  IN p_task_id BIGINT UNSIGNED,
  IN p_resolution TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_note MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_new_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_slot TINYINT UNSIGNED;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_wake_queues TEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT '[]';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  -- A missing task and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: task not found';
  END IF;
  IF p_resolution IS NULL OR p_resolution NOT IN ('succeeded', 'failed', 'requeue') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: resolution must be succeeded, failed or requeue';
  END IF;
  IF p_note IS NOT NULL AND NOT JSON_VALID(p_note) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: note must be valid JSON';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT t.state, t.quota_slot INTO v_state, v_slot FROM orbit_task t WHERE t.id = p_task_id FOR UPDATE;
  IF v_state <> 'NEEDS_REVIEW' THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: only a NEEDS_REVIEW task can be resolved';
  END IF;
  IF p_resolution = 'requeue' THEN
    UPDATE orbit_task t
       SET t.state = 'WAITING', t.run_at = v_now, t.max_attempts = GREATEST(t.max_attempts, t.attempt_count + 1),
           t.updated_at = v_now
     WHERE t.id = p_task_id;
    CALL orbit_task_place(p_task_id, v_now, v_new_state, v_lane);
  ELSE
    SET v_new_state = IF(p_resolution = 'succeeded', 'SUCCEEDED', 'FAILED');
    UPDATE orbit_task t
       SET t.state = v_new_state,
           t.output = IF(p_resolution = 'succeeded', p_note, t.output),
           t.error = IF(p_resolution = 'failed', COALESCE(p_note, t.error), t.error),
           t.finished_at = v_now, t.updated_at = v_now
     WHERE t.id = p_task_id;
    UPDATE orbit_application_quota q
       SET q.incomplete_tasks = q.incomplete_tasks - 1, q.updated_at = v_now
     WHERE q.application_id = v_application_id AND q.slot = v_slot;
  END IF;
  INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
  VALUES (p_task_id, 'resolved', 'NEEDS_REVIEW', v_new_state, p_resolution, v_now);
  COMMIT;
  IF p_resolution = 'requeue' AND v_lane = 'ready' THEN
    SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO v_wake_queues
      FROM (SELECT v_queue_id AS queue_id) w
      STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = w.queue_id
     WHERE q.paused = 0
       AND (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = q.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL;
  END IF;
  SELECT t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at, v_wake_queues AS wake_queues FROM orbit_task t WHERE t.id = p_task_id;
END$$
DELIMITER ;
