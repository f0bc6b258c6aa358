-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_cancel.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_cancel: Cancel a task that has not started: WAITING, RETRY_WAIT, LEASED or NEEDS_REVIEW.
--
-- A LEASED attempt (granted, not started) is ended as CANCELLED and its permits are released in
-- this transaction, so the key's next task is granted with a larger token. A ready keyed task
-- hands its queue's slot of the key to the next blocked task. A RUNNING task cannot be cancelled
-- (its code may be acting on the resource): STATE_CONFLICT. Cancelling a CANCELLED task returns it
-- unchanged; any other terminal state is a STATE_CONFLICT.
-- Parameters: p_token_hash BINARY(32) (scope tasks:submit on the task's queue); p_task_id.
-- Result (one row): the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
--   then wake_queues: a JSON array of the queue ids where the cancel readied work (a key's next
--   task, room under a queue or application limit): unpaused queues of the task's application
--   with a ready task; the caller wakes the sessions that serve them.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope), NOT_FOUND (no such task, another tenant's,
--   or outside the credential's queues: one answer), STATE_CONFLICT.
-- Locks, in order: orbit_attempt row (LEASED task), orbit_task row, orbit_resource row (keyed),
--   promoted task rows (SKIP LOCKED), the orbit_application_quota slot row the charges go back
--   to (a waiting task: orbit_task.quota_slot; a leased one: its attempt's, orbit_attempt.quota_slot).
DROP PROCEDURE IF EXISTS orbit_task_cancel;
DELIMITER $$
CREATE PROCEDURE orbit_task_cancel(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_attempt_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_attempt_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_current BIGINT UNSIGNED;
  DECLARE v_ended INT;
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_slot TINYINT UNSIGNED;
  DECLARE v_wake_queues TEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT '[]';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  SELECT t.queue_id, t.current_attempt_id INTO v_queue_id, v_attempt_id FROM orbit_task t WHERE t.id = p_task_id;
  -- A missing task and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: task not found';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
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
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: the task changed while cancelling; retry';
  END IF;
  IF v_state = 'CANCELLED' THEN
    COMMIT;
  ELSEIF v_state = 'LEASED' THEN
    -- (An attempt's key is its task's: v_resource_id.)
    CALL orbit_attempt_end(0 /* p_session_id */, JSON_ARRAY(JSON_OBJECT('attempt_id', v_attempt_id, 'outcome', 'cancelled')) /* p_results */,
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
    COMMIT;
    -- The released key, queue permit and quota may let any queue of the application claim.
    SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO v_wake_queues
      FROM orbit_queue q FORCE INDEX (ix_queue_application)
     WHERE q.application_id = v_application_id AND q.paused = 0
       AND (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = q.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL;
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
      SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO v_wake_queues
      FROM (SELECT v_queue_id AS queue_id) w
      STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = w.queue_id
     WHERE q.paused = 0
       AND (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = q.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL;
    END IF;
  ELSE
    ROLLBACK;
    IF v_state = 'RUNNING' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: a RUNNING task cannot be cancelled';
    END IF;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: the task has already finished';
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
