-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_create.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_create: Internal: create one accepted task inside the caller's transaction.
--
-- Shared by orbit_task_submit, orbit_task_submit_many and orbit_plan_fire_due, so every task is
-- created by the same code: the key's resource row (lock, or insert), the task row in its lane
-- (as orbit_task_place decides it: 'scheduled' until its run_at, else 'ready' for an unkeyed
-- task, and for a keyed one 'ready' only while its key has room and no ready task of the key
-- waits in the queue; a task whose key's policy replaces others is placed after them, by
-- orbit_task_place) and (p_charge = 1) the application's incomplete-task counter
-- (orbit_task_charge). The definition and timing must already be validated (orbit_task_validate,
-- m::task_timing_error). When the incomplete-task quota is full, or the key's policy refuses the
-- task, o_task_id is 0 and the caller must roll back what this call wrote. With p_charge = 0 the
-- task records the connection's quota slot and the caller charges it: orbit_task_submit_many
-- charges a whole batch with one statement, last, and orbit_task_submit a task after its
-- receipt. No history row: the task row's created_at, plan_id and plan_version record the creation
-- (see orbit_task_event). orbit_task_submit_many and orbit_plan_fire_due insert a batch of
-- unkeyed tasks whole, with the row this writes (m::task_insert_values; a test compares them).
-- Debounce (p_debounce_seconds > 0, keyed): under the key's resource row lock, the key's
-- debounced task that still waits for its run_at in this queue (at most one: each debounced
-- create replaces the one before) is replaced. It ends CANCELLED with error
-- {"code": "REPLACED", "replaced_by": <the new task>}, and the new task takes its quota charge
-- (its slot: nothing is charged or given back) and its burst's bound (debounce_until). The new
-- run_at is acceptance + p_debounce_seconds, at most that bound; its acceptance time is read
-- after the key's lock is taken. A waiting task locked by another transaction is skipped (SKIP
-- LOCKED, as the lock order requires of a task row taken after a resource row): only
-- orbit_task_promote_due (the task is due, so the new one starts a burst of its own), a cancel
-- or a deadline expiry (it will not run) take that lock.
-- Key policy: the longest pattern of orbit_key_policy that matches the key, read under the key's
-- lock. Its holder_limit is kept on the key's row (for the placement; a grant reads the policy
-- again). Its on_busy applies to a submitted task (a plan's task follows its plan's on_busy):
-- 'reject': when as many hold the key as its limit allows or any task of it waits (lanes ready,
-- blocked, scheduled; any queue), nothing is written and o_refusal is KEY_BUSY. 'replace_waiting': every WAITING task of the key in this
-- queue is replaced as above (SKIP LOCKED: one a grant is taking is no longer waiting); the new
-- task takes the first one's charge and each other gives its charge back at once.
-- 'cancel_running': as 'replace_waiting', and first, when as many hold the key as its limit
-- allows, the key's oldest holder (the lowest attempt id), LEASED or RUNNING, is ended CANCELLED (orbit_attempt_end, its charges given back): the new task is the key's next in its
-- queue, with a larger token, and o_cancelled names the attempt so the caller can tell its
-- worker (task.cancel).
-- Parameters: p_application_id, p_namespace_id, p_queue_id (the queue's tenancy, already
--   authorised); the validated definition (see orbit_task_validate); p_run_at (the effective
--   time it may first be claimed, m::task_run_at; a debounced task's is computed here);
--   p_debounce_seconds, p_debounce_max_seconds (0 = none); p_idempotency_key ('' for a
--   plan-fired task); p_plan_id, p_plan_version (0 for a submitted task); p_now; p_charge (1 =
--   charge the incomplete-task quota here, 0 = the caller does).
-- Out: o_task_id (0 = refused); o_replaced (the task it replaced first, whose charge it took:
--   the caller charges nothing for it; 0 = none); o_refusal ('' = accepted, QUOTA_EXCEEDED,
--   KEY_BUSY); o_cancelled (the holder's attempt a cancel_running policy ended; 0 = none).
-- Result: none. Signals: none.
-- Locks, in order: orbit_resource row (keyed; insert or FOR UPDATE), the orbit_key_slot row of a
--   cancelled holder (via orbit_attempt_end), the orbit_application_quota
--   slot rows of a cancelled holder and of the further tasks a policy replaces, then as
--   orbit_task_charge (p_charge = 1). Not waits: the new orbit_task row, the tasks it replaces
--   and a cancelled holder's task (read FOR UPDATE SKIP LOCKED), and the holder's orbit_attempt
--   rows (FOR UPDATE SKIP LOCKED). In a batch (orbit_task_submit_many) those give-backs come before the
--   next task's resource row: such a batch can deadlock with a grant, and is retried whole.
DROP PROCEDURE IF EXISTS orbit_task_create;
DELIMITER $$
CREATE PROCEDURE orbit_task_create(
  IN p_application_id BIGINT UNSIGNED,
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT,
  IN p_run_at DATETIME(6),
  IN p_debounce_seconds BIGINT,
  IN p_debounce_max_seconds BIGINT,
  IN p_idempotency_key BLOB,
  IN p_plan_id BIGINT UNSIGNED,
  IN p_plan_version INT UNSIGNED,
  IN p_now DATETIME(6),
  IN p_charge TINYINT,
  OUT o_task_id BIGINT UNSIGNED,
  OUT o_replaced BIGINT UNSIGNED,
  OUT o_refusal VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  OUT o_cancelled BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_holder BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_holders SMALLINT UNSIGNED DEFAULT 0;
  DECLARE v_row_limit SMALLINT UNSIGNED DEFAULT 1;
  DECLARE v_limit SMALLINT UNSIGNED DEFAULT 1;
  DECLARE v_policy_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT 'queue';
  DECLARE v_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT 'queue';
  DECLARE v_busy TINYINT DEFAULT 0;
  DECLARE v_slot TINYINT UNSIGNED DEFAULT (CONNECTION_ID() % 16);
  DECLARE v_charged TINYINT DEFAULT 0;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_run_at DATETIME(6) DEFAULT COALESCE(p_run_at, p_now);
  DECLARE v_debounce_until DATETIME(6) DEFAULT NULL;
  DECLARE v_replaced BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_replaced_slot TINYINT UNSIGNED;
  DECLARE v_other BIGINT UNSIGNED;
  DECLARE v_holder_task BIGINT UNSIGNED;
  -- How many attempts orbit_attempt_end ended (the holder a cancel_running policy ends: 1).
  DECLARE v_ended INT;
  DECLARE v_done TINYINT DEFAULT 0;
  -- The key's waiting tasks in this queue (every lane they wait in), oldest first: what a
  -- replace_waiting or cancel_running policy replaces. Read and locked when opened, before the new
  -- task exists, in one scan of ix_task_key and one sort (SKIP LOCKED: task rows come after the
  -- resource row in the lock order), so replacing N tasks reads each entry once.
  DECLARE c_waiting CURSOR FOR
    SELECT t.id, t.quota_slot
      FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane IN ('ready', 'blocked', 'scheduled') AND t.queue_id = p_queue_id
       AND t.state = 'WAITING'
     ORDER BY t.id
       FOR UPDATE SKIP LOCKED;
  SET o_task_id = 0, o_replaced = 0, o_refusal = '', o_cancelled = 0;
  IF p_concurrency_key <> '' THEN
    -- The key's row, locked where it exists (most submits find it). Otherwise insert-or-lock in
    -- one statement (a concurrent submit may insert it first): ON DUPLICATE KEY UPDATE takes the
    -- row's exclusive lock directly, avoiding the shared-then-exclusive upgrade that deadlocks
    -- concurrent submitters; then the same locked read.
    SELECT r.id, r.holder_attempt_id, r.holders, r.holder_limit INTO v_resource_id, v_holder, v_holders, v_row_limit
      FROM orbit_resource r
     WHERE r.namespace_id = p_namespace_id AND r.concurrency_key = p_concurrency_key
       FOR UPDATE;
    IF v_resource_id = 0 THEN
      INSERT INTO orbit_resource (namespace_id, concurrency_key, highest_token, version, created_at, updated_at)
      VALUES (p_namespace_id, p_concurrency_key, 0, 0, p_now, p_now)
      ON DUPLICATE KEY UPDATE version = version;
      SELECT r.id, r.holder_attempt_id, r.holders, r.holder_limit INTO v_resource_id, v_holder, v_holders, v_row_limit
      FROM orbit_resource r
     WHERE r.namespace_id = p_namespace_id AND r.concurrency_key = p_concurrency_key
       FOR UPDATE;
    END IF;
    -- The key's policy: the longest pattern that matches it (orbit_key_policy), at most
    -- 1000 index entries of the namespace. Its limit is kept on the key's row
    -- for the placement below; its on_busy applies to a submitted task (a plan's follows the plan).
    SELECT p.on_busy, p.holder_limit INTO v_policy_on_busy, v_limit
      FROM orbit_key_policy p
       WHERE p.namespace_id = p_namespace_id
         AND ((p.match_kind = 'exact' AND p.key_pattern = p_concurrency_key)
              OR (p.match_kind = 'prefix' AND p.key_pattern = LEFT(p_concurrency_key, LENGTH(p.key_pattern))))
       ORDER BY LENGTH(p.key_pattern) DESC, p.match_kind = 'exact' DESC
       LIMIT 1;
    IF p_plan_id = 0 THEN
      SET v_on_busy = v_policy_on_busy;
    END IF;
    IF v_limit <> v_row_limit THEN
      UPDATE orbit_resource r SET r.holder_limit = v_limit WHERE r.id = v_resource_id;
    END IF;
    IF v_on_busy = 'reject' THEN
      -- Busy: as many hold the key as its limit allows, or any task of the key waits (ready,
      -- blocked, or scheduled for later), in any queue. A plain read, exact under the resource
      -- row lock.
      SELECT v_holders >= v_limit
             OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                         WHERE h.resource_id = v_resource_id AND h.lane IN ('ready', 'blocked', 'scheduled'))
        INTO v_busy;
      IF v_busy THEN
        SET o_refusal = 'KEY_BUSY';
        LEAVE body;
      END IF;
    END IF;
    IF v_on_busy = 'cancel_running' AND v_holders >= v_limit THEN
      -- The key's oldest holder (the lowest attempt id: slot 0's, or a slot row's; plain reads,
      -- exact under the resource row lock).
      SELECT MIN(h.attempt_id) INTO v_holder
    FROM (SELECT r.holder_attempt_id AS attempt_id FROM orbit_resource r
           WHERE r.id = v_resource_id AND r.holder_attempt_id <> 0
          UNION ALL
          SELECT s.attempt_id FROM orbit_key_slot s
           WHERE s.resource_id = v_resource_id AND s.attempt_id <> 0) h;
      -- Its attempt and task, FOR UPDATE SKIP LOCKED (task rows come before resource
      -- rows in the lock order, so this must not wait). Locked means a result, a start, a
      -- renewal, a cancel or recovery is changing the holder right now: the call is answered as
      -- a deadlock victim is (error 1213), rolled back whole and retried by the caller.
      SET v_holder_task = NULL;
      SELECT a.task_id INTO v_holder_task
        FROM orbit_attempt a
       WHERE a.id = v_holder AND a.state IN ('LEASED', 'RUNNING')
         FOR UPDATE SKIP LOCKED;
      IF v_holder_task IS NOT NULL THEN
        SELECT t.id INTO v_holder_task FROM orbit_task t WHERE t.id = v_holder_task FOR UPDATE SKIP LOCKED;
      END IF;
      IF v_holder_task IS NULL THEN
        SIGNAL SQLSTATE '40001'
          SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'the key holder is changing; try the submit again';
      END IF;
      -- Ended CANCELLED at once: its permits are released (the key's next grant has a larger
      -- token, so the old holder's writes are fenced), its late result is refused, and its
      -- charges are given back.
      CALL orbit_attempt_end(0 /* p_session_id */, JSON_ARRAY(JSON_OBJECT('attempt_id', v_holder, 'outcome', 'cancelled')) /* p_results */,
                             p_now, 0 /* p_hand_off */, v_ended);
      INSERT INTO orbit_task_event (task_id, attempt_id, event, from_state, to_state, concurrency_token, detail, created_at)
    SELECT a.task_id, a.id, CONCAT('attempt_', a.outcome), IF(a.started_at IS NULL, 'LEASED', 'RUNNING'), t.state,
           a.concurrency_token, CONCAT('attempt ', a.state, '; permits released'), p_now
      FROM (SELECT v_holder AS id) e
      STRAIGHT_JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = e.id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id
     ORDER BY a.id;
      UPDATE (SELECT a.quota_slot AS slot, COUNT(*) AS active,
                 CAST(SUM(t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) AS SIGNED) AS incomplete
            FROM (SELECT x.quota_slot, x.task_id FROM orbit_attempt x WHERE x.id = v_holder) a
            JOIN orbit_task t ON t.id = a.task_id
           GROUP BY a.quota_slot) g
    STRAIGHT_JOIN orbit_application_quota q ON q.application_id = p_application_id AND q.slot = g.slot
     SET q.active_attempts = q.active_attempts - g.active,
         q.incomplete_tasks = q.incomplete_tasks - g.incomplete,
         q.updated_at = p_now;
      SET o_cancelled = v_holder;
    END IF;
  END IF;
  IF p_debounce_seconds > 0 AND v_resource_id <> 0 THEN
    -- The acceptance time of a debounced task is read under its key's lock: a waiting task this
    -- call skips (locked) is being promoted, so it was due before now, and no two debounced
    -- tasks that run have overlapping windows (created_at to run_at).
    SET p_now = GREATEST(p_now, UTC_TIMESTAMP(6));
    SELECT t.id, t.quota_slot, t.debounce_until INTO v_replaced, v_replaced_slot, v_debounce_until
      FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'scheduled' AND t.queue_id = p_queue_id
       AND t.state = 'WAITING' AND t.debounce_seconds > 0 AND t.run_at > p_now
     ORDER BY t.id DESC
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    IF v_replaced IS NULL THEN
      SET v_debounce_until = IF(p_debounce_max_seconds > 0, DATE_ADD(p_now, INTERVAL p_debounce_max_seconds SECOND), NULL);
    END IF;
    SET v_run_at = DATE_ADD(p_now, INTERVAL p_debounce_seconds SECOND);
    IF v_debounce_until < v_run_at THEN
      SET v_run_at = v_debounce_until;
    END IF;
  END IF;
  IF v_on_busy IN ('replace_waiting', 'cancel_running') THEN
    -- The oldest waiting task, unless a debounce chose the task to replace: the new task takes
    -- its quota charge. The others are replaced after the insert.
    OPEN c_waiting;
    IF v_replaced IS NULL THEN
      fetch_oldest: BEGIN
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        FETCH c_waiting INTO v_replaced, v_replaced_slot;
      END fetch_oldest;
    END IF;
  END IF;
  IF v_replaced IS NOT NULL THEN
    -- The new task takes the replaced one's quota charge.
    SET v_slot = v_replaced_slot;
  END IF;
  -- Its lane, as orbit_task_place decides it, written by the insert: a keyed task due now from
  -- its key's row (a plain read, exact under the row's lock), unless tasks of its key are
  -- replaced. Those leave their lanes after the insert, so the new task waits in lane 'none' (where
  -- the replacement, which looks for waiting tasks in every other lane, cannot take it for one
  -- of them) and is placed after them (orbit_task_place).
  IF v_resource_id = 0 THEN
    SET v_lane = IF(v_run_at > p_now, 'scheduled', 'ready');
  ELSEIF v_replaced IS NOT NULL OR v_on_busy IN ('replace_waiting', 'cancel_running') THEN
    SET v_lane = 'none';
  ELSEIF v_run_at > p_now THEN
    SET v_lane = 'scheduled';
  ELSE
    SELECT IF((r.holders >= r.holder_limit OR COALESCE(r.rate_wake_at > p_now, 0))
              OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                          WHERE h.resource_id = r.id AND h.lane = 'ready' AND h.queue_id = p_queue_id),
              'blocked', 'ready')
      INTO v_lane
      FROM orbit_resource r
     WHERE r.id = v_resource_id;
  END IF;
  INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                          payload, business_key, concurrency_key, resource_id, state, lane, priority,
                          max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
                          deadline_at, idempotency_key, plan_id, plan_version, quota_slot, created_at, updated_at,
                          debounce_seconds, debounce_until)
  VALUES (p_application_id, p_namespace_id, p_queue_id, p_handler, p_handler_version, p_payload_version,
          p_payload, p_business_key, p_concurrency_key, v_resource_id, 'WAITING', v_lane, p_priority,
          p_max_attempts, 0, p_retry_base_ms, p_retry_max_ms, p_retry_unknown, v_run_at,
          IF(p_deadline_seconds > 0, DATE_ADD(p_now, INTERVAL p_deadline_seconds SECOND), NULL),
          p_idempotency_key, p_plan_id, p_plan_version, v_slot, p_now, p_now,
          IF(v_resource_id <> 0, p_debounce_seconds, 0), IF(p_debounce_seconds > 0, v_debounce_until, NULL));
  SET o_task_id = LAST_INSERT_ID();
  IF v_replaced IS NOT NULL THEN
    UPDATE orbit_task t
       SET t.state = 'CANCELLED', t.lane = 'none', t.finished_at = p_now, t.updated_at = p_now,
           t.error = JSON_OBJECT('code', 'REPLACED', 'message', CONCAT('replaced by task ', o_task_id),
                                 'replaced_by', CAST(o_task_id AS UNSIGNED))
     WHERE t.id = v_replaced;
    INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
    VALUES (v_replaced, 'replaced', 'WAITING', 'CANCELLED', CONCAT('replaced by task ', o_task_id), p_now);
    SET o_replaced = v_replaced;
  END IF;
  IF v_on_busy IN ('replace_waiting', 'cancel_running') THEN
    -- Every other waiting task of the key in this queue (the debounced one a debounce replaced
    -- above is among them); each gives its charge back (the one quota row write this call makes
    -- before its caller's later locks: see the header).
    each_waiting: LOOP
      fetch_other: BEGIN
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        FETCH c_waiting INTO v_other, v_replaced_slot;
      END fetch_other;
      IF v_done THEN
        LEAVE each_waiting;
      END IF;
      IF v_other = v_replaced THEN
        ITERATE each_waiting;
      END IF;
      UPDATE orbit_task t
       SET t.state = 'CANCELLED', t.lane = 'none', t.finished_at = p_now, t.updated_at = p_now,
           t.error = JSON_OBJECT('code', 'REPLACED', 'message', CONCAT('replaced by task ', o_task_id),
                                 'replaced_by', CAST(o_task_id AS UNSIGNED))
     WHERE t.id = v_other;
    INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
    VALUES (v_other, 'replaced', 'WAITING', 'CANCELLED', CONCAT('replaced by task ', o_task_id), p_now);
      UPDATE orbit_application_quota q
         SET q.incomplete_tasks = q.incomplete_tasks - 1, q.updated_at = p_now
       WHERE q.application_id = p_application_id AND q.slot = v_replaced_slot;
    END LOOP each_waiting;
    CLOSE c_waiting;
  END IF;
  IF v_lane = 'none' THEN
    CALL orbit_task_place(o_task_id, p_now, v_state, v_lane);
  END IF;
  IF v_replaced IS NULL AND p_charge THEN
    CALL orbit_task_charge(p_application_id, p_now, v_charged);
    IF NOT v_charged THEN
      SET o_task_id = 0, o_refusal = 'QUOTA_EXCEEDED';
    END IF;
  END IF;
END$$
DELIMITER ;
