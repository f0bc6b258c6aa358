{% import "_macros.sql" as m %}
{#- The live counts of queue `q` (src/db/queues.rs reads them after the queue columns): the
    same ranges of ix_task_list as orbit_metrics_snapshot, and the open sessions from
    ix_session_seen with a primary-key probe of orbit_session_queue each. -#}
{% macro live_counts(q) %}(SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = {{ q }}.id AND t.state = 'WAITING') AS waiting,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = {{ q }}.id AND t.state = 'LEASED') AS leased,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = {{ q }}.id AND t.state = 'RUNNING') AS running,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = {{ q }}.id AND t.state = 'RETRY_WAIT') AS retry_wait,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = {{ q }}.id AND t.state = 'NEEDS_REVIEW') AS needs_review,
         (SELECT COUNT(*) FROM orbit_session s JOIN orbit_session_queue sq ON sq.session_id = s.id AND sq.queue_id = {{ q }}.id
           WHERE s.state = 'active') AS sessions,
         (SELECT COUNT(DISTINCT s.worker_id) FROM orbit_session s
            JOIN orbit_session_queue sq ON sq.session_id = s.id AND sq.queue_id = {{ q }}.id
           WHERE s.state = 'active') AS workers{% endmacro %}
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
CREATE PROCEDURE orbit_queue_list(IN p_token_hash BINARY(32), IN p_limit BIGINT, IN p_after_id TEXT {{ c.ascii }})
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and 1000") %};
  END IF;
  SELECT {% call m::queue_columns("q") %}, q.retention_seconds,
         {% call live_counts("q") %}
    FROM orbit_queue q
   WHERE q.application_id = v_application_id AND q.environment_id = v_environment_id
     AND q.id > COALESCE(p_after_id, '')
     AND {% call m::queue_in_scope("q.namespace_id", "q.id", "v_credential_id") %}
   ORDER BY q.id
   LIMIT p_limit;
END
