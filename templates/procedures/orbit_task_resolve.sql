{% import "_macros.sql" as m %}
-- orbit_task_resolve: Settle a NEEDS_REVIEW task: mark it succeeded or failed, or requeue it.
--
-- The unknown attempt's permits were released when it ended; resolving changes no permit.
-- 'requeue' puts the task back to WAITING with one more attempt allowed; its next grant gets a
-- larger token than any before it.
-- Parameters: p_token_hash BINARY(32) (scope tasks:submit on the task's queue); p_task_id;
--   p_resolution 'succeeded' | 'failed' | 'requeue'; p_note (JSON text or NULL, kept as the
--   task's output for succeeded, error for failed).
-- Result (one row): the task columns:
{% call m::task_columns_doc() %}
--   then wake_queues: a JSON array, the task's queue when a requeue left it ready (unpaused),
--   else empty; the caller wakes the sessions that serve it.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope), NOT_FOUND (no such task, another tenant's,
--   or outside the credential's queues: one answer), INVALID_ARGUMENT, STATE_CONFLICT (not in
--   NEEDS_REVIEW).
-- Locks, in order: orbit_task row, orbit_resource row (requeue of a keyed task),
--   the orbit_application_quota slot row the task charged (orbit_task.quota_slot).
CREATE PROCEDURE orbit_task_resolve(
  IN p_token_hash BINARY(32),
  IN p_task_id BIGINT UNSIGNED,
  IN p_resolution TEXT {{ c.ascii }},
  IN p_note MEDIUMTEXT {{ c.utf8 }})
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_new_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_slot TINYINT UNSIGNED;
  DECLARE v_lane VARCHAR(16) {{ c.ascii }};
  DECLARE v_wake_queues TEXT {{ c.ascii }} DEFAULT '[]';
  {% call m::rollback_on_error() %};

  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  -- A missing task and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    {% call m::raise("NOT_FOUND", "task not found") %};
  END IF;
  IF p_resolution IS NULL OR p_resolution NOT IN ('succeeded', 'failed', 'requeue') THEN
    {% call m::raise("INVALID_ARGUMENT", "resolution must be succeeded, failed or requeue") %};
  END IF;
  IF p_note IS NOT NULL AND NOT JSON_VALID(p_note) THEN
    {% call m::raise("INVALID_ARGUMENT", "note must be valid JSON") %};
  END IF;

  {% call m::begin() %};
  SELECT t.state, t.quota_slot INTO v_state, v_slot FROM orbit_task t WHERE t.id = p_task_id FOR UPDATE;
  IF v_state <> 'NEEDS_REVIEW' THEN
    ROLLBACK;
    {% call m::raise("STATE_CONFLICT", "only a NEEDS_REVIEW task can be resolved") %};
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
    {% call m::ready_queues_into("v_wake_queues", "(SELECT v_queue_id AS queue_id) w") %};
  END IF;
  SELECT {% call m::task_columns("t") %}, v_wake_queues AS wake_queues FROM orbit_task t WHERE t.id = p_task_id;
END
