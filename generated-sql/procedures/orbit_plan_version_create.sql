-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_plan_version_create.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

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
--   p_interval_seconds        1-31536000 for an interval plan; NULL for a cron plan
--   p_cron                    a cron plan's expression, 1-191 ASCII characters, parsed and checked by
--                             the server (src/schedule.rs), which computes its fire times; NULL for
--                             an interval plan. Exactly one of p_interval_seconds, p_cron is given.
--   p_timezone                a cron plan's IANA time zone, 1-64 characters; NULL = 'UTC'. Must be
--                             NULL or '' for an interval plan.
--   p_catch_up                'none' | 'one' | 'all' (NULL = 'one'): missed slots after a stop
--   p_on_busy                 'queue' | 'skip' | 'replace_waiting' (NULL = 'queue'): a slot while
--                             the key is busy; other than 'queue' needs a concurrency_key
--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none
-- Result (one row): the plan columns, with the new version:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (plan), INVALID_ARGUMENT (naming the
--   field).
-- Locks, in order: the orbit_plan row, the new orbit_plan_version row.
DROP PROCEDURE IF EXISTS orbit_plan_version_create;
DELIMITER $$
CREATE PROCEDURE orbit_plan_version_create(
  IN p_token_hash BINARY(32),
  IN p_plan_id BIGINT UNSIGNED,
  IN p_interval_seconds BIGINT,
  IN p_cron TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_timezone TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_catch_up TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_on_busy TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_version INT UNSIGNED;
  DECLARE v_kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_spec VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_timezone VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_catch_up VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
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
  CALL orbit_task_validate(p_handler, p_handler_version, p_payload_version, p_payload, p_business_key,
                           p_concurrency_key, p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms,
                           p_retry_unknown, p_deadline_seconds);
  IF (p_interval_seconds IS NULL) = (p_cron IS NULL) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: schedule needs exactly one of interval_seconds and cron';
  END IF;
  IF p_interval_seconds IS NOT NULL THEN
    IF p_interval_seconds NOT BETWEEN 1 AND 31536000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: interval_seconds must be between 1 and 31536000';
    END IF;
    IF p_timezone IS NOT NULL AND p_timezone <> '' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: timezone is for cron schedules only';
    END IF;
    SET v_kind = 'interval', v_spec = CAST(p_interval_seconds AS CHAR), v_timezone = '';
  ELSE
    IF CHAR_LENGTH(p_cron) NOT BETWEEN 1 AND 191 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: cron must be 1-191 characters';
    END IF;
    IF p_timezone IS NOT NULL AND CHAR_LENGTH(p_timezone) NOT BETWEEN 1 AND 64 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: timezone must be 1-64 characters';
    END IF;
    SET v_kind = 'cron', v_spec = p_cron, v_timezone = COALESCE(p_timezone, 'UTC');
  END IF;
  SET v_catch_up = COALESCE(p_catch_up, 'one'), v_on_busy = COALESCE(p_on_busy, 'queue');
  IF v_catch_up NOT IN ('none', 'one', 'all') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: catch_up must be none, one or all';
  END IF;
  IF v_on_busy NOT IN ('queue', 'skip', 'replace_waiting') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: on_busy must be queue, skip or replace_waiting';
  END IF;
  IF v_on_busy <> 'queue' AND p_concurrency_key = '' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: on_busy skip and replace_waiting need a concurrency_key';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
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
