{% import "_macros.sql" as m %}
-- orbit_task_submit: Accept a task once per Idempotency-Key: create it, or replay the original.
--
-- The same (application, Idempotency-Key) with the same request returns the original task with
-- replayed = 1; with any other field (concurrency_key included) it is an IDEMPOTENCY_CONFLICT.
-- Concurrent identical submits serialise on the idempotency row: exactly one creates the task.
-- A keyed task is accepted even while its key is held: it waits (WAITING, lane blocked) without
-- consuming an attempt, counts against the incomplete-task quota, and its deadline keeps running.
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
-- Result (one row): replayed TINYINT (0 = created now, 1 = the original), then the task columns:
{% call m::task_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (queue), INVALID_ARGUMENT (naming the
--   field), IDEMPOTENCY_CONFLICT, QUOTA_EXCEEDED (incomplete tasks).
-- Locks, in order: orbit_idempotency row (insert), orbit_resource row (keyed; insert or FOR UPDATE),
--   orbit_application_quota row.
CREATE PROCEDURE orbit_task_submit(
  IN p_token_hash BINARY(32),
  IN p_idempotency_key BLOB,
  IN p_queue_id TEXT {{ c.ascii }},
  IN p_handler TEXT {{ c.utf8 }},
  IN p_handler_version TEXT {{ c.utf8 }},
  IN p_payload_version TEXT {{ c.utf8 }},
  IN p_payload MEDIUMTEXT {{ c.utf8 }},
  IN p_business_key TEXT {{ c.utf8 }},
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_hash BINARY(32);
  DECLARE v_existing_hash BINARY(32) DEFAULT NULL;
  DECLARE v_task_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE v_replayed TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  {% call m::rollback_on_error() %};

  CALL orbit_auth_queue_check(p_token_hash, 'tasks:submit', p_queue_id, v_application_id, v_namespace_id, v_credential_id);

  -- Defaults, then validation: the request hash covers the effective values.
  SET p_business_key = COALESCE(p_business_key, ''),
      p_priority = COALESCE(p_priority, 5),
      p_max_attempts = COALESCE(p_max_attempts, 3),
      p_retry_base_ms = COALESCE(p_retry_base_ms, 1000),
      p_retry_max_ms = COALESCE(p_retry_max_ms, 300000),
      p_retry_unknown = COALESCE(p_retry_unknown, 0),
      p_deadline_seconds = COALESCE(p_deadline_seconds, 0);
  IF p_idempotency_key IS NULL OR LENGTH(p_idempotency_key) NOT BETWEEN 1 AND 255 THEN
    {% call m::raise("INVALID_ARGUMENT", "Idempotency-Key must be 1-255 bytes") %};
  END IF;
  IF p_handler IS NULL OR CHAR_LENGTH(p_handler) NOT BETWEEN 1 AND 191 THEN
    {% call m::raise("INVALID_ARGUMENT", "handler must be 1-191 characters") %};
  END IF;
  IF p_handler_version IS NULL OR CHAR_LENGTH(p_handler_version) NOT BETWEEN 1 AND 64 THEN
    {% call m::raise("INVALID_ARGUMENT", "handler_version must be 1-64 characters") %};
  END IF;
  IF p_payload_version IS NULL OR CHAR_LENGTH(p_payload_version) NOT BETWEEN 1 AND 64 THEN
    {% call m::raise("INVALID_ARGUMENT", "payload_version must be 1-64 characters") %};
  END IF;
  IF p_payload IS NULL OR NOT JSON_VALID(p_payload) THEN
    {% call m::raise("INVALID_ARGUMENT", "payload must be valid JSON") %};
  END IF;
  IF CHAR_LENGTH(p_business_key) > 191 THEN
    {% call m::raise("INVALID_ARGUMENT", "business_key must be at most 191 characters") %};
  END IF;
  CALL orbit_key_validate(p_concurrency_key);
  IF p_priority NOT BETWEEN 0 AND 9 THEN
    {% call m::raise("INVALID_ARGUMENT", "priority must be between 0 and 9") %};
  END IF;
  IF p_max_attempts NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "max_attempts must be between 1 and 1000") %};
  END IF;
  IF p_retry_base_ms NOT BETWEEN 0 AND 86400000 OR p_retry_max_ms NOT BETWEEN 0 AND 604800000 THEN
    {% call m::raise("INVALID_ARGUMENT", "retry_base_ms must be 0-86400000 and retry_max_ms 0-604800000") %};
  END IF;
  IF p_retry_unknown NOT IN (0, 1) THEN
    {% call m::raise("INVALID_ARGUMENT", "retry_unknown must be true or false") %};
  END IF;
  IF p_deadline_seconds NOT BETWEEN 0 AND 315360000 THEN
    {% call m::raise("INVALID_ARGUMENT", "deadline_seconds must be between 1 and 315360000") %};
  END IF;
  -- Every field is hex-encoded, so no separator can be forged by a value.
  SET v_hash = UNHEX(SHA2(CONCAT_WS(',', HEX(p_queue_id), HEX(p_handler), HEX(p_handler_version),
                 HEX(p_payload_version), SHA2(p_payload, 256), HEX(p_business_key), HEX(p_concurrency_key),
                 p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms, p_retry_unknown,
                 p_deadline_seconds), 256));

  {% call m::begin() %};
  -- The insert waits for a concurrent first submit of the same key, then sees it as a duplicate.
  INSERT INTO orbit_idempotency (application_id, idempotency_key, request_hash, task_id, created_at)
  VALUES (v_application_id, p_idempotency_key, v_hash, 0, v_now);
  IF v_duplicate THEN
    SELECT i.request_hash, i.task_id INTO v_existing_hash, v_task_id
      FROM orbit_idempotency i
     WHERE i.application_id = v_application_id AND i.idempotency_key = p_idempotency_key
       FOR UPDATE;
    IF v_existing_hash <> v_hash THEN
      ROLLBACK;
      {% call m::raise("IDEMPOTENCY_CONFLICT", "this Idempotency-Key was used with a different request") %};
    END IF;
    SET v_replayed = 1;
  ELSE
    IF p_concurrency_key <> '' THEN
      -- Insert-or-lock in one statement: ON DUPLICATE KEY UPDATE takes the row's exclusive lock
      -- directly, avoiding the shared-then-exclusive upgrade that deadlocks concurrent submitters.
      INSERT INTO orbit_resource (namespace_id, concurrency_key, highest_token, version, created_at, updated_at)
      VALUES (v_namespace_id, p_concurrency_key, 0, 0, v_now, v_now)
      ON DUPLICATE KEY UPDATE version = version;
      SELECT r.id INTO v_resource_id
        FROM orbit_resource r
       WHERE r.namespace_id = v_namespace_id AND r.concurrency_key = p_concurrency_key
         FOR UPDATE;
    END IF;
    INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                            payload, business_key, concurrency_key, resource_id, state, lane, priority,
                            max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
                            deadline_at, idempotency_key, created_at, updated_at)
    VALUES (v_application_id, v_namespace_id, p_queue_id, p_handler, p_handler_version, p_payload_version,
            p_payload, p_business_key, p_concurrency_key, v_resource_id, 'WAITING', 'none', p_priority,
            p_max_attempts, 0, p_retry_base_ms, p_retry_max_ms, p_retry_unknown, v_now,
            IF(p_deadline_seconds > 0, DATE_ADD(v_now, INTERVAL p_deadline_seconds SECOND), NULL),
            p_idempotency_key, v_now, v_now);
    SET v_task_id = LAST_INSERT_ID();
    CALL orbit_task_place(v_task_id, v_now);
    UPDATE orbit_idempotency i SET i.task_id = v_task_id
     WHERE i.application_id = v_application_id AND i.idempotency_key = p_idempotency_key;
    INSERT INTO orbit_task_event (task_id, event, to_state, detail, created_at)
    SELECT v_task_id, 'submitted', t.state, CONCAT('lane ', t.lane), v_now FROM orbit_task t WHERE t.id = v_task_id;
    UPDATE orbit_application_quota q
       SET q.incomplete_tasks = q.incomplete_tasks + 1, q.updated_at = v_now
     WHERE q.application_id = v_application_id AND q.incomplete_tasks < q.max_incomplete_tasks;
    IF ROW_COUNT() = 0 THEN
      ROLLBACK;
      {% call m::raise("QUOTA_EXCEEDED", "the application has reached its incomplete-task quota") %};
    END IF;
  END IF;
  COMMIT;

  SELECT v_replayed AS replayed, {% call m::task_columns("t") %}
    FROM orbit_task t
   WHERE t.id = v_task_id;
END
