{% import "_macros.sql" as m %}
-- orbit_task_purge: Delete finished tasks kept longer than their queue's retention, with their attempts, history and idempotency receipts.
--
-- A task is purged when it is SUCCEEDED, FAILED, CANCELLED or EXPIRED and finished more than its
-- queue's orbit_queue.retention_seconds before p_now. NEEDS_REVIEW and unfinished tasks are never
-- purged (finished_at is NULL until a terminal state, and the state is checked too). Its
-- orbit_attempt rows, orbit_task_event rows and the orbit_idempotency receipt that names it go in
-- the same transaction, so a receipt lives exactly as long as its task. orbit_resource rows are
-- never deleted: a key's next token stays larger than any token granted before (SPEC §4).
-- orbit_plan_fire rows stay too: they keep plan firing idempotent.
-- Queues are visited in id order; in each, the ix_task_finished range (queue_id, finished_at <
-- cutoff) is read oldest first, {{ c.purge_batch }} tasks per short transaction, taken FOR UPDATE SKIP LOCKED:
-- two servers purging at once take different tasks and never wait on each other, and a task row
-- or attempt row someone else holds is skipped and left for a later call. The claim reads the
-- ready lane (ix_task_dispatch), which holds no finished task, so it never waits on a purge.
-- A call stops at p_limit tasks, or before its next batch once p_budget_ms have passed, so it
-- answers well within the caller's timeout however slow the database is; `more` says whether it
-- stopped early (call again) or found nothing more to purge.
-- Parameters: p_now DATETIME(6) (NULL = UTC_TIMESTAMP(6): tests pass a later time instead of
--   waiting); p_limit 1-10000: the most tasks this call deletes; p_budget_ms 1-60000.
-- Result (one row): purged INT (tasks deleted; their attempts, events and receipts not counted),
--   more TINYINT (1 = stopped at the limit or the time budget: there may be more to purge).
-- Signals: INVALID_ARGUMENT (p_limit, p_budget_ms).
-- Locks, per transaction in order: the batch's orbit_task rows (SKIP LOCKED); per task, its
--   orbit_attempt rows (SKIP LOCKED: a task with a held attempt row is skipped), then its
--   orbit_task_event rows, its orbit_idempotency row and the task row's delete.
CREATE PROCEDURE orbit_task_purge(IN p_now DATETIME(6), IN p_limit INT, IN p_budget_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT '';
  DECLARE v_next_queue_id CHAR(32) {{ c.ascii }};
  DECLARE v_retention INT UNSIGNED;
  DECLARE v_cutoff DATETIME(6);
  DECLARE v_batch INT DEFAULT 0;
  DECLARE v_taken INT DEFAULT 0;
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_idempotency_key VARBINARY(255);
  DECLARE v_attempts INT UNSIGNED;
  DECLARE v_locked INT UNSIGNED;
  DECLARE v_purged INT DEFAULT 0;
  DECLARE v_purged_before INT DEFAULT 0;
  DECLARE v_done TINYINT DEFAULT 0;
  DECLARE v_more TINYINT DEFAULT 0;
  DECLARE v_started DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE c_batch CURSOR FOR
    SELECT t.id, t.application_id, t.idempotency_key
      FROM orbit_task t
     WHERE t.queue_id = v_queue_id AND t.finished_at < v_cutoff
       AND t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')
     ORDER BY t.finished_at
     LIMIT v_batch
       FOR UPDATE SKIP LOCKED;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  {% call m::rollback_on_error() %};

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and 10000") %};
  END IF;
  IF p_budget_ms IS NULL OR p_budget_ms NOT BETWEEN 1 AND 60000 THEN
    {% call m::raise("INVALID_ARGUMENT", "budget must be between 1 and 60000 ms") %};
  END IF;
  SET v_now = COALESCE(p_now, UTC_TIMESTAMP(6));
  queues: WHILE v_purged < p_limit DO
    SET v_next_queue_id = NULL;
    SELECT q.id, q.retention_seconds INTO v_next_queue_id, v_retention
      FROM orbit_queue q
     WHERE q.id > v_queue_id
     ORDER BY q.id
     LIMIT 1;
    IF v_next_queue_id IS NULL THEN
      LEAVE queues;
    END IF;
    SET v_queue_id = v_next_queue_id, v_cutoff = DATE_SUB(v_now, INTERVAL v_retention SECOND);
    -- Batches until one comes back short (the range is empty, or the rest is held by others) or
    -- purges nothing (all of it skipped), or the call's limit is reached.
    batches: REPEAT
      -- Each statement of a procedure reads the clock anew.
      IF UTC_TIMESTAMP(6) >= v_started + INTERVAL p_budget_ms * 1000 MICROSECOND THEN
        SET v_more = 1;
        LEAVE queues;
      END IF;
      SET v_batch = LEAST({{ c.purge_batch }}, p_limit - v_purged), v_taken = 0, v_done = 0,
          v_purged_before = v_purged;
      {% call m::begin() %};
      OPEN c_batch;
      tasks: LOOP
        FETCH c_batch INTO v_task_id, v_application_id, v_idempotency_key;
        IF v_done = 1 THEN
          LEAVE tasks;
        END IF;
        SET v_taken = v_taken + 1;
        -- Every attempt row of the task, or none: a held one (a late frame of its worker) means
        -- the task is left for a later call rather than waited on.
        SELECT COUNT(*) INTO v_attempts FROM orbit_attempt a WHERE a.task_id = v_task_id;
        SELECT COUNT(*) INTO v_locked
          FROM orbit_attempt a
         WHERE a.task_id = v_task_id
           FOR UPDATE SKIP LOCKED;
        IF v_locked = v_attempts THEN
          DELETE FROM orbit_attempt WHERE task_id = v_task_id;
          DELETE FROM orbit_task_event WHERE task_id = v_task_id;
          IF v_idempotency_key <> '' THEN
            DELETE FROM orbit_idempotency
             WHERE application_id = v_application_id AND idempotency_key = v_idempotency_key
               AND task_id = v_task_id;
          END IF;
          DELETE FROM orbit_task WHERE id = v_task_id;
          SET v_purged = v_purged + ROW_COUNT();
        END IF;
      END LOOP tasks;
      CLOSE c_batch;
      COMMIT;
    UNTIL v_taken < v_batch OR v_purged = v_purged_before OR v_purged >= p_limit END REPEAT batches;
  END WHILE queues;
  SELECT v_purged AS purged, IF(v_purged >= p_limit, 1, v_more) AS more;
END
