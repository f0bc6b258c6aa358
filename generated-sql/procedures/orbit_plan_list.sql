-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_plan_list.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_plan_list: List the plans a credential reaches, in id order, a page at a time.
--
-- Only plans of queues of the credential's application and environment within its queue scope
-- (a namespace-wide grant or the listed queues); p_queue_id narrows to one queue, which must pass
-- the queue check. Keyset pagination: pass the last plan_id of a page as p_after_id for the next
-- one. Cost: the namespaces of the credential's scope are read from ux_plan_name, so a page reads
-- at most the plans of those namespaces (never another tenant's).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_queue_id (NULL = every queue in
--   scope); p_limit 1-1000; p_after_id (NULL = from the first plan).
-- Result (0..p_limit rows, plan_id order): the plan columns:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (p_queue_id), INVALID_ARGUMENT (p_limit).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_plan_list;
DELIMITER $$
CREATE PROCEDURE orbit_plan_list(IN p_token_hash BINARY(32), IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_limit BIGINT,
                                 IN p_after_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_queue_id IS NOT NULL THEN
    CALL orbit_auth_queue_check(p_token_hash, 'tasks:read', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
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
   WHERE p.namespace_id IN (SELECT n.id
                              FROM orbit_credential_scope s
                              JOIN orbit_namespace n ON n.id = s.namespace_id
                             WHERE s.credential_id = v_credential_id AND n.application_id = v_application_id
                               AND n.environment_id = v_environment_id)
     AND p.id > COALESCE(p_after_id, 0)
     AND (p_queue_id IS NULL OR p.queue_id = p_queue_id)
     AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                WHERE s.credential_id = v_credential_id AND s.namespace_id = p.namespace_id
                  AND s.queue_id IN ('', p.queue_id))
   ORDER BY p.id
   LIMIT p_limit;
END$$
DELIMITER ;
