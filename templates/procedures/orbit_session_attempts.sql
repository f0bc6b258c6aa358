{% import "_macros.sql" as m %}
-- orbit_session_attempts: The live attempts a worker session holds, as assignments.
--
-- Lets the façade deliver a grant whose answer never reached it: a claim, or a result that
-- granted the next tasks, can commit and then lose its connection before the rows are read (a
-- killed connection, a failover). Those attempts belong to the session but the worker was never
-- told; without this they would sit until their lease ran out. The façade compares this list with
-- what it has sent (at every lease renewal) and sends the difference.
-- Parameters: p_session_id.
-- Result (0..n rows, by attempt id): attempt_id, attempt_no, lease_expires_at, concurrency_token
--   (0 = no key), then the task columns (as orbit_task_claim):
{% call m::task_columns_doc() %}
-- Signals: none (an unknown session has no attempts).
-- Locks: none.
CREATE PROCEDURE orbit_session_attempts(IN p_session_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  SELECT {% call m::grant_columns("a", "t") %}
    FROM orbit_attempt a
    JOIN orbit_task t ON t.id = a.task_id
   WHERE a.session_id = p_session_id AND a.state IN ('LEASED', 'RUNNING')
   ORDER BY a.id;
END
