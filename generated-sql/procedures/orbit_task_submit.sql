-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_submit.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_submit: Accept a task once per Idempotency-Key: create it, or replay the original.
--
-- The same (application, Idempotency-Key) with the same request returns the original task with
-- replayed = 1; with any other field (concurrency_key included) it is an IDEMPOTENCY_CONFLICT.
-- Concurrent identical submits serialise on the idempotency row: exactly one creates the task
-- (a submit that finds the row taken undoes the task it had created, and replays); a keyed
-- replay after the original committed reads the row and creates nothing.
-- A keyed task is accepted even while its key is held: it waits (WAITING, lane blocked) without
-- consuming an attempt, counts against the incomplete-task quota, and its deadline keeps running.
-- A task with a run_at ahead (p_run_at, p_delay_seconds, p_debounce_seconds) waits in the
-- 'scheduled' lane, which the claim never scans, until orbit_task_promote_due places it. A
-- debounced submit replaces its key's debounced task that still waits (see orbit_task_create):
-- the replaced task's Idempotency-Key still answers with it, now CANCELLED; a full
-- incomplete-task quota does not refuse a replacement, which takes the replaced task's charge.
-- Parameters (NULL = default where one is given):
--   p_token_hash BINARY(32)   SHA-256 of the bearer token (scope tasks:submit on the queue)
--   p_idempotency_key         1-255 bytes
--   p_queue_id                CHAR(32)
--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none
--   p_run_at                  UTC time before which the task is not claimed; a past time runs at
--                             once; at most 31536000 s (365 days) ahead; NULL = now
--   p_delay_seconds           0-31536000: run_at is acceptance + this; NULL or 0 = none;
--                             not with p_run_at
--   p_debounce_seconds        0-31536000, keyed tasks only, not with p_run_at or
--                             p_delay_seconds: the task runs this long after acceptance unless a
--                             later debounced submit for its key and queue replaces it first (it
--                             ends CANCELLED, error code REPLACED naming its successor); NULL or 0 = none
--   p_debounce_max_seconds    0-31536000, with p_debounce_seconds and at least it: the
--                             latest run_at a burst of replacements may reach, counted from the
--                             burst's first submit; NULL or 0 = no bound
-- Result (one row): replayed TINYINT (0 = created now, 1 = the original), then the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
--   then cancelled_attempt_id, cancelled_session_id: the key's holder a cancel_running policy
--   ended for this submit, and its worker session (whose worker the caller tells); 0 = none.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (queue), INVALID_ARGUMENT (naming the
--   field), IDEMPOTENCY_CONFLICT, QUOTA_EXCEEDED (incomplete tasks), KEY_BUSY (the key's policy
--   is 'reject' and the key is held or has waiting tasks: nothing is written, and a replay is
--   decided again).
-- Locks, in order: through orbit_task_create, the orbit_resource row (keyed; insert or FOR
--   UPDATE) and the replaced task row (debounce); then the orbit_idempotency row: its insert
--   (after the new task row and, unkeyed, the AUTO-INC lock of orbit_task for one statement),
--   or FOR UPDATE on a replay or a refused task; then as orbit_task_charge, last. One step out
--   of this order: a key policy that replaces waiting tasks or cancels the holder gives their
--   quota charges back inside orbit_task_create, before the receipt. Only a concurrent submit of
--   the same Idempotency-Key with another key or none (a conflicting request) can then wait in
--   a cycle with it; the database rolls one back (a deadlock), and the caller's retry answers
--   the conflict.
DROP PROCEDURE IF EXISTS orbit_task_submit;
DELIMITER $$
CREATE PROCEDURE orbit_task_submit(
  IN p_token_hash BINARY(32),
  IN p_idempotency_key BLOB,
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT,
  IN p_run_at DATETIME(6),
  IN p_delay_seconds BIGINT,
  IN p_debounce_seconds BIGINT,
  IN p_debounce_max_seconds BIGINT)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_hash BINARY(32);
  DECLARE v_existing_hash BINARY(32) DEFAULT NULL;
  DECLARE v_task_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE v_replayed TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_replaced BIGINT UNSIGNED;
  DECLARE v_refusal VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  -- The holder a cancel_running policy ended for this submit, and its session; 0 when none.
  DECLARE v_cancelled BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_cancelled_session BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_charged TINYINT;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_queue_check(p_token_hash, 'tasks:submit', p_queue_id, v_application_id, v_namespace_id, v_credential_id);

  IF p_idempotency_key IS NULL OR LENGTH(p_idempotency_key) NOT BETWEEN 1 AND 255 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: Idempotency-Key must be 1-255 bytes';
  END IF;
  -- Defaults, then validation: the request hash covers the effective values.
  CALL orbit_task_validate(p_handler, p_handler_version, p_payload_version, p_payload, p_business_key,
                           p_concurrency_key, p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms,
                           p_retry_unknown, p_deadline_seconds);
  SET v_message = CASE
       WHEN p_run_at IS NOT NULL AND p_delay_seconds IS NOT NULL
         THEN 'run_at and delay_seconds cannot both be given'
       WHEN p_delay_seconds NOT BETWEEN 0 AND 31536000
         THEN 'delay_seconds must be between 0 and 31536000 (365 days)'
       WHEN p_run_at > DATE_ADD(v_now, INTERVAL 31536000 SECOND)
         THEN 'run_at must be at most 365 days ahead'
       WHEN p_debounce_seconds NOT BETWEEN 0 AND 31536000
         THEN 'debounce_seconds must be between 0 and 31536000 (365 days)'
       WHEN p_debounce_max_seconds NOT BETWEEN 0 AND 31536000
         THEN 'debounce_max_seconds must be between 0 and 31536000 (365 days)'
       WHEN p_debounce_seconds > 0 AND p_concurrency_key = ''
         THEN 'debounce_seconds needs a concurrency_key'
       WHEN p_debounce_seconds > 0 AND (p_run_at IS NOT NULL OR p_delay_seconds > 0)
         THEN 'debounce_seconds cannot be combined with run_at or delay_seconds'
       WHEN p_debounce_max_seconds > 0 AND p_debounce_max_seconds < COALESCE(p_debounce_seconds, 0)
         THEN 'debounce_max_seconds must be at least debounce_seconds'
       WHEN p_debounce_max_seconds > 0 AND NOT COALESCE(p_debounce_seconds, 0) > 0
         THEN 'debounce_max_seconds needs debounce_seconds'
  END;
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  -- Every field is hex-encoded, so no separator can be forged by a value.
  SET v_hash = UNHEX(SHA2(CONCAT_WS(',', HEX(p_queue_id), HEX(p_handler), HEX(p_handler_version),
                 HEX(p_payload_version), SHA2(p_payload, 256), HEX(p_business_key), HEX(p_concurrency_key),
                 p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms, p_retry_unknown,
                 p_deadline_seconds, CONCAT('run_at=', p_run_at), CONCAT('delay_seconds=', NULLIF(p_delay_seconds, 0)),
                 CONCAT('debounce_seconds=', NULLIF(p_debounce_seconds, 0)),
                 CONCAT('debounce_max_seconds=', NULLIF(p_debounce_max_seconds, 0))), 256));

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  -- The task first, then its receipt, written once with the task's id: a keyed task's key row
  -- comes before the receipt in the lock order. The receipt's insert waits for a concurrent
  -- first submit of the same Idempotency-Key, then sees it as a duplicate: what the task's
  -- creation wrote is undone (a key policy's replacements and cancel too) and the original
  -- replayed. A replay is decided before the key's policy: a refused task whose
  -- Idempotency-Key has a receipt replays it (a locking read, which waits for a concurrent first
  -- submit). A keyed task's creation takes its key's row and runs its key policy, so for a keyed
  -- submit a receipt that exists already (a client's retry, most often) is read first (a plain
  -- read), and the task is not created; an unkeyed task's creation costs less than that read on
  -- every submit.
  IF p_concurrency_key <> '' THEN
    SELECT COUNT(*) INTO v_duplicate
      FROM orbit_idempotency i
     WHERE i.application_id = v_application_id AND i.idempotency_key = p_idempotency_key;
  END IF;
  IF NOT v_duplicate THEN
    SAVEPOINT orbit_submit_task;
    CALL orbit_task_create(v_application_id, v_namespace_id, p_queue_id, p_handler, p_handler_version,
                           p_payload_version, p_payload, p_business_key, p_concurrency_key, p_priority,
                           p_max_attempts, p_retry_base_ms, p_retry_max_ms, p_retry_unknown,
                           p_deadline_seconds, CASE WHEN p_run_at IS NOT NULL THEN GREATEST(p_run_at, v_now)
            WHEN p_delay_seconds > 0 THEN DATE_ADD(v_now, INTERVAL p_delay_seconds SECOND)
            ELSE v_now END /* p_run_at */,
                           COALESCE(p_debounce_seconds, 0) /* p_debounce_seconds */,
                           COALESCE(p_debounce_max_seconds, 0) /* p_debounce_max_seconds */, p_idempotency_key,
                           0 /* p_plan_id */, 0 /* p_plan_version */, v_now, 0 /* p_charge */, v_task_id, v_replaced,
                           v_refusal, v_cancelled);
    IF v_refusal = 'KEY_BUSY' THEN
      SELECT COUNT(*) INTO v_duplicate
        FROM orbit_idempotency i
       WHERE i.application_id = v_application_id AND i.idempotency_key = p_idempotency_key
         FOR UPDATE;
    ELSE
      INSERT INTO orbit_idempotency (application_id, idempotency_key, request_hash, task_id, created_at)
      VALUES (v_application_id, p_idempotency_key, v_hash, v_task_id, v_now);
    END IF;
    IF v_refusal = 'KEY_BUSY' AND NOT v_duplicate THEN
      ROLLBACK;
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'KEY_BUSY: the concurrency_key is held or has waiting tasks, and its key policy rejects new tasks';
    END IF;
    IF v_duplicate THEN
      ROLLBACK TO SAVEPOINT orbit_submit_task;
      SET v_cancelled = 0;
    END IF;
  END IF;
  IF v_duplicate THEN
    SELECT i.request_hash, i.task_id INTO v_existing_hash, v_task_id
      FROM orbit_idempotency i
     WHERE i.application_id = v_application_id AND i.idempotency_key = p_idempotency_key
       FOR UPDATE;
    IF v_existing_hash <> v_hash THEN
      ROLLBACK;
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'IDEMPOTENCY_CONFLICT: this Idempotency-Key was used with a different request';
    END IF;
    SET v_replayed = 1;
  ELSE
    IF v_cancelled <> 0 THEN
      SELECT a.session_id INTO v_cancelled_session FROM orbit_attempt a WHERE a.id = v_cancelled;
    END IF;
    -- The incomplete-task quota last; a task that replaced another (debounce, a key policy)
    -- took its charge.
    IF v_replaced = 0 THEN
      CALL orbit_task_charge(v_application_id, v_now, v_charged);
      IF NOT v_charged THEN
        ROLLBACK;
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'QUOTA_EXCEEDED: the application has reached its incomplete-task quota';
      END IF;
    END IF;
  END IF;
  COMMIT;

  SELECT v_replayed AS replayed, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at,
         v_cancelled AS cancelled_attempt_id, v_cancelled_session AS cancelled_session_id
    FROM orbit_task t
   WHERE t.id = v_task_id;
END$$
DELIMITER ;
