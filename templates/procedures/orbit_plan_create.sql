{% import "_macros.sql" as m %}
-- orbit_plan_create: Create a plan: a named interval or cron schedule that fires tasks into a queue.
--
-- Version 1 holds the schedule and the task definition, validated by the same rules as a submit
-- (orbit_task_validate); versions are immutable. Tasks fired from a version inherit its
-- concurrency_key verbatim (no interpolation). An interval plan's first slot is now + interval.
-- A cron plan starts with next_fire_at NULL and schedule_after = now: the scheduler computes its
-- first fire time after now (orbit_plan_schedule_due, orbit_plan_schedule_set).
-- Parameters (NULL = default where one is given):
--   p_token_hash BINARY(32)   SHA-256 of the bearer token (scope queues:manage on the queue)
--   p_queue_id                CHAR(32): where fired tasks go
--   p_name                    1-191 characters, unique within the queue's namespace
{% call m::plan_schedule_doc() %}
{% call m::task_definition_doc() %}
-- Result (one row): the plan columns:
{% call m::plan_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (queue), INVALID_ARGUMENT (naming the
--   field), STATE_CONFLICT (a plan of that name exists in the namespace).
-- Locks: the new orbit_plan and orbit_plan_version rows.
CREATE PROCEDURE orbit_plan_create(
  IN p_token_hash BINARY(32),
  IN p_queue_id TEXT {{ c.ascii }},
  IN p_name TEXT {{ c.utf8 }},
  {% call m::plan_schedule_params() %},
  {% call m::task_definition_params() %})
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_plan_id BIGINT UNSIGNED;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  {% call m::plan_schedule_declare() %};
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  {% call m::rollback_on_error() %};

  CALL orbit_auth_queue_check(p_token_hash, 'queues:manage', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 191 THEN
    {% call m::raise("INVALID_ARGUMENT", "name must be 1-191 characters") %};
  END IF;
  CALL orbit_task_validate(p_handler, p_handler_version, p_payload_version, p_payload, p_business_key,
                           p_concurrency_key, p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms,
                           p_retry_unknown, p_deadline_seconds);
  {% call m::plan_schedule_validate() %};

  {% call m::begin() %};
  INSERT INTO orbit_plan (application_id, namespace_id, queue_id, name, current_version, paused, next_fire_at,
                          created_at, updated_at, schedule_after)
  VALUES (v_application_id, v_namespace_id, p_queue_id, p_name, 1, 0,
          IF(v_kind = 'interval', DATE_ADD(v_now, INTERVAL p_interval_seconds SECOND), NULL), v_now, v_now,
          IF(v_kind = 'cron', v_now, NULL));
  IF v_duplicate THEN
    ROLLBACK;
    {% call m::raise("STATE_CONFLICT", "a plan with this name already exists in the namespace") %};
  END IF;
  SET v_plan_id = LAST_INSERT_ID();
  INSERT INTO orbit_plan_version (plan_id, version, schedule_kind, schedule_spec, timezone, catch_up, on_busy,
                                  handler, handler_version,
                                  payload_version, payload, business_key, concurrency_key, priority, max_attempts,
                                  retry_base_ms, retry_max_ms, retry_unknown, deadline_seconds, created_at)
  VALUES (v_plan_id, 1, v_kind, v_spec, v_timezone, v_catch_up, v_on_busy, p_handler, p_handler_version,
          p_payload_version, p_payload, p_business_key, p_concurrency_key, p_priority, p_max_attempts,
          p_retry_base_ms, p_retry_max_ms, p_retry_unknown, p_deadline_seconds, v_now);
  COMMIT;
  SELECT {% call m::plan_columns("p", "v") %}
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = v_plan_id;
END
