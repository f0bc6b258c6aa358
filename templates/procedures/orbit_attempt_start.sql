{% import "_macros.sql" as m %}
-- orbit_attempt_start: Confirm the execution right of a leased attempt: LEASED -> RUNNING.
--
-- Business code may run only after this returns accepted = 1. The lease is re-checked inside the
-- transaction: an attempt whose lease has run out (or that recovery already ended) is rejected,
-- so a worker that was paused past its lease never starts. Starting an attempt that is already
-- RUNNING for the same session is accepted again (a repeated start message).
-- Parameters: p_session_id; p_attempt_id.
-- Result (one row): attempt_id, accepted TINYINT, code ('' when accepted; LEASE_EXPIRED,
--   NOT_FOUND, PERMISSION_DENIED (another session's attempt) or STATE_CONFLICT (attempt ended)),
--   state (the attempt's state after the call), lease_expires_at, concurrency_token.
-- Signals: none for the outcomes above (they are answers, not errors).
-- Locks, in order: orbit_attempt row, orbit_task row.
CREATE PROCEDURE orbit_attempt_start(IN p_session_id BIGINT UNSIGNED, IN p_attempt_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_session_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_state VARCHAR(16) {{ c.ascii }} DEFAULT '';
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6) DEFAULT NULL;
  DECLARE v_token BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_code VARCHAR(32) {{ c.ascii }} DEFAULT '';
  DECLARE v_lock BIGINT UNSIGNED;
  {% call m::rollback_on_error() %};

  {% call m::begin() %};
  SELECT a.session_id, a.state, a.task_id, a.lease_expires_at, a.concurrency_token
    INTO v_session_id, v_state, v_task_id, v_expires, v_token
    FROM orbit_attempt a
   WHERE a.id = p_attempt_id
     FOR UPDATE;
  IF v_session_id IS NULL THEN
    SET v_code = 'NOT_FOUND';
  ELSEIF v_session_id <> p_session_id THEN
    SET v_code = 'PERMISSION_DENIED';
  ELSEIF v_state = 'RUNNING' THEN
    SET v_code = '';
  ELSEIF v_state <> 'LEASED' THEN
    SET v_code = 'STATE_CONFLICT';
  ELSEIF v_expires <= v_now THEN
    SET v_code = 'LEASE_EXPIRED';
  ELSE
    SELECT t.id INTO v_lock FROM orbit_task t WHERE t.id = v_task_id FOR UPDATE;
    UPDATE orbit_attempt a SET a.state = 'RUNNING', a.started_at = v_now WHERE a.id = p_attempt_id;
    UPDATE orbit_task t SET t.state = 'RUNNING', t.updated_at = v_now WHERE t.id = v_task_id;
    INSERT INTO orbit_task_event (task_id, attempt_id, event, from_state, to_state, concurrency_token, created_at)
    VALUES (v_task_id, p_attempt_id, 'started', 'LEASED', 'RUNNING', v_token, v_now);
    SET v_state = 'RUNNING';
  END IF;
  COMMIT;
  SELECT p_attempt_id AS attempt_id, (v_code = '') AS accepted, v_code AS code,
         IF(v_code IN ('NOT_FOUND', 'PERMISSION_DENIED'), '', v_state) AS state,
         IF(v_code IN ('NOT_FOUND', 'PERMISSION_DENIED'), NULL, v_expires) AS lease_expires_at,
         IF(v_code IN ('NOT_FOUND', 'PERMISSION_DENIED'), 0, v_token) AS concurrency_token;
END
