-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_queue_get.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_queue_get: Read one queue, as its credential may see it.
--
-- A queue outside the credential's reach (another tenant's, or not in its queue list) is
-- NOT_FOUND, the same as orbit_queue_list not listing it.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_queue_id.
-- Result (one row): the queue columns and retention_seconds (see orbit_queue_create),
--   then its live counts: waiting, leased, running, retry_wait, needs_review (its tasks in each
--   unfinished state; finished tasks are not counted), sessions (open worker sessions serving it,
--   draining ones excluded) and workers (their distinct worker ids). Cost: one index range per
--   count, so it grows with the queue's unfinished tasks and the open sessions, never with the
--   finished tasks.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND.
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_queue_get;
DELIMITER $$
CREATE PROCEDURE orbit_queue_get(IN p_token_hash BINARY(32), IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', p_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: queue not found';
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
    FROM orbit_queue q WHERE q.id = p_queue_id;
END$$
DELIMITER ;
