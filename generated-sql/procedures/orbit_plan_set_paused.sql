-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_plan_set_paused.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_plan_set_paused: Pause or resume a plan.
--
-- A paused plan does not fire. Resuming does not fire the slots missed while paused: an interval
-- plan's next slot already past moves to the first whole interval after now; a cron plan's next
-- slot is computed again by the scheduler as the first fire time after now (next_fire_at NULL,
-- schedule_after now). Idempotent.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the plan's queue); p_plan_id;
--   p_paused 0/1.
-- Result (one row): the plan columns:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT.
-- Locks: the orbit_plan row.
DROP PROCEDURE IF EXISTS orbit_plan_set_paused;
DELIMITER $$
CREATE PROCEDURE orbit_plan_set_paused(IN p_token_hash BINARY(32), IN p_plan_id BIGINT UNSIGNED, IN p_paused TINYINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_version INT UNSIGNED;
  DECLARE v_interval BIGINT;
  DECLARE v_kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_paused TINYINT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  SELECT p.queue_id INTO v_queue_id FROM orbit_plan p WHERE p.id = p_plan_id;
  -- A missing plan and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'queues:manage', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: plan not found';
  END IF;
  IF p_paused IS NULL OR p_paused NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: paused must be true or false';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT p.current_version, p.paused INTO v_version, v_paused FROM orbit_plan p WHERE p.id = p_plan_id FOR UPDATE;
  IF v_paused <> p_paused THEN
    SELECT v.schedule_kind, IF(v.schedule_kind = 'interval', CAST(v.schedule_spec AS UNSIGNED), 0)
      INTO v_kind, v_interval
      FROM orbit_plan_version v WHERE v.plan_id = p_plan_id AND v.version = v_version;
    UPDATE orbit_plan p
       SET p.next_fire_at = IF(p_paused = 1, p.next_fire_at,
                               IF(v_kind = 'interval', DATE_ADD(p.next_fire_at, INTERVAL v_interval * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, p.next_fire_at, v_now) / (v_interval * 1000000)) + 1, 0) SECOND), NULL)),
           p.schedule_after = IF(p_paused = 0 AND v_kind = 'cron', v_now, p.schedule_after),
           p.paused = p_paused, p.updated_at = v_now
     WHERE p.id = p_plan_id;
  END IF;
  COMMIT;
  SELECT p.id AS plan_id, p.queue_id, p.namespace_id, p.name,
         p.current_version, p.paused, p.next_fire_at, p.created_at, p.updated_at,
         v.schedule_kind, v.schedule_spec, v.handler, v.handler_version,
         v.payload_version, v.payload, v.business_key, v.concurrency_key,
         v.priority, v.max_attempts, v.retry_base_ms, v.retry_max_ms,
         v.retry_unknown, v.deadline_seconds, p.schedule_after, v.timezone, v.catch_up,
         v.on_busy
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = p_plan_id;
END$$
DELIMITER ;
