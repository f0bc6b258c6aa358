{% import "_macros.sql" as m %}
-- orbit_plan_fire_due: Fire due plans: one task per plan from its current version.
--
-- Called by the scheduler loop of every serve node. Due plans (not paused, next_fire_at <= now)
-- are fired in short transactions of up to {{ c.plan_fire_batch }} plans without a concurrency_key,
-- or of one keyed plan (whose task locks its key's orbit_resource row: alone in its transaction,
-- it takes its locks in the order a single fire always did). Each plan's row is locked FOR UPDATE
-- SKIP LOCKED, so two nodes never fire the same plan at once (the other node skips it, and after
-- the commit the plan is no longer due); the orbit_plan_fire row (primary key plan_id,
-- scheduled_for) makes a slot fire at most once even if next_fire_at is set back.
-- A slot fires unless the version's catch_up is 'none' and the slot is more than
-- {{ c.plan_missed_grace_seconds }} s late (missed: nothing is created or recorded). Firing records the
-- orbit_plan_fire row with its outcome, by the version's on_busy:
-- - 'queue': the task is created like a submit (orbit_task_create) with the version's
--   definition, concurrency_key verbatim, plan_id and plan_version set, and no Idempotency-Key
--   row (outcome 'created');
-- - 'skip': when the key has a permit holder or any task of the key waits (lanes ready, blocked,
--   scheduled), no task is created (outcome 'skipped', task_id 0); otherwise as 'queue';
-- - 'replace_waiting': when a task this plan fired still waits for the key (state WAITING), it is
--   kept and no task is created (outcome 'kept', task_id that task); otherwise as 'queue'.
-- Both checks run under the key's orbit_resource row lock, which every grant and release takes.
-- When the application's incomplete-task quota is full, the slot is skipped (nothing recorded)
-- and the plan still advances; the call goes on with the next plan.
-- Then the plan advances. An interval plan's next_fire_at moves by whole intervals: catch_up
-- 'one' and 'none' to the first slot after now (missed slots are skipped, not fired in a burst);
-- 'all' to the next slot, but no earlier than {{ c.plan_catch_up_all_max }} intervals before the
-- first slot after now (one per visit; after a long stop the slot that was due and the
-- {{ c.plan_catch_up_all_max }} most recent fire, those between are skipped). A cron
-- plan's next_fire_at becomes NULL and schedule_after the slot ('all') or the later of the slot
-- and now ('one', 'none'): the server computes the next fire time after it (src/schedule.rs) and
-- stores it with orbit_plan_schedule_set. A crash in between leaves the plan NULL, which any
-- server's next round completes; the slot already fired is behind schedule_after, so it never
-- fires twice.
-- Parameters: p_limit 1-10000 (plans visited per call).
-- Result (one row): fired INT (slots fired: tasks created, skipped or kept), next_fire_at
--   DATETIME(6) (earliest slot of an active plan, NULL when none).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per plan in order: orbit_plan row (FOR UPDATE SKIP LOCKED), orbit_plan_fire row
--   (insert), then the orbit_resource row (on_busy other than 'queue', keyed), then through
--   orbit_task_create: orbit_resource row (keyed), one orbit_application_quota slot row. A batch
--   of unkeyed plans holds its plans' rows, their fire rows and the quota slot rows its tasks
--   charged until its commit; it takes no orbit_resource row.
CREATE PROCEDURE orbit_plan_fire_due(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_plan_id BIGINT UNSIGNED;
  DECLARE v_slot DATETIME(6);
  DECLARE v_version INT UNSIGNED;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) {{ c.ascii }};
  DECLARE v_interval BIGINT;
  DECLARE v_kind VARCHAR(16) {{ c.ascii }};
  DECLARE v_catch_up VARCHAR(16) {{ c.ascii }};
  DECLARE v_on_busy VARCHAR(16) {{ c.ascii }};
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_holder BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_outcome VARCHAR(16) {{ c.ascii }};
  DECLARE v_batched INT DEFAULT 0;
  DECLARE v_keyed TINYINT DEFAULT 0;
  DECLARE v_handler VARCHAR(191) {{ c.utf8 }};
  DECLARE v_handler_version VARCHAR(64) {{ c.utf8 }};
  DECLARE v_payload_version VARCHAR(64) {{ c.utf8 }};
  DECLARE v_payload MEDIUMTEXT {{ c.utf8 }};
  DECLARE v_business_key VARCHAR(191) {{ c.utf8 }};
  DECLARE v_concurrency_key VARBINARY({{ c.key_max_bytes }});
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
  DECLARE v_refusal VARCHAR(32) {{ c.ascii }};
  DECLARE v_cancelled BIGINT UNSIGNED;
  DECLARE v_fired INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  {% call m::rollback_on_error() %};

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and 10000") %};
  END IF;
  due: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_plan_id = NULL, v_duplicate = 0;
    IF v_batched = 0 THEN
      {% call m::begin() %};
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
    SET v_keyed = 0;
    IF v_batched > 0 THEN
      SELECT v.concurrency_key <> '' INTO v_keyed
        FROM orbit_plan_version v WHERE v.plan_id = v_plan_id AND v.version = v_version;
    END IF;
    IF v_keyed THEN
      -- A keyed plan fires in a transaction of its own: commit the batch (which lets this plan's
      -- row go too) and start over; the next round takes the earliest due plan, this one unless
      -- another node took it meanwhile.
      COMMIT;
      SET v_batched = 0;
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
    IF v_catch_up = 'none' AND TIMESTAMPDIFF(MICROSECOND, v_slot, v_now) > {{ c.plan_missed_grace_seconds }} * 1000000 THEN
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
        SELECT r.id, r.holder_attempt_id INTO v_resource_id, v_holder FROM orbit_resource r
         WHERE r.namespace_id = v_namespace_id AND r.concurrency_key = v_concurrency_key
           FOR UPDATE;
        IF v_resource_id IS NOT NULL AND v_on_busy = 'skip' THEN
          -- Plain reads, exact under the resource row lock.
          SELECT IF(v_holder <> 0
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
                               v_deadline_seconds, v_now, 0, 0, '', v_plan_id, v_version, v_now, 1, v_task_id,
                               v_replaced, v_refusal, v_cancelled);
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
                                          DATE_SUB({% call m::next_slot("v_slot", "v_interval", "v_now") %},
                                                   INTERVAL v_interval * {{ c.plan_catch_up_all_max }} SECOND)),
                                 {% call m::next_slot("v_slot", "v_interval", "v_now") %}),
             p.updated_at = v_now
       WHERE p.id = v_plan_id;
    ELSE
      UPDATE orbit_plan p
         SET p.next_fire_at = NULL, p.schedule_after = IF(v_catch_up = 'all', v_slot, GREATEST(v_slot, v_now)),
             p.updated_at = v_now
       WHERE p.id = v_plan_id;
    END IF;
    SET v_batched = v_batched + 1;
    IF v_batched >= {{ c.plan_fire_batch }} OR v_concurrency_key <> '' THEN
      COMMIT;
      SET v_batched = 0;
    END IF;
  END WHILE due;
  IF v_batched > 0 THEN
    COMMIT;
  END IF;
  SELECT v_fired AS fired,
         (SELECT MIN(p.next_fire_at) FROM orbit_plan p WHERE p.paused = 0) AS next_fire_at;
END
