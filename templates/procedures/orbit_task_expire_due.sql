{% import "_macros.sql" as m %}
{#- The earliest task by deadline of each waiting lane (ready, blocked, scheduled) that meets
    `cond`, as a derived table of up to three rows of `cols`: one ix_task_deadline probe per lane.
    Over the lanes as an IN list, MIN(deadline_at) or ORDER BY ... LIMIT 1 read every waiting task
    (tasks without a deadline, NULL, sort first in each lane), and MIN(...) with IS NOT NULL still
    read every task that has one: O(backlog) on every scheduler tick. -#}
{% macro earliest_per_lane(cols, cond) %}(
{%- for lane in ["ready", "blocked", "scheduled"] %}{% if !loop.first %}
                  UNION ALL{% endif %}
                  (SELECT {{ cols }} FROM orbit_task t
                    WHERE t.lane = '{{ lane }}' AND {{ cond }} ORDER BY t.deadline_at LIMIT 1)
{%- endfor %}){% endmacro %}
-- orbit_task_expire_due: Expire waiting tasks whose total deadline has passed.
--
-- WAITING and RETRY_WAIT tasks (lanes ready, blocked, scheduled) past deadline_at become EXPIRED.
-- A ready keyed task hands its queue's slot of the key to the next blocked task. Tasks already
-- LEASED or RUNNING finish by their lease or result. One short transaction per task.
-- Parameters: p_limit 1-10000.
-- Result (one row): expired INT, next_deadline_at DATETIME(6) (earliest deadline of a waiting task,
--   NULL when none).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per task in order: orbit_task row, orbit_resource row (ready keyed task), promoted task
--   rows (SKIP LOCKED), the orbit_application_quota slot row the task charged (orbit_task.quota_slot).
CREATE PROCEDURE orbit_task_expire_due(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_lane VARCHAR(16) {{ c.ascii }};
  DECLARE v_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_deadline DATETIME(6);
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) {{ c.ascii }};
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_slot TINYINT UNSIGNED;
  DECLARE v_expired INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  {% call m::rollback_on_error() %};

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and 10000") %};
  END IF;
  due: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_task_id = NULL;
    -- The earliest due task of each lane, then the earliest of the three.
    SELECT d.id INTO v_task_id
      FROM {% call earliest_per_lane("t.id, t.deadline_at", "t.deadline_at <= v_now") %} d
     ORDER BY d.deadline_at
     LIMIT 1;
    IF v_task_id IS NULL THEN
      LEAVE due;
    END IF;
    SET v_seen = v_seen + 1;
    {% call m::begin() %};
    SELECT t.lane, t.state, t.deadline_at, t.resource_id, t.queue_id, t.application_id, t.quota_slot
      INTO v_lane, v_state, v_deadline, v_resource_id, v_queue_id, v_application_id, v_slot
      FROM orbit_task t
     WHERE t.id = v_task_id
       FOR UPDATE;
    IF v_lane IN ('ready', 'blocked', 'scheduled') AND v_deadline <= v_now THEN
      IF v_resource_id <> 0 AND v_lane = 'ready' THEN
        SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = v_resource_id FOR UPDATE;
      END IF;
      {% call m::task_expire("v_task_id", "v_state", "'total deadline passed'", "v_now") %};
      IF v_resource_id <> 0 AND v_lane = 'ready' THEN
        CALL orbit_key_promote(v_resource_id, v_queue_id, v_now);
      END IF;
      UPDATE orbit_application_quota q
         SET q.incomplete_tasks = q.incomplete_tasks - 1, q.updated_at = v_now
       WHERE q.application_id = v_application_id AND q.slot = v_slot;
      SET v_expired = v_expired + 1;
    END IF;
    COMMIT;
  END WHILE due;
  SELECT v_expired AS expired,
         (SELECT MIN(d.deadline_at)
            FROM {% call earliest_per_lane("t.deadline_at", "t.deadline_at IS NOT NULL") %} d
         ) AS next_deadline_at;
END
