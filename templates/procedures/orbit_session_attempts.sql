{% import "_macros.sql" as m %}
-- orbit_session_attempts: The live attempts a worker session holds, as assignments.
--
-- Lets the façade deliver a grant whose answer never reached it: a claim, or a result that
-- granted the next tasks, can commit and then lose its connection before the rows are read (a
-- killed connection, a failover). Those attempts belong to the session but the worker was never
-- told; without this they would sit until their lease ran out. The façade compares this list with
-- what it has sent (at every lease renewal) and sends the difference.
-- It is also the session's heartbeat: with p_touch_after_ms, a session last heard from that long
-- ago or longer gets last_seen_at = now (so an idle worker's renewals write at most once per
-- p_touch_after_ms), which keeps orbit_session_sweep off it.
-- Parameters: p_session_id; p_touch_after_ms (NULL = do not touch).
-- Result (0..n rows, by attempt id): attempt_id, attempt_no, lease_expires_at, concurrency_token
--   (0 = no key), key_slot, then the task columns (as orbit_task_claim):
{% call m::task_columns_doc() %}
-- Signals: UNAUTHENTICATED (no such session, or it is closed: its socket went away, the sweep
--   closed it, or its credential was revoked).
-- Locks: the orbit_session row, briefly (the touch; autocommit).
CREATE PROCEDURE orbit_session_attempts(IN p_session_id BIGINT UNSIGNED, IN p_touch_after_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_session_state VARCHAR(16) {{ c.ascii }};
  IF p_touch_after_ms IS NOT NULL THEN
    UPDATE orbit_session s
       SET s.last_seen_at = v_now
     WHERE s.id = p_session_id AND s.state <> 'closed'
       AND s.last_seen_at <= DATE_SUB(v_now, INTERVAL p_touch_after_ms * 1000 MICROSECOND);
  END IF;
  {% call m::session_open_check("p_session_id", "v_session_state") %};
  SELECT {% call m::grant_columns("a", "t") %}
    FROM orbit_attempt a
    JOIN orbit_task t ON t.id = a.task_id
   WHERE a.session_id = p_session_id AND a.state IN ('LEASED', 'RUNNING')
   ORDER BY a.id;
END
