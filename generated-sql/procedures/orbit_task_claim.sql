-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_claim.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_claim: Grant up to p_max ready tasks to a worker session, in one transaction.
--
-- Runs orbit_task_grant (which tasks are granted, in which order, and what is skipped is described
-- there; each grant's own rules in orbit_attempt_grant) and commits. A claim that grants nothing writes nothing (no durable commit): idle sessions woken
-- by the dispatch signal cost the server no log flush.
-- Parameters: p_session_id; p_max 1-1000 (the session's free capacity); p_lease_ms 1000-3600000.
-- Result (0..p_max rows, one per grant):
--   attempt_id, attempt_no, lease_expires_at, concurrency_token (0 = no key), key_slot (the key's
--   permit slot, 0 to its holder limit - 1; 0 = no key), then the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
-- Signals: NOT_FOUND (no such session), INVALID_ARGUMENT (p_max, p_lease_ms).
--   A closed or draining session, or a revoked credential, gets no rows.
-- Locks: as orbit_task_grant (orbit_session row first, orbit_application_quota slot rows last).
DROP PROCEDURE IF EXISTS orbit_task_claim;
DELIMITER $$
CREATE PROCEDURE orbit_task_claim(IN p_session_id BIGINT UNSIGNED, IN p_max INT, IN p_lease_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_seq BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_granted INT DEFAULT 0;
  -- (A claim hands nothing off: always 0.)
  DECLARE v_handoffs INT;
  DECLARE v_room BIGINT;
  DECLARE v_deferred TINYINT;
  DECLARE v_queue_limited TINYINT;
  DECLARE v_granted_id BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_max IS NULL OR p_max NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: max must be between 1 and 1000';
  END IF;
  IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 3600000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: lease_ms must be between 1000 and 3600000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  -- From the front of each ready lane: a claim on its own is how a woken session finds what
  -- other sessions readied.
  CALL orbit_task_grant(p_session_id, p_max, p_lease_ms, v_now, NULL /* p_results */, 0 /* p_hinted */,
                        0 /* p_credit */, 0 /* p_every_slot */, v_deferred, v_seq, v_granted, v_handoffs, v_room,
                        v_queue_limited, v_granted_id /* p_attempt_id */);
  IF v_deferred THEN
    -- The session's slot refused the charge and may stay locked (see orbit_task_grant): again,
    -- in a transaction of its own that locks every slot at once.
    ROLLBACK;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
    CALL orbit_task_grant(p_session_id, p_max, p_lease_ms, v_now, NULL /* p_results */, 0 /* p_hinted */,
                          0 /* p_credit */, 1 /* p_every_slot */, v_deferred, v_seq, v_granted, v_handoffs, v_room,
                          v_queue_limited, v_granted_id /* p_attempt_id */);
  END IF;
  IF v_seq = 0 THEN
    ROLLBACK;
  ELSE
    COMMIT;
  END IF;
  IF v_granted = 1 THEN
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
     WHERE a.id = v_granted_id;
  ELSEIF v_granted > 1 THEN
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
     WHERE a.session_id = p_session_id AND a.claim_seq = v_seq
     ORDER BY a.id;
  ELSE
    -- No grant, no rows: no row has id 0 (a primary-key probe that finds nothing).
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
     WHERE a.id = 0;
  END IF;
END$$
DELIMITER ;
