{% import "_macros.sql" as m %}
-- orbit_plan_set_paused: Pause or resume a plan.
--
-- A paused plan does not fire. Resuming does not fire the slots missed while paused: an interval
-- plan's next slot already past moves to the first whole interval after now; a cron plan's next
-- slot is computed again by the scheduler as the first fire time after now (next_fire_at NULL,
-- schedule_after now). Idempotent.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the plan's queue); p_plan_id;
--   p_paused 0/1.
-- Result (one row): the plan columns:
{% call m::plan_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT.
-- Locks: the orbit_plan row.
CREATE PROCEDURE orbit_plan_set_paused(IN p_token_hash BINARY(32), IN p_plan_id BIGINT UNSIGNED, IN p_paused TINYINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_version INT UNSIGNED;
  DECLARE v_interval BIGINT;
  DECLARE v_kind VARCHAR(16) {{ c.ascii }};
  DECLARE v_paused TINYINT;
  {% call m::rollback_on_error() %};

  SELECT p.queue_id INTO v_queue_id FROM orbit_plan p WHERE p.id = p_plan_id;
  -- A missing plan and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'queues:manage', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    {% call m::raise("NOT_FOUND", "plan not found") %};
  END IF;
  IF p_paused IS NULL OR p_paused NOT IN (0, 1) THEN
    {% call m::raise("INVALID_ARGUMENT", "paused must be true or false") %};
  END IF;

  {% call m::begin() %};
  SELECT p.current_version, p.paused INTO v_version, v_paused FROM orbit_plan p WHERE p.id = p_plan_id FOR UPDATE;
  IF v_paused <> p_paused THEN
    SELECT v.schedule_kind, IF(v.schedule_kind = 'interval', CAST(v.schedule_spec AS UNSIGNED), 0)
      INTO v_kind, v_interval
      FROM orbit_plan_version v WHERE v.plan_id = p_plan_id AND v.version = v_version;
    UPDATE orbit_plan p
       SET p.next_fire_at = IF(p_paused = 1, p.next_fire_at,
                               IF(v_kind = 'interval', {% call m::next_slot("p.next_fire_at", "v_interval", "v_now") %}, NULL)),
           p.schedule_after = IF(p_paused = 0 AND v_kind = 'cron', v_now, p.schedule_after),
           p.paused = p_paused, p.updated_at = v_now
     WHERE p.id = p_plan_id;
  END IF;
  COMMIT;
  SELECT {% call m::plan_columns("p", "v") %}
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = p_plan_id;
END
