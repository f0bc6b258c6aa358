-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_plan_get.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_plan_get: Read one plan with its current version, as its credential may see it.
--
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the plan's queue); p_plan_id.
-- Result (one row): the plan columns:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (no such plan, or another tenant's).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_plan_get;
DELIMITER $$
CREATE PROCEDURE orbit_plan_get(IN p_token_hash BINARY(32), IN p_plan_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  SELECT p.queue_id INTO v_queue_id FROM orbit_plan p WHERE p.id = p_plan_id;
  -- A missing plan and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: plan not found';
  END IF;
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
