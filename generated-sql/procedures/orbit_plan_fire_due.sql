-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_plan_fire_due.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_plan_fire_due: Fire due plans: one task per plan from its current version.
--
-- Called by the scheduler loop of every serve node. Due plans (not paused, next_fire_at <= now)
-- are fired earliest first, in short transactions. Each plan's row is locked FOR UPDATE SKIP
-- LOCKED, so two nodes never fire the same plan at once (the other node skips it, and after the
-- commit the plan is no longer due); the orbit_plan_fire row (primary key plan_id,
-- scheduled_for) makes a slot fire at most once even if next_fire_at is set back.
-- A slot fires unless the version's catch_up is 'none' and the slot is more than
-- 60 s late (missed: nothing is created or recorded). Firing records the
-- orbit_plan_fire row with its outcome, by the version's on_busy:
-- - 'queue': the task is created like a submit (orbit_task_create) with the version's
--   definition, concurrency_key verbatim, plan_id and plan_version set, and no Idempotency-Key
--   row (outcome 'created');
-- - 'skip': when as many hold the key as its limit allows or any task of the key waits (lanes ready, blocked,
--   scheduled), no task is created (outcome 'skipped', task_id 0); otherwise as 'queue';
-- - 'replace_waiting': when a task this plan fired still waits for the key (state WAITING), it is
--   kept and no task is created (outcome 'kept', task_id that task); otherwise as 'queue'.
-- Both checks run under the key's orbit_resource row lock, which every grant and release takes.
-- When the application's incomplete-task quota is full, the slot is skipped (nothing recorded)
-- and the plan still advances; the call goes on with the next plan.
-- Then the plan advances. An interval plan's next_fire_at moves by whole intervals: catch_up
-- 'one' and 'none' to the first slot after now (missed slots are skipped, not fired in a burst);
-- 'all' to the next slot, but no earlier than 100 intervals before the
-- first slot after now (one per visit; after a long stop the slot that was due and the
-- 100 most recent fire, those between are skipped). A cron
-- plan's next_fire_at becomes NULL and schedule_after the slot ('all') or the later of the slot
-- and now ('one', 'none'): the server computes the next fire time after it (src/schedule.rs) and
-- stores it with orbit_plan_schedule_set. A crash in between leaves the plan NULL, which any
-- server's next round completes; the slot already fired is behind schedule_after, so it never
-- fires twice.
-- Batches: the due plans whose version has no concurrency_key and whose slot is not missed, up
-- to 100 per transaction, fire set-based: one statement locks them (SKIP
-- LOCKED) and inserts their fire rows, one inserts their tasks (the rows orbit_task_create
-- writes for an unkeyed task due now; a test compares them), one charges each application of the
-- batch once on the connection's quota slot (as orbit_task_submit_many charges a batch; when
-- the slot cannot take them, on the exact total over every slot, as orbit_task_charge), and one
-- sets the fire rows' task ids and advances the plans. A quota that cannot take a whole batch
-- rolls it back, and its plans fire one at a time, each task charged on its own
-- (orbit_task_charge): a full quota skips exactly the slots that do not fit, as above. A slot
-- already recorded (next_fire_at set back to it) fails the batch's first statement on the
-- primary key, which writes nothing of it: the rest of the call fires one plan at a time.
-- One at a time: every other due plan. A keyed one fires alone in its transaction (its task
-- locks the key's orbit_resource row: alone, it takes its locks in the order a single fire always
-- did); others (a missed or already recorded slot, the plans of a refused batch) up to
-- 100 per transaction. After each batch the earliest due plans that cannot join
-- one fire this way, until the earliest can again.
-- Parameters: p_limit 1-10000 (plans visited per call).
-- Result (one row): fired INT (slots fired: tasks created, skipped or kept), next_fire_at
--   DATETIME(6) (earliest slot of an active plan, NULL when none).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per transaction in order: orbit_plan rows (FOR UPDATE SKIP LOCKED: a batch's, or one
--   plan's), with the new orbit_plan_fire rows and the new orbit_task rows (a batch's inserted by
--   one statement, which holds the AUTO-INC lock of orbit_task for it). One plan at a time then
--   takes the orbit_resource row (keyed: on_busy other than 'queue', and through
--   orbit_task_create) and, through orbit_task_charge, orbit_application_quota slot rows. A batch
--   instead takes the connection's orbit_application_quota slot row of each of its applications
--   in ascending application id (or, when that slot cannot take the batch's tasks, every slot of
--   the application in ascending slot order), and last reads its own rows again to update them:
--   its orbit_task rows (FOR UPDATE SKIP LOCKED), orbit_plan rows (FOR UPDATE SKIP LOCKED),
--   orbit_plan_fire rows (FOR UPDATE SKIP LOCKED) and their orbit_plan_version rows (FOR UPDATE
--   SKIP LOCKED; nothing else locks a version row). A transaction holds its plans' rows, their
--   fire rows and the quota slot rows its tasks charged until its commit.
DROP PROCEDURE IF EXISTS orbit_plan_fire_due;
DELIMITER $$
CREATE PROCEDURE orbit_plan_fire_due(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_plan_id BIGINT UNSIGNED;
  DECLARE v_slot DATETIME(6);
  DECLARE v_version INT UNSIGNED;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_interval BIGINT;
  DECLARE v_kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_catch_up VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_resource_id BIGINT UNSIGNED;
  -- A keyed plan's key: as many hold it as its limit allows (on_busy skip).
  DECLARE v_full TINYINT DEFAULT 0;
  DECLARE v_outcome VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_batched INT DEFAULT 0;
  DECLARE v_keyed TINYINT DEFAULT 0;
  DECLARE v_handler VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_handler_version VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_payload_version VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_business_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_concurrency_key VARBINARY(764);
  DECLARE v_priority INT;
  DECLARE v_max_attempts INT;
  DECLARE v_retry_base_ms BIGINT;
  DECLARE v_retry_max_ms BIGINT;
  DECLARE v_retry_unknown TINYINT;
  DECLARE v_deadline_seconds BIGINT;
  DECLARE v_task_id BIGINT UNSIGNED;
  -- orbit_task_create's o_replaced and o_cancelled (always 0: a plan's task is never debounced,
  -- and follows its plan's on_busy, not a key policy) and o_refusal (QUOTA_EXCEEDED when
  -- v_task_id is 0).
  DECLARE v_replaced BIGINT UNSIGNED;
  DECLARE v_refusal VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_cancelled BIGINT UNSIGNED;
  DECLARE v_fired INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  -- Batches: whether the next transaction tries one; how many plans to fire one at a time first
  -- (a refused batch's); whether the plans one at a time are the earliest after a batch (then
  -- one that could join a batch starts the next batch instead).
  DECLARE v_set_based TINYINT DEFAULT 1;
  DECLARE v_one_by_one INT DEFAULT 0;
  DECLARE v_front TINYINT DEFAULT 0;
  DECLARE v_batchable TINYINT DEFAULT 0;
  -- A batch: its size limit, its plans, its first task id, how many of its tasks are charged, the
  -- tasks of one application, and whether every step added up.
  DECLARE v_batch INT;
  DECLARE v_count INT;
  DECLARE v_first BIGINT UNSIGNED;
  DECLARE v_charged INT;
  DECLARE v_n INT;
  DECLARE v_ok TINYINT;
  -- An application's quota over every slot: its limit and its total.
  DECLARE v_limit BIGINT UNSIGNED;
  DECLARE v_total BIGINT;
  DECLARE v_quota_slot TINYINT UNSIGNED DEFAULT (CONNECTION_ID() % 16);
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  due: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_plan_id = NULL, v_duplicate = 0;
    IF v_batched = 0 THEN
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
      IF v_set_based AND v_one_by_one = 0 THEN
        -- A batch: lock the earliest due plans that are unkeyed and whose slot is not missed,
        -- skipping those another transaction holds, and insert their fire rows (task 0 until the
        -- tasks exist: the mark batch_plans reads them by). ix_plan_due order, so the locking read
        -- stops at the batch's end. An already recorded slot is not looked up here: a read of the
        -- table an INSERT ... SELECT writes makes MariaDB read every due plan first. The primary
        -- key refuses it instead (below).
        SET v_batch = LEAST(100, p_limit - v_seen);
        INSERT INTO orbit_plan_fire (plan_id, scheduled_for, version, task_id, outcome, fired_at)
        SELECT p.id, p.next_fire_at, p.current_version, 0, 'created', v_now
          FROM orbit_plan p FORCE INDEX (ix_plan_due)
         WHERE p.paused = 0 AND p.next_fire_at <= v_now
           AND (SELECT v.concurrency_key = ''
                       AND (v.catch_up <> 'none'
                            OR TIMESTAMPDIFF(MICROSECOND, p.next_fire_at, v_now) <= 60 * 1000000)
                  FROM orbit_plan_version v
                 WHERE v.plan_id = p.id AND v.version = p.current_version)
         ORDER BY p.next_fire_at
         LIMIT v_batch
           FOR UPDATE SKIP LOCKED;
        SET v_count = ROW_COUNT();
        IF v_duplicate THEN
          -- A slot already recorded (next_fire_at was set back to it): the statement inserted
          -- nothing, and the rest of the call fires one plan at a time, which records nothing for
          -- that slot and moves its plan on.
          ROLLBACK;
          SET v_set_based = 0;
          ITERATE due;
        END IF;
        IF v_count = 0 THEN
          -- None (left): the due plans that are left fire one at a time, in this transaction.
          SET v_set_based = 0, v_front = 0;
        ELSE
          -- The tasks, by one insert of the rows orbit_task_create writes for an unkeyed task due
          -- now (m::task_insert_values: lane 'ready', run_at now, the connection's quota slot, no
          -- debounce, no Idempotency-Key), in slot order.
          INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                                  payload, business_key, concurrency_key, resource_id, state, lane, priority,
                                  max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
                                  deadline_at, idempotency_key, plan_id, plan_version, quota_slot, created_at, updated_at,
                                  debounce_seconds, debounce_until)
          SELECT p.application_id, p.namespace_id, p.queue_id, v.handler, v.handler_version, v.payload_version,
                 v.payload, v.business_key, '', 0, 'WAITING', 'ready', v.priority,
                 v.max_attempts, 0, v.retry_base_ms, v.retry_max_ms, v.retry_unknown, v_now,
                 IF(v.deadline_seconds > 0, DATE_ADD(v_now, INTERVAL v.deadline_seconds SECOND), NULL),
                 '', p.id, f.version, v_quota_slot, v_now, v_now,
                 0, NULL
            FROM orbit_plan p FORCE INDEX (ix_plan_due)
      STRAIGHT_JOIN orbit_plan_fire f ON f.plan_id = p.id AND f.scheduled_for = p.next_fire_at
      STRAIGHT_JOIN orbit_plan_version v ON v.plan_id = f.plan_id AND v.version = f.version
     WHERE p.paused = 0 AND p.next_fire_at <= v_now
       AND f.task_id = 0 AND f.outcome = 'created' AND f.fired_at = v_now
     ORDER BY p.next_fire_at
     LIMIT v_count;
          SET v_ok = (ROW_COUNT() = v_count), v_first = LAST_INSERT_ID(), v_charged = 0, v_application_id = 0;
          -- The incomplete-task quota, once per application of the batch (in ascending id), on
          -- the connection's slot (as orbit_task_submit_many charges a batch).
          charge: WHILE v_ok AND v_charged < v_count DO
            SET v_n = 0;
            SELECT b.application_id, COUNT(*) INTO v_application_id, v_n
              FROM (SELECT p.application_id FROM orbit_plan p FORCE INDEX (ix_plan_due)
      STRAIGHT_JOIN orbit_plan_fire f ON f.plan_id = p.id AND f.scheduled_for = p.next_fire_at
     WHERE p.paused = 0 AND p.next_fire_at <= v_now
       AND f.task_id = 0 AND f.outcome = 'created' AND f.fired_at = v_now
     ORDER BY p.next_fire_at
     LIMIT v_count) b
             WHERE b.application_id > v_application_id
             GROUP BY b.application_id
             ORDER BY b.application_id
             LIMIT 1;
            IF v_n = 0 THEN
              SET v_ok = 0;
              LEAVE charge;
            END IF;
            UPDATE orbit_application_quota q
     SET q.incomplete_tasks = q.incomplete_tasks + v_n, q.updated_at = v_now
   WHERE q.application_id = v_application_id AND q.slot = v_quota_slot
     AND q.checked_max_incomplete_tasks = q.max_incomplete_tasks
     AND q.incomplete_tasks + v_n <= (q.max_incomplete_tasks DIV 16 + (q.slot < q.max_incomplete_tasks % 16));
            IF ROW_COUNT() = 0 THEN
              -- The slot cannot take them alone (READ COMMITTED released its row): every slot in
              -- ascending order and the exact total, as orbit_task_charge charges one task. When
              -- they all fit, that is what charging them one by one would do; when not, the batch
              -- fires one plan at a time, and the slots that fit fire.
              SELECT MIN(q.max_incomplete_tasks), SUM(q.incomplete_tasks) INTO v_limit, v_total
                FROM orbit_application_quota q
               WHERE q.application_id = v_application_id
                 FOR UPDATE;
              IF v_total + v_n <= v_limit THEN
                UPDATE orbit_application_quota q
                   SET q.incomplete_tasks = (v_total + v_n) DIV 16 + (q.slot < (v_total + v_n) % 16),
                       q.checked_max_incomplete_tasks = q.max_incomplete_tasks, q.updated_at = v_now
                 WHERE q.application_id = v_application_id;
              ELSE
                SET v_ok = 0;
              END IF;
            END IF;
            SET v_charged = v_charged + v_n;
          END WHILE charge;
          IF v_ok THEN
            -- Each fire row gets its task, and each plan advances (as one plan at a time below).
            -- The batch's tasks are found by ix_task_due (lane 'ready', run_at now, from the first
            -- id on) and matched to their plans and marked fire rows. Another call's tasks there
            -- (one that fired in the same microsecond) are skipped while it runs (SKIP LOCKED) and
            -- fail the mark once it committed; no row is waited for.
            UPDATE (SELECT o.id AS task_id, o.plan_id, f.scheduled_for AS slot, v.schedule_kind AS kind,
                           IF(v.schedule_kind = 'interval', CAST(v.schedule_spec AS UNSIGNED), 0) AS every, v.catch_up
                      FROM orbit_task o
                      STRAIGHT_JOIN orbit_plan p ON p.id = o.plan_id
                      STRAIGHT_JOIN orbit_plan_fire f ON f.plan_id = p.id AND f.scheduled_for = p.next_fire_at
                      STRAIGHT_JOIN orbit_plan_version v ON v.plan_id = f.plan_id AND v.version = f.version
                     WHERE o.lane = 'ready' AND o.run_at = v_now AND o.id >= v_first AND o.plan_id <> 0
                       AND f.version = o.plan_version AND f.task_id = 0 AND f.outcome = 'created' AND f.fired_at = v_now
                     LIMIT v_count
                       FOR UPDATE SKIP LOCKED) b
              STRAIGHT_JOIN orbit_plan q ON q.id = b.plan_id
              STRAIGHT_JOIN orbit_plan_fire r ON r.plan_id = b.plan_id AND r.scheduled_for = b.slot
               SET r.task_id = b.task_id,
                   q.next_fire_at = IF(b.kind = 'interval',
                                       IF(b.catch_up = 'all',
                                          GREATEST(DATE_ADD(b.slot, INTERVAL b.every SECOND),
                                                   DATE_SUB(DATE_ADD(b.slot, INTERVAL b.every * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, b.slot, v_now) / (b.every * 1000000)) + 1, 0) SECOND),
                                                            INTERVAL b.every * 100 SECOND)),
                                          DATE_ADD(b.slot, INTERVAL b.every * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, b.slot, v_now) / (b.every * 1000000)) + 1, 0) SECOND)),
                                       NULL),
                   q.schedule_after = IF(b.kind = 'interval', q.schedule_after,
                                         IF(b.catch_up = 'all', b.slot, GREATEST(b.slot, v_now))),
                   q.updated_at = v_now;
            SET v_ok = (ROW_COUNT() = 2 * v_count);
          END IF;
          IF NOT v_ok THEN
            -- A slot refused the charge (or, never seen, a step did not add up): undo the batch
            -- and fire its plans one at a time, each task charged on its own.
            ROLLBACK;
            SET v_one_by_one = v_count;
            ITERATE due;
          END IF;
          COMMIT;
          SET v_seen = v_seen + v_count, v_fired = v_fired + v_count, v_set_based = 0, v_front = 1;
          ITERATE due;
        END IF;
      END IF;
    END IF;
    SELECT p.id, p.next_fire_at, p.current_version, p.application_id, p.namespace_id, p.queue_id
      INTO v_plan_id, v_slot, v_version, v_application_id, v_namespace_id, v_queue_id
      FROM orbit_plan p
     WHERE p.paused = 0 AND p.next_fire_at <= v_now
     ORDER BY p.next_fire_at
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    IF v_plan_id IS NULL THEN
      COMMIT;
      SET v_batched = 0;
      LEAVE due;
    END IF;
    SET v_keyed = 0, v_batchable = 0;
    IF v_batched > 0 OR (v_front AND v_one_by_one = 0) THEN
      SELECT v.concurrency_key <> '',
             v.concurrency_key = ''
               AND (v.catch_up <> 'none'
                    OR TIMESTAMPDIFF(MICROSECOND, v_slot, v_now) <= 60 * 1000000)
               AND NOT EXISTS (SELECT 1 FROM orbit_plan_fire r WHERE r.plan_id = v_plan_id AND r.scheduled_for = v_slot)
        INTO v_keyed, v_batchable
        FROM orbit_plan_version v WHERE v.plan_id = v_plan_id AND v.version = v_version;
    END IF;
    IF v_keyed AND v_batched > 0 THEN
      -- A keyed plan fires in a transaction of its own: commit the batch (which lets this plan's
      -- row go too) and start over; the next round takes the earliest due plan, this one unless
      -- another node took it meanwhile.
      COMMIT;
      SET v_batched = 0;
      ITERATE due;
    END IF;
    IF v_batchable AND v_front AND v_one_by_one = 0 THEN
      -- After a batch, the earliest due plan could join one: let it go and take the next batch.
      COMMIT;
      SET v_batched = 0, v_set_based = 1;
      ITERATE due;
    END IF;
    SET v_seen = v_seen + 1;
    SELECT v.schedule_kind, IF(v.schedule_kind = 'interval', CAST(v.schedule_spec AS UNSIGNED), 0), v.catch_up,
           v.on_busy, v.handler, v.handler_version, v.payload_version, v.payload,
           v.business_key, v.concurrency_key, v.priority, v.max_attempts, v.retry_base_ms, v.retry_max_ms,
           v.retry_unknown, v.deadline_seconds
      INTO v_kind, v_interval, v_catch_up, v_on_busy, v_handler, v_handler_version, v_payload_version, v_payload,
           v_business_key, v_concurrency_key, v_priority, v_max_attempts, v_retry_base_ms, v_retry_max_ms,
           v_retry_unknown, v_deadline_seconds
      FROM orbit_plan_version v
     WHERE v.plan_id = v_plan_id AND v.version = v_version;
    IF v_catch_up = 'none' AND TIMESTAMPDIFF(MICROSECOND, v_slot, v_now) > 60 * 1000000 THEN
      -- Missed: catch_up none fires no late slot.
      SET v_duplicate = 1;
    ELSE
      SAVEPOINT plan_fire;
      INSERT INTO orbit_plan_fire (plan_id, scheduled_for, version, task_id, outcome, fired_at)
      VALUES (v_plan_id, v_slot, v_version, 0, 'created', v_now);
    END IF;
    IF NOT v_duplicate THEN
      SET v_outcome = 'created', v_task_id = 0, v_resource_id = NULL;
      IF v_on_busy <> 'queue' AND v_concurrency_key <> '' THEN
        SELECT r.id, r.holders >= r.holder_limit INTO v_resource_id, v_full FROM orbit_resource r
         WHERE r.namespace_id = v_namespace_id AND r.concurrency_key = v_concurrency_key
           FOR UPDATE;
        IF v_resource_id IS NOT NULL AND v_on_busy = 'skip' THEN
          -- Plain reads, exact under the resource row lock.
          SELECT IF(v_full
                    OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                                WHERE h.resource_id = v_resource_id AND h.lane IN ('ready', 'blocked', 'scheduled')),
                    'skipped', 'created')
            INTO v_outcome;
        ELSEIF v_resource_id IS NOT NULL THEN
          SELECT h.id INTO v_task_id FROM orbit_task h FORCE INDEX (ix_task_key)
           WHERE h.resource_id = v_resource_id AND h.lane IN ('ready', 'blocked', 'scheduled')
             AND h.state = 'WAITING' AND h.plan_id = v_plan_id
           ORDER BY h.id
           LIMIT 1;
          SET v_outcome = IF(v_task_id <> 0, 'kept', 'created');
        END IF;
      END IF;
      IF v_outcome = 'created' THEN
        CALL orbit_task_create(v_application_id, v_namespace_id, v_queue_id, v_handler, v_handler_version,
                               v_payload_version, v_payload, v_business_key, v_concurrency_key, v_priority,
                               v_max_attempts, v_retry_base_ms, v_retry_max_ms, v_retry_unknown,
                               v_deadline_seconds, v_now /* p_run_at */, 0 /* p_debounce_seconds */,
                               0 /* p_debounce_max_seconds */, '' /* p_idempotency_key */, v_plan_id,
                               v_version /* p_plan_version */, v_now, 1 /* p_charge */, v_task_id, v_replaced,
                               v_refusal, v_cancelled);
      END IF;
      IF v_task_id = 0 AND v_outcome <> 'skipped' THEN
        -- QUOTA_EXCEEDED: skip this slot without recording it.
        ROLLBACK TO SAVEPOINT plan_fire;
      ELSE
        UPDATE orbit_plan_fire f SET f.task_id = v_task_id, f.outcome = v_outcome
         WHERE f.plan_id = v_plan_id AND f.scheduled_for = v_slot;
        SET v_fired = v_fired + 1;
      END IF;
    END IF;
    IF v_kind = 'interval' THEN
      UPDATE orbit_plan p
         SET p.next_fire_at = IF(v_catch_up = 'all',
                                 GREATEST(DATE_ADD(v_slot, INTERVAL v_interval SECOND),
                                          DATE_SUB(DATE_ADD(v_slot, INTERVAL v_interval * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, v_slot, v_now) / (v_interval * 1000000)) + 1, 0) SECOND),
                                                   INTERVAL v_interval * 100 SECOND)),
                                 DATE_ADD(v_slot, INTERVAL v_interval * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, v_slot, v_now) / (v_interval * 1000000)) + 1, 0) SECOND)),
             p.updated_at = v_now
       WHERE p.id = v_plan_id;
    ELSE
      UPDATE orbit_plan p
         SET p.next_fire_at = NULL, p.schedule_after = IF(v_catch_up = 'all', v_slot, GREATEST(v_slot, v_now)),
             p.updated_at = v_now
       WHERE p.id = v_plan_id;
    END IF;
    -- The last plan of a refused batch commits too, so the next round can take a batch again.
    SET v_batched = v_batched + 1;
    IF v_batched >= 100 OR v_concurrency_key <> '' OR v_one_by_one = 1 THEN
      COMMIT;
      SET v_batched = 0;
    END IF;
    IF v_one_by_one > 0 THEN
      SET v_one_by_one = v_one_by_one - 1;
    END IF;
  END WHILE due;
  IF v_batched > 0 THEN
    COMMIT;
  END IF;
  SELECT v_fired AS fired,
         (SELECT MIN(p.next_fire_at) FROM orbit_plan p WHERE p.paused = 0) AS next_fire_at;
END$$
DELIMITER ;
