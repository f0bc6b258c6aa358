-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_list.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_list: List tasks newest first (id descending), filtered, a page at a time.
--
-- Only tasks of queues the credential reaches: p_queue_id (which must pass the queue check), or
-- every queue of its queue scope. Filters combine with AND; NULL = no filter. concurrency_key
-- matches exact bytes ('' = tasks without a key). Keyset pagination: pass the last task_id of a
-- page as p_before_id for the next one; ids never change, so pages neither repeat nor skip rows.
-- Every candidate comes from an index range read newest first, at most p_limit rows each, in one
-- read-only snapshot; the ranges are merged keeping the newest p_limit (a range stops early at
-- the oldest id already kept):
--   business_key given    -> ix_task_business, per namespace in scope;
--   concurrency_key given -> the key's resource row, then ix_task_key, per namespace in scope;
--   otherwise             -> ix_task_list, per queue in scope and per state (p_state or all nine).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_queue_id (NULL = all in scope);
--   p_state (a task state; NULL = any); p_business_key (NULL = any); p_concurrency_key (exact
--   bytes; '' = no key; NULL = any); p_limit 1-1000; p_before_id (NULL = from the newest).
-- Result (0..p_limit rows, task_id descending): the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (p_queue_id), INVALID_ARGUMENT (p_state,
--   p_limit).
-- Locks: none (a consistent read).
DROP PROCEDURE IF EXISTS orbit_task_list;
DELIMITER $$
CREATE PROCEDURE orbit_task_list(
  IN p_token_hash BINARY(32),
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_state TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_limit BIGINT,
  IN p_before_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_before BIGINT UNSIGNED;
  DECLARE v_floor BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_ids LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_min BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_ns BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_next_ns BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_next_queue CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_s INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_queue_id IS NOT NULL THEN
    CALL orbit_auth_queue_check(p_token_hash, 'tasks:read', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  END IF;
  IF p_state IS NOT NULL AND p_state NOT IN ('WAITING', 'LEASED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED',
                                             'CANCELLED', 'NEEDS_REVIEW', 'EXPIRED') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: state must be a task state such as WAITING, RUNNING or SUCCEEDED';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;
  SET v_before = COALESCE(p_before_id, 18446744073709551615);

  SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION READ ONLY;
  IF p_business_key IS NOT NULL OR p_concurrency_key <> '' THEN
    namespaces: LOOP
      SET v_next_ns = NULL, v_resource_id = NULL;
      SELECT MIN(s.namespace_id) INTO v_next_ns
        FROM orbit_credential_scope s
       WHERE s.credential_id = v_credential_id AND s.namespace_id > v_ns
         AND (v_namespace_id IS NULL OR s.namespace_id = v_namespace_id);
      IF v_next_ns IS NULL THEN
        LEAVE namespaces;
      END IF;
      SET v_ns = v_next_ns;
      IF p_business_key IS NULL THEN
        SELECT r.id INTO v_resource_id
          FROM orbit_resource r
         WHERE r.namespace_id = v_ns AND r.concurrency_key = p_concurrency_key;
      END IF;
      IF p_business_key IS NOT NULL THEN
        SELECT COALESCE(JSON_ARRAYAGG(k.id), '[]'), MIN(k.id), COUNT(*) INTO v_ids, v_min, v_count
          FROM (SELECT u.id
                  FROM (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j
                        UNION ALL
                        (SELECT t.id
                           FROM orbit_task t
                          WHERE t.namespace_id = v_ns AND t.business_key = p_business_key
                            AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                        WHERE s.credential_id = v_credential_id AND s.namespace_id = t.namespace_id
                                          AND s.queue_id IN ('', t.queue_id))
                            AND t.id < v_before AND t.id > v_floor
                            AND (p_state IS NULL OR t.state = p_state)
                            AND (p_business_key IS NULL OR t.business_key = p_business_key)
                            AND (p_concurrency_key IS NULL OR t.concurrency_key = p_concurrency_key)
                            AND (p_queue_id IS NULL OR t.queue_id = p_queue_id)
                          ORDER BY t.id DESC
                          LIMIT p_limit)) u
                 ORDER BY u.id DESC
                 LIMIT p_limit) k;
        IF v_count = p_limit THEN
          SET v_floor = v_min;
        END IF;
      ELSEIF v_resource_id IS NOT NULL THEN
        SELECT COALESCE(JSON_ARRAYAGG(k.id), '[]'), MIN(k.id), COUNT(*) INTO v_ids, v_min, v_count
          FROM (SELECT u.id
                  FROM (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j
                        UNION ALL
                        (SELECT t.id
                           FROM orbit_task t
                          WHERE t.resource_id = v_resource_id
                            AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                        WHERE s.credential_id = v_credential_id AND s.namespace_id = t.namespace_id
                                          AND s.queue_id IN ('', t.queue_id))
                            AND t.id < v_before AND t.id > v_floor
                            AND (p_state IS NULL OR t.state = p_state)
                            AND (p_business_key IS NULL OR t.business_key = p_business_key)
                            AND (p_concurrency_key IS NULL OR t.concurrency_key = p_concurrency_key)
                            AND (p_queue_id IS NULL OR t.queue_id = p_queue_id)
                          ORDER BY t.id DESC
                          LIMIT p_limit)) u
                 ORDER BY u.id DESC
                 LIMIT p_limit) k;
        IF v_count = p_limit THEN
          SET v_floor = v_min;
        END IF;
      END IF;
    END LOOP namespaces;
  ELSE
    queues: LOOP
      SET v_next_queue = NULL;
      SELECT MIN(q.id) INTO v_next_queue
        FROM orbit_queue q
       WHERE q.application_id = v_application_id AND q.environment_id = v_environment_id AND q.id > v_queue_id
         AND (p_queue_id IS NULL OR q.id = p_queue_id)
         AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                WHERE s.credential_id = v_credential_id AND s.namespace_id = q.namespace_id
                  AND s.queue_id IN ('', q.id));
      IF v_next_queue IS NULL THEN
        LEAVE queues;
      END IF;
      SET v_queue_id = v_next_queue, v_s = 0;
      states: WHILE v_s < 9 DO
        SET v_s = v_s + 1;
        SET v_state = ELT(v_s, 'WAITING', 'LEASED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED', 'CANCELLED',
                          'NEEDS_REVIEW', 'EXPIRED');
        IF p_state IS NOT NULL AND p_state <> v_state THEN
          ITERATE states;
        END IF;
        SELECT COALESCE(JSON_ARRAYAGG(k.id), '[]'), MIN(k.id), COUNT(*) INTO v_ids, v_min, v_count
          FROM (SELECT u.id
                  FROM (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j
                        UNION ALL
                        (SELECT t.id
                           FROM orbit_task t
                          WHERE t.queue_id = v_queue_id AND t.state = v_state
                            AND t.id < v_before AND t.id > v_floor
                            AND (p_state IS NULL OR t.state = p_state)
                            AND (p_business_key IS NULL OR t.business_key = p_business_key)
                            AND (p_concurrency_key IS NULL OR t.concurrency_key = p_concurrency_key)
                            AND (p_queue_id IS NULL OR t.queue_id = p_queue_id)
                          ORDER BY t.id DESC
                          LIMIT p_limit)) u
                 ORDER BY u.id DESC
                 LIMIT p_limit) k;
        IF v_count = p_limit THEN
          SET v_floor = v_min;
        END IF;
      END WHILE states;
    END LOOP queues;
  END IF;
  SELECT t.id AS task_id, t.queue_id, t.namespace_id, t.state,
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
    FROM orbit_task t
   WHERE t.id IN (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j)
   ORDER BY t.id DESC;
  COMMIT;
END$$
DELIMITER ;
