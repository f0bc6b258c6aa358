{% import "_macros.sql" as m %}
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
{% call m::task_definition_doc() %}
{% call m::task_timing_doc() %}
-- Result (one row): replayed TINYINT (0 = created now, 1 = the original), then the task columns:
{% call m::task_columns_doc() %}
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
CREATE PROCEDURE orbit_task_submit(
  IN p_token_hash BINARY(32),
  IN p_idempotency_key BLOB,
  IN p_queue_id TEXT {{ c.ascii }},
  {% call m::task_definition_params() %},
  {% call m::task_timing_params() %})
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
  DECLARE v_message VARCHAR(128) {{ c.utf8 }};
  DECLARE v_replaced BIGINT UNSIGNED;
  DECLARE v_refusal VARCHAR(32) {{ c.ascii }};
  -- The holder a cancel_running policy ended for this submit, and its session; 0 when none.
  DECLARE v_cancelled BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_cancelled_session BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_charged TINYINT;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  {% call m::rollback_on_error() %};

  CALL orbit_auth_queue_check(p_token_hash, 'tasks:submit', p_queue_id, v_application_id, v_namespace_id, v_credential_id);

  IF p_idempotency_key IS NULL OR LENGTH(p_idempotency_key) NOT BETWEEN 1 AND 255 THEN
    {% call m::raise("INVALID_ARGUMENT", "Idempotency-Key must be 1-255 bytes") %};
  END IF;
  -- Defaults, then validation: the request hash covers the effective values.
  CALL orbit_task_validate(p_handler, p_handler_version, p_payload_version, p_payload, p_business_key,
                           p_concurrency_key, p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms,
                           p_retry_unknown, p_deadline_seconds);
  SET v_message = {% call m::task_timing_error("p_", "v_now") %};
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  -- Every field is hex-encoded, so no separator can be forged by a value.
  SET v_hash = {% call m::request_hash("p_") %};

  {% call m::begin() %};
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
    {% call m::receipt_count("v_duplicate", "p_idempotency_key", false, "    ") %};
  END IF;
  IF NOT v_duplicate THEN
    SAVEPOINT orbit_submit_task;
    CALL orbit_task_create(v_application_id, v_namespace_id, p_queue_id, p_handler, p_handler_version,
                           p_payload_version, p_payload, p_business_key, p_concurrency_key, p_priority,
                           p_max_attempts, p_retry_base_ms, p_retry_max_ms, p_retry_unknown,
                           p_deadline_seconds, {% call m::task_run_at("p_", "v_now") %} /* p_run_at */,
                           COALESCE(p_debounce_seconds, 0) /* p_debounce_seconds */,
                           COALESCE(p_debounce_max_seconds, 0) /* p_debounce_max_seconds */, p_idempotency_key,
                           0 /* p_plan_id */, 0 /* p_plan_version */, v_now, 0 /* p_charge */, v_task_id, v_replaced,
                           v_refusal, v_cancelled);
    {% call m::receipt_insert("p_idempotency_key", "v_hash", "    ") %};
    IF v_refusal = 'KEY_BUSY' AND NOT v_duplicate THEN
      ROLLBACK;
      {% call m::raise("KEY_BUSY", "the concurrency_key is held or has waiting tasks, and its key policy rejects new tasks") %};
    END IF;
    IF v_duplicate THEN
      ROLLBACK TO SAVEPOINT orbit_submit_task;
      SET v_cancelled = 0;
    END IF;
  END IF;
  IF v_duplicate THEN
    {% call m::receipt_read("p_idempotency_key", "    ") %};
    IF v_existing_hash <> v_hash THEN
      ROLLBACK;
      {% call m::raise("IDEMPOTENCY_CONFLICT", "this Idempotency-Key was used with a different request") %};
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
        {% call m::raise("QUOTA_EXCEEDED", "the application has reached its incomplete-task quota") %};
      END IF;
    END IF;
  END IF;
  COMMIT;

  SELECT v_replayed AS replayed, {% call m::task_columns("t") %},
         v_cancelled AS cancelled_attempt_id, v_cancelled_session AS cancelled_session_id
    FROM orbit_task t
   WHERE t.id = v_task_id;
END
