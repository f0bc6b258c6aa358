-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_session_attempts.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

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
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
-- Signals: UNAUTHENTICATED (no such session, or it is closed: its socket went away, the sweep
--   closed it, or its credential was revoked).
-- Locks: the orbit_session row, briefly (the touch; autocommit).
DROP PROCEDURE IF EXISTS orbit_session_attempts;
DELIMITER $$
CREATE PROCEDURE orbit_session_attempts(IN p_session_id BIGINT UNSIGNED, IN p_touch_after_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_session_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  IF p_touch_after_ms IS NOT NULL THEN
    UPDATE orbit_session s
       SET s.last_seen_at = v_now
     WHERE s.id = p_session_id AND s.state <> 'closed'
       AND s.last_seen_at <= DATE_SUB(v_now, INTERVAL p_touch_after_ms * 1000 MICROSECOND);
  END IF;
  SET v_session_state = NULL;
  SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id;
  IF v_session_state IS NULL OR v_session_state = 'closed' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: the session is closed';
  END IF;
  SELECT a.id AS attempt_id, a.attempt_no, a.lease_expires_at, a.concurrency_token,
         a.key_slot, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at
    FROM orbit_attempt a
    JOIN orbit_task t ON t.id = a.task_id
   WHERE a.session_id = p_session_id AND a.state IN ('LEASED', 'RUNNING')
   ORDER BY a.id;
END$$
DELIMITER ;
