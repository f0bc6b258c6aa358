{% import "_macros.sql" as m %}
-- orbit_plan_version_create: Add a plan version (schedule + task definition) and make it current.
--
-- Versions are immutable: earlier ones stay as they were, and tasks they fired keep their
-- plan_version. Later fires use the new version's definition, concurrency_key included. With an
-- interval schedule the next slot moves earlier when the new interval is shorter (next_fire_at =
-- the earlier of the scheduled slot and now + interval); it is never pushed later. With a cron
-- schedule the next slot is the expression's first fire time after now: next_fire_at becomes NULL
-- and schedule_after now, and the scheduler computes it (orbit_plan_schedule_set).
-- Parameters (NULL = default where one is given):
--   p_token_hash BINARY(32)   SHA-256 of the bearer token (scope queues:manage on the plan's queue)
--   p_plan_id
{% call m::plan_schedule_doc() %}
{% call m::task_definition_doc() %}
-- Result (one row): the plan columns, with the new version:
{% call m::plan_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (plan), INVALID_ARGUMENT (naming the
--   field).
-- Locks, in order: the orbit_plan row, the new orbit_plan_version row.
CREATE PROCEDURE orbit_plan_version_create(
  IN p_token_hash BINARY(32),
  IN p_plan_id BIGINT UNSIGNED,
  {% call m::plan_schedule_params() %},
  {% call m::task_definition_params() %})
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_version INT UNSIGNED;
  {% call m::plan_schedule_declare() %};
  {% call m::rollback_on_error() %};

  SELECT p.queue_id INTO v_queue_id FROM orbit_plan p WHERE p.id = p_plan_id;
  -- A missing plan and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'queues:manage', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    {% call m::raise("NOT_FOUND", "plan not found") %};
  END IF;
  CALL orbit_task_validate(p_handler, p_handler_version, p_payload_version, p_payload, p_business_key,
                           p_concurrency_key, p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms,
                           p_retry_unknown, p_deadline_seconds);
  {% call m::plan_schedule_validate() %};

  {% call m::begin() %};
  SELECT p.current_version + 1 INTO v_version FROM orbit_plan p WHERE p.id = p_plan_id FOR UPDATE;
  INSERT INTO orbit_plan_version (plan_id, version, schedule_kind, schedule_spec, timezone, catch_up, on_busy,
                                  handler, handler_version,
                                  payload_version, payload, business_key, concurrency_key, priority, max_attempts,
                                  retry_base_ms, retry_max_ms, retry_unknown, deadline_seconds, created_at)
  VALUES (p_plan_id, v_version, v_kind, v_spec, v_timezone, v_catch_up, v_on_busy, p_handler, p_handler_version,
          p_payload_version, p_payload, p_business_key, p_concurrency_key, p_priority, p_max_attempts,
          p_retry_base_ms, p_retry_max_ms, p_retry_unknown, p_deadline_seconds, v_now);
  UPDATE orbit_plan p
     SET p.current_version = v_version,
         p.next_fire_at = IF(v_kind = 'interval',
                             LEAST(COALESCE(p.next_fire_at, DATE_ADD(v_now, INTERVAL p_interval_seconds SECOND)),
                                   DATE_ADD(v_now, INTERVAL p_interval_seconds SECOND)),
                             NULL),
         p.schedule_after = IF(v_kind = 'cron', v_now, NULL),
         p.updated_at = v_now
   WHERE p.id = p_plan_id;
  COMMIT;
  SELECT {% call m::plan_columns("p", "v") %}
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = p_plan_id;
END
