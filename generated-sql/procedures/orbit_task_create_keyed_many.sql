-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_create_keyed_many.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_create_keyed_many: Internal: create a keyed batch's tasks whole, each as orbit_task_create would, in the caller's transaction.
--
-- orbit_task_submit_many's keyed batch on one queue whose namespace has no key policy, without
-- debounce: what orbit_task_create does for each task (every key of one holder, its tasks
-- queued) is done for the whole batch, set-based. The keys' rows are locked by one statement, in
-- key order; a key with no row yet gets one (holder limit 1), and a key's row that keeps the
-- limit of a policy that is gone is set back to 1. One plain read, exact under those locks,
-- finds the tasks that go to the ready lane: each free key's first task due now, as
-- m::keyed_lane decides it. One insert writes the tasks with the row macros orbit_task_create
-- uses (m::task_insert_values): ready, blocked behind their key, or scheduled until their run_at;
-- a task without a key is ready. The caller then writes the receipts, naming the new tasks
-- (ids from o_first on, in input order), and charges the quota.
-- Parameters: p_tasks (orbit_task_submit_many's, checked there); p_application_id;
--   p_namespace_id and p_queue_id (the batch's one queue); p_slot (the connection's quota slot,
--   recorded on each task); p_now.
-- Out: o_first, the id of the batch's first task (the others follow it in input order).
-- Result: none. Signals: none.
-- Session state: raises the connection's group_concat_max_len to 1 MB when it is lower (MySQL's
--   default is 1,024 bytes), for its list of ready tasks.
-- Locks, in order: the orbit_resource rows of the batch's keys, in key order (one locking read;
--   a missing one is locked by its insert, or by its ON DUPLICATE KEY UPDATE when a concurrent
--   submit inserted it first). Not waits: the new orbit_task rows.
DROP PROCEDURE IF EXISTS orbit_task_create_keyed_many;
DELIMITER $$
CREATE PROCEDURE orbit_task_create_keyed_many(
  IN p_tasks MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_application_id BIGINT UNSIGNED,
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  IN p_slot TINYINT UNSIGNED,
  IN p_now DATETIME(6),
  OUT o_first BIGINT UNSIGNED)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_count INT DEFAULT JSON_LENGTH(p_tasks);
  -- How many distinct keys the batch names, how many have a row, and how many of those keep
  -- another limit than 1.
  DECLARE v_keys INT;
  DECLARE v_key_rows INT;
  DECLARE v_stale_limits INT;
  DECLARE v_concurrency_key BLOB;
  -- The items of the keyed tasks that go to the ready lane (a comma-separated list).
  DECLARE v_ready_items MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin;
  -- The keys that have no row yet (a plain read).
  DECLARE c_new_keys CURSOR FOR
    SELECT k.concurrency_key
      FROM (SELECT DISTINCT CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192), IF(j.j_concurrency_key IS NULL, '', NULL)) AS BINARY) AS concurrency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (j_concurrency_key JSON PATH '$.concurrency_key',
              s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key')) j
      WHERE JSON_TYPE(j.j_concurrency_key) = 'STRING' AND j.s_concurrency_key <> ''
      ORDER BY 1
      LIMIT 1000) k
      LEFT JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = k.concurrency_key
     WHERE r.id IS NULL;
  -- The keys' rows, locked in key order; then the missing ones inserted, each locked by its
  -- insert (a concurrent submit may insert one first: ON DUPLICATE KEY UPDATE then takes its
  -- lock), with the holder limit 1.
  SELECT COUNT(*), COUNT(r.id), COALESCE(SUM(r.holder_limit <> 1), 0) INTO v_keys, v_key_rows, v_stale_limits
    FROM (SELECT DISTINCT CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192), IF(j.j_concurrency_key IS NULL, '', NULL)) AS BINARY) AS concurrency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (j_concurrency_key JSON PATH '$.concurrency_key',
              s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key')) j
      WHERE JSON_TYPE(j.j_concurrency_key) = 'STRING' AND j.s_concurrency_key <> ''
      ORDER BY 1
      LIMIT 1000) k
    LEFT JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = k.concurrency_key
     FOR UPDATE;
  IF v_key_rows < v_keys THEN
    -- One insert a key, as orbit_task_create inserts it: an INSERT ... SELECT would hold
    -- orbit_resource's AUTO-INC lock while it waits for a key's row another batch holds, and
    -- that batch, inserting its own new keys, would wait for the AUTO-INC lock (a deadlock
    -- that MariaDB reports as error 1467, not 1213).
    OPEN c_new_keys;
    new_keys: LOOP
      SET v_concurrency_key = NULL;
      fetch_key: BEGIN
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_concurrency_key = NULL;
        FETCH c_new_keys INTO v_concurrency_key;
      END fetch_key;
      IF v_concurrency_key IS NULL THEN
        LEAVE new_keys;
      END IF;
      INSERT INTO orbit_resource (namespace_id, concurrency_key, highest_token, version, created_at, updated_at)
      VALUES (p_namespace_id, v_concurrency_key, 0, 0, p_now, p_now)
      ON DUPLICATE KEY UPDATE version = version;
    END LOOP new_keys;
    CLOSE c_new_keys;
  END IF;
  -- No policy: every key has one holder (a key's row keeps the limit of the policy it last
  -- read, which may be gone).
  IF v_stale_limits > 0 THEN
    UPDATE orbit_resource r
       SET r.holder_limit = 1
     WHERE r.namespace_id = p_namespace_id AND r.holder_limit <> 1
       AND r.concurrency_key IN (SELECT k.concurrency_key FROM (SELECT DISTINCT CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192), IF(j.j_concurrency_key IS NULL, '', NULL)) AS BINARY) AS concurrency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (j_concurrency_key JSON PATH '$.concurrency_key',
              s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key')) j
      WHERE JSON_TYPE(j.j_concurrency_key) = 'STRING' AND j.s_concurrency_key <> ''
      ORDER BY 1
      LIMIT 1000) k);
  END IF;
  -- The tasks that go to the ready lane: each key's first task due now, when the key has
  -- room and no ready task in the queue yet (m::keyed_lane; plain reads, exact under the
  -- rows' locks), as a list of items: the insert below then reads no orbit_task row (which
  -- would make it buffer its rows first) and joins no grouped table. The key's other tasks
  -- go to the blocked lane.
  IF @@SESSION.group_concat_max_len < 1048576 THEN
    SET SESSION group_concat_max_len = 1048576;
  END IF;
  SELECT GROUP_CONCAT(f.first_item) INTO v_ready_items
    FROM (SELECT t.concurrency_key, MIN(t.item) AS first_item
            FROM (SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          IF(JSON_TYPE(j.j_idempotency_key) = 'STRING', LEFT(CAST(j.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          IF(JSON_TYPE(j.j_handler) = 'STRING', LEFT(j.s_handler, 192), IF(j.j_handler IS NULL, NULL, NULL)) AS handler,
          IF(JSON_TYPE(j.j_handler_version) = 'STRING', LEFT(j.s_handler_version, 65), IF(j.j_handler_version IS NULL, NULL, NULL)) AS handler_version,
          IF(JSON_TYPE(j.j_payload_version) = 'STRING', LEFT(j.s_payload_version, 65), IF(j.j_payload_version IS NULL, NULL, NULL)) AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE(IF(JSON_TYPE(j.j_business_key) = 'STRING', LEFT(j.s_business_key, 192), IF(j.j_business_key IS NULL, NULL, NULL)), '') AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE(CASE WHEN j.j_priority REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_priority AS SIGNED)
                                    WHEN j.j_priority REGEXP '^-?[0-9]+$' THEN -1 END, 5) AS priority,
          COALESCE(CASE WHEN j.j_max_attempts REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_max_attempts AS SIGNED)
                                    WHEN j.j_max_attempts REGEXP '^-?[0-9]+$' THEN -1 END, 3) AS max_attempts,
          COALESCE(CASE WHEN j.j_retry_base_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_base_ms AS SIGNED)
                                    WHEN j.j_retry_base_ms REGEXP '^-?[0-9]+$' THEN -1 END, 1000) AS retry_base_ms,
          COALESCE(CASE WHEN j.j_retry_max_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_max_ms AS SIGNED)
                                    WHEN j.j_retry_max_ms REGEXP '^-?[0-9]+$' THEN -1 END, 300000) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   0) AS retry_unknown,
          COALESCE(CASE WHEN j.j_deadline_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_deadline_seconds AS SIGNED)
                                    WHEN j.j_deadline_seconds REGEXP '^-?[0-9]+$' THEN -1 END, 0) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          CASE WHEN j.j_delay_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_delay_seconds AS SIGNED)
                                    WHEN j.j_delay_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS delay_seconds,
          CASE WHEN j.j_debounce_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_seconds AS SIGNED)
                                    WHEN j.j_debounce_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_seconds,
          CASE WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_max_seconds AS SIGNED)
                                    WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key', s_queue_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.queue_id',
            s_handler LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler', s_handler_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler_version',
            s_payload_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload_version', s_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
            s_business_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.business_key', s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key',
            s_run_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.run_at',
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t
           WHERE t.concurrency_key <> '' AND CASE WHEN t.run_at IS NOT NULL THEN GREATEST(t.run_at, p_now)
            WHEN t.delay_seconds > 0 THEN DATE_ADD(p_now, INTERVAL t.delay_seconds SECOND)
            ELSE p_now END <= p_now
           GROUP BY t.concurrency_key) f
    STRAIGHT_JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = f.concurrency_key
   WHERE IF((r.holders >= r.holder_limit OR COALESCE(r.rate_wake_at > p_now, 0))
              OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                          WHERE h.resource_id = r.id AND h.lane = 'ready' AND h.queue_id = p_queue_id),
              'blocked', 'ready') = 'ready';
  INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                          payload, business_key, concurrency_key, resource_id, state, lane, priority,
                          max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
                          deadline_at, idempotency_key, plan_id, plan_version, quota_slot, created_at, updated_at,
                          debounce_seconds, debounce_until)
  SELECT p_application_id, q.namespace_id, q.id, t.handler, t.handler_version, t.payload_version,
         t.payload, t.business_key, t.concurrency_key, COALESCE(r.id, 0), 'WAITING', CASE WHEN t.effective_run_at > p_now THEN 'scheduled' WHEN r.id IS NULL OR FIND_IN_SET(t.item, v_ready_items) THEN 'ready' ELSE 'blocked' END, t.priority,
         t.max_attempts, 0, t.retry_base_ms, t.retry_max_ms, t.retry_unknown, t.effective_run_at,
         IF(t.deadline_seconds > 0, DATE_ADD(p_now, INTERVAL t.deadline_seconds SECOND), NULL),
         t.idempotency_key, 0, 0, p_slot, p_now, p_now,
         0, NULL
    FROM (SELECT t.*, CASE WHEN t.run_at IS NOT NULL THEN GREATEST(t.run_at, p_now)
            WHEN t.delay_seconds > 0 THEN DATE_ADD(p_now, INTERVAL t.delay_seconds SECOND)
            ELSE p_now END AS effective_run_at FROM (SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          IF(JSON_TYPE(j.j_idempotency_key) = 'STRING', LEFT(CAST(j.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          IF(JSON_TYPE(j.j_handler) = 'STRING', LEFT(j.s_handler, 192), IF(j.j_handler IS NULL, NULL, NULL)) AS handler,
          IF(JSON_TYPE(j.j_handler_version) = 'STRING', LEFT(j.s_handler_version, 65), IF(j.j_handler_version IS NULL, NULL, NULL)) AS handler_version,
          IF(JSON_TYPE(j.j_payload_version) = 'STRING', LEFT(j.s_payload_version, 65), IF(j.j_payload_version IS NULL, NULL, NULL)) AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE(IF(JSON_TYPE(j.j_business_key) = 'STRING', LEFT(j.s_business_key, 192), IF(j.j_business_key IS NULL, NULL, NULL)), '') AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE(CASE WHEN j.j_priority REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_priority AS SIGNED)
                                    WHEN j.j_priority REGEXP '^-?[0-9]+$' THEN -1 END, 5) AS priority,
          COALESCE(CASE WHEN j.j_max_attempts REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_max_attempts AS SIGNED)
                                    WHEN j.j_max_attempts REGEXP '^-?[0-9]+$' THEN -1 END, 3) AS max_attempts,
          COALESCE(CASE WHEN j.j_retry_base_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_base_ms AS SIGNED)
                                    WHEN j.j_retry_base_ms REGEXP '^-?[0-9]+$' THEN -1 END, 1000) AS retry_base_ms,
          COALESCE(CASE WHEN j.j_retry_max_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_max_ms AS SIGNED)
                                    WHEN j.j_retry_max_ms REGEXP '^-?[0-9]+$' THEN -1 END, 300000) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   0) AS retry_unknown,
          COALESCE(CASE WHEN j.j_deadline_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_deadline_seconds AS SIGNED)
                                    WHEN j.j_deadline_seconds REGEXP '^-?[0-9]+$' THEN -1 END, 0) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          CASE WHEN j.j_delay_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_delay_seconds AS SIGNED)
                                    WHEN j.j_delay_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS delay_seconds,
          CASE WHEN j.j_debounce_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_seconds AS SIGNED)
                                    WHEN j.j_debounce_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_seconds,
          CASE WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_max_seconds AS SIGNED)
                                    WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key', s_queue_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.queue_id',
            s_handler LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler', s_handler_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler_version',
            s_payload_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload_version', s_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
            s_business_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.business_key', s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key',
            s_run_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.run_at',
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t) t
    JOIN orbit_queue q ON q.id = t.queue_id
    LEFT JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = t.concurrency_key
                              AND t.concurrency_key <> ''
   ORDER BY t.item;
  SET o_first = LAST_INSERT_ID();
END$$
DELIMITER ;
