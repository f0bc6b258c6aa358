{% import "_macros.sql" as m %}
-- orbit_task_promote_due: Move scheduled tasks whose run_at has come into the ready or blocked lane, and wake keys whose rate allows a grant again.
--
-- Retries wait in the 'scheduled' lane (RETRY_WAIT) so they do not occupy their key during the
-- backoff; when due they compete again like a new task (orbit_task_place). Then the keys whose
-- rate_wake_at has come (ix_resource_wake): a grant their rate refused left their tasks blocked,
-- and each gets its next task ready in every queue (orbit_key_promote_all). One short
-- transaction per task or key, at most p_limit of them in all.
-- Parameters: p_limit 1-10000.
-- Result (one row): promoted INT (tasks and keys), next_run_at DATETIME(6) (the earliest
--   scheduled task still waiting or key rate wait, NULL when none: when to call again).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per task in order: orbit_task row, orbit_resource row (keyed); per key: orbit_resource
--   row, the promoted orbit_task rows (SKIP LOCKED).
CREATE PROCEDURE orbit_task_promote_due(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_lane VARCHAR(16) {{ c.ascii }};
  DECLARE v_run_at DATETIME(6);
  DECLARE v_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_promoted INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_wake DATETIME(6);
  {% call m::rollback_on_error() %};

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and 10000") %};
  END IF;
  due: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_task_id = NULL;
    SELECT t.id INTO v_task_id
      FROM orbit_task t
     WHERE t.lane = 'scheduled' AND t.run_at <= v_now
     ORDER BY t.run_at
     LIMIT 1;
    IF v_task_id IS NULL THEN
      LEAVE due;
    END IF;
    SET v_seen = v_seen + 1;
    {% call m::begin() %};
    SELECT t.lane, t.run_at INTO v_lane, v_run_at FROM orbit_task t WHERE t.id = v_task_id FOR UPDATE;
    IF v_lane = 'scheduled' AND v_run_at <= v_now THEN
      CALL orbit_task_place(v_task_id, v_now, v_state, v_lane);
      SET v_promoted = v_promoted + 1;
    END IF;
    COMMIT;
  END WHILE due;
  wake_keys: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_resource_id = NULL;
    SELECT r.id INTO v_resource_id
      FROM orbit_resource r
     WHERE r.rate_wake_at <= v_now
     ORDER BY r.rate_wake_at
     LIMIT 1;
    IF v_resource_id IS NULL THEN
      LEAVE wake_keys;
    END IF;
    SET v_seen = v_seen + 1;
    {% call m::begin() %};
    SELECT r.rate_wake_at INTO v_wake FROM orbit_resource r WHERE r.id = v_resource_id FOR UPDATE;
    IF v_wake <= v_now THEN
      UPDATE orbit_resource r SET r.rate_wake_at = NULL WHERE r.id = v_resource_id;
      CALL orbit_key_promote_all(v_resource_id, v_now);
      SET v_promoted = v_promoted + 1;
    END IF;
    COMMIT;
  END WHILE wake_keys;
  SELECT v_promoted AS promoted,
         (SELECT MIN(w.at)
            FROM (SELECT MIN(t.run_at) AS at FROM orbit_task t WHERE t.lane = 'scheduled'
                  UNION ALL
                  SELECT MIN(r.rate_wake_at) FROM orbit_resource r) w) AS next_run_at;
END
