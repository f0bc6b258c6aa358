{% import "_macros.sql" as m %}
-- orbit_task_event_list: List a task's history events (orbit_task_event), oldest first.
--
-- History only. The events record the changes the task row and its attempts do not keep on their
-- own: attempt ends (released, with the outcome and token), cancel, resolve, expiry, retries.
-- Grants and starts are on the attempt rows (granted_at, started_at), the acceptance is the
-- task's created_at: a timeline reads all three. A task outside the credential's reach is
-- NOT_FOUND. Reads ix_task_event_task in order from p_after_id: a page costs p_limit rows.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the task's queue); p_task_id;
--   p_limit 1-1000; p_after_id (NULL or 0 = from the first event).
-- Result (0..p_limit rows, event id order): event_id, attempt_id (0 = none), event, from_state,
--   to_state, concurrency_token (0 = none), detail, created_at (UTC).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND (no such task, or out of
--   reach), INVALID_ARGUMENT (p_limit).
-- Locks: none.
CREATE PROCEDURE orbit_task_event_list(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED, IN p_limit BIGINT,
                                       IN p_after_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    {% call m::raise("NOT_FOUND", "task not found") %};
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and 1000") %};
  END IF;
  SELECT e.id AS event_id, e.attempt_id, e.event, e.from_state, e.to_state, e.concurrency_token, e.detail,
         e.created_at
    FROM orbit_task_event e
   WHERE e.task_id = p_task_id AND e.id > COALESCE(p_after_id, 0)
   ORDER BY e.id
   LIMIT p_limit;
END
