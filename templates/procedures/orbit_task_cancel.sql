{% import "_macros.sql" as m %}
-- orbit_task_cancel: Cancel a task that has not started: WAITING, RETRY_WAIT, LEASED or NEEDS_REVIEW.
--
-- A LEASED attempt (granted, not started) is ended as CANCELLED and its permits are released in
-- this transaction, so the key's next task is granted with a larger token. A ready keyed task
-- hands its queue's slot of the key to the next blocked task. A RUNNING task cannot be cancelled
-- (its code may be acting on the resource): STATE_CONFLICT. Cancelling a CANCELLED task returns it
-- unchanged; any other terminal state is a STATE_CONFLICT.
-- Parameters: p_token_hash BINARY(32) (scope tasks:submit on the task's queue); p_task_id.
-- Result (one row): the task columns:
{% call m::task_columns_doc() %}
--   then wake_queues: a JSON array of the queue ids where the cancel readied work (a key's next
--   task, room under a queue or application limit): unpaused queues of the task's application
--   with a ready task; the caller wakes the sessions that serve them.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope), NOT_FOUND (no such task, another tenant's,
--   or outside the credential's queues: one answer), STATE_CONFLICT.
-- Locks, in order: orbit_attempt row (LEASED task), orbit_task row, orbit_resource row (keyed),
--   promoted task rows (SKIP LOCKED), the orbit_application_quota slot row the charges go back
--   to (a waiting task: orbit_task.quota_slot; a leased one: its attempt's, orbit_attempt.quota_slot).
CREATE PROCEDURE orbit_task_cancel(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_attempt_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_attempt_state VARCHAR(16) {{ c.ascii }} DEFAULT '';
  DECLARE v_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_lane VARCHAR(16) {{ c.ascii }};
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_current BIGINT UNSIGNED;
  DECLARE v_ended INT;
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_slot TINYINT UNSIGNED;
  DECLARE v_wake_queues TEXT {{ c.ascii }} DEFAULT '[]';
  {% call m::rollback_on_error() %};

  SELECT t.queue_id, t.current_attempt_id INTO v_queue_id, v_attempt_id FROM orbit_task t WHERE t.id = p_task_id;
  -- A missing task and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    {% call m::raise("NOT_FOUND", "task not found") %};
  END IF;

  {% call m::begin() %};
  -- Attempt before task: the same order as orbit_attempt_finish, so the two never deadlock.
  IF v_attempt_id <> 0 THEN
    SELECT a.state INTO v_attempt_state FROM orbit_attempt a WHERE a.id = v_attempt_id FOR UPDATE;
  END IF;
  SELECT t.state, t.lane, t.resource_id, t.current_attempt_id, t.quota_slot
    INTO v_state, v_lane, v_resource_id, v_current, v_slot
    FROM orbit_task t
   WHERE t.id = p_task_id
     FOR UPDATE;
  IF v_current <> v_attempt_id THEN
    -- A claim granted a new attempt between the two reads; the caller may retry.
    ROLLBACK;
    {% call m::raise("STATE_CONFLICT", "the task changed while cancelling; retry") %};
  END IF;
  IF v_state = 'CANCELLED' THEN
    COMMIT;
  ELSEIF v_state = 'LEASED' THEN
    -- (An attempt's key is its task's: v_resource_id.)
    CALL orbit_attempt_end(0 /* p_session_id */, JSON_ARRAY(JSON_OBJECT('attempt_id', v_attempt_id, 'outcome', 'cancelled')) /* p_results */,
                           v_now, 0 /* p_hand_off */, v_ended);
    {% call m::attempt_end_events("(SELECT v_attempt_id AS id) e", "v_now") %};
    {% call m::quota_give_back_ended("v_application_id", "(SELECT x.quota_slot, x.task_id FROM orbit_attempt x WHERE x.id = v_attempt_id) a", "v_now") %};
    COMMIT;
    -- The released key, queue permit and quota may let any queue of the application claim.
    {% call m::application_ready_queues_into("v_wake_queues", "v_application_id") %};
  ELSEIF v_state IN ('WAITING', 'RETRY_WAIT', 'NEEDS_REVIEW') THEN
    IF v_resource_id <> 0 AND v_lane = 'ready' THEN
      SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = v_resource_id FOR UPDATE;
    END IF;
    UPDATE orbit_task t
       SET t.state = 'CANCELLED', t.lane = 'none', t.finished_at = v_now, t.updated_at = v_now
     WHERE t.id = p_task_id;
    IF v_resource_id <> 0 AND v_lane = 'ready' THEN
      CALL orbit_key_promote(v_resource_id, v_queue_id, v_now);
    END IF;
    INSERT INTO orbit_task_event (task_id, event, from_state, to_state, created_at)
    VALUES (p_task_id, 'cancelled', v_state, 'CANCELLED', v_now);
    UPDATE orbit_application_quota q
       SET q.incomplete_tasks = q.incomplete_tasks - 1, q.updated_at = v_now
     WHERE q.application_id = v_application_id AND q.slot = v_slot;
    COMMIT;
    IF v_resource_id <> 0 AND v_lane = 'ready' THEN
      -- The key's next task in this queue.
      {% call m::ready_queues_into("v_wake_queues", "(SELECT v_queue_id AS queue_id) w") %};
    END IF;
  ELSE
    ROLLBACK;
    IF v_state = 'RUNNING' THEN
      {% call m::raise("STATE_CONFLICT", "a RUNNING task cannot be cancelled") %};
    END IF;
    {% call m::raise("STATE_CONFLICT", "the task has already finished") %};
  END IF;
  SELECT {% call m::task_columns("t") %}, v_wake_queues AS wake_queues FROM orbit_task t WHERE t.id = p_task_id;
END
