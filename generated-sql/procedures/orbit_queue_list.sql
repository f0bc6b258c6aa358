-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_queue_list.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_queue_list: List the queues a credential reaches, in id order, a page at a time.
--
-- Only queues of the credential's application and environment within its queue scope (a
-- namespace-wide grant or the listed queues). Keyset pagination: pass the last queue_id of a page
-- as p_after_id for the next one. Reads ix_queue_application in order, so a page costs p_limit
-- rows (plus queues of the tenant outside the scope).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_limit 1-1000; p_after_id (NULL = from
--   the first queue; any string, compared byte-wise).
-- Result (0..p_limit rows): the queue columns and retention_seconds (see orbit_queue_create),
--   then its live counts: waiting, leased, running, retry_wait, needs_review (its tasks in each
--   unfinished state; finished tasks are not counted), sessions (open worker sessions serving it,
--   draining ones excluded) and workers (their distinct worker ids). Cost: one index range per
--   count, so it grows with the queue's unfinished tasks and the open sessions, never with the
--   finished tasks.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT (p_limit).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_queue_list;
DELIMITER $$
CREATE PROCEDURE orbit_queue_list(IN p_token_hash BINARY(32), IN p_limit BIGINT, IN p_after_id TEXT CHARACTER SET ascii COLLATE ascii_bin)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;
  SELECT q.id AS queue_id, q.namespace_id, q.name, q.paused,
         q.max_active_attempts, q.created_at, q.updated_at, q.retention_seconds,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'WAITING') AS waiting,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'LEASED') AS leased,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'RUNNING') AS running,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'RETRY_WAIT') AS retry_wait,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'NEEDS_REVIEW') AS needs_review,
         (SELECT COUNT(*) FROM orbit_session s JOIN orbit_session_queue sq ON sq.session_id = s.id AND sq.queue_id = q.id
           WHERE s.state = 'active') AS sessions,
         (SELECT COUNT(DISTINCT s.worker_id) FROM orbit_session s
            JOIN orbit_session_queue sq ON sq.session_id = s.id AND sq.queue_id = q.id
           WHERE s.state = 'active') AS workers
    FROM orbit_queue q
   WHERE q.application_id = v_application_id AND q.environment_id = v_environment_id
     AND q.id > COALESCE(p_after_id, '')
     AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                WHERE s.credential_id = v_credential_id AND s.namespace_id = q.namespace_id
                  AND s.queue_id IN ('', q.id))
   ORDER BY q.id
   LIMIT p_limit;
END$$
DELIMITER ;
