{% import "_macros.sql" as m %}
{#- Whether member j is missing, null, or of JSON type `t`. -#}
{% macro typed(j, t) %}{{ j }} IS NULL OR JSON_TYPE({{ j }}) IN ('NULL', '{{ t }}'){% endmacro %}
{#- Whether integer member j is missing, null, or plain digits. -#}
{% macro integer(j) %}{{ j }} IS NULL OR JSON_TYPE({{ j }}) = 'NULL' OR {{ j }} REGEXP '^-?[0-9]+$'{% endmacro %}
-- orbit_task_submit_many: Accept many tasks in one transaction, each once per its own Idempotency-Key.
--
-- All or nothing: every task is read, authorised and validated before anything is written, then
-- one transaction gives each task, in input order, exactly what orbit_task_submit gives it: the
-- same key with the same request (hashed exactly as orbit_task_submit hashes it, so a single
-- submit and a batch task replay each other) returns the original task, replayed = 1; with any
-- other field it is an IDEMPOTENCY_CONFLICT, which fails the whole call. A key used twice in one
-- call: the second task replays the first, or conflicts with it. The scope tasks:submit is
-- checked on each task's queue, once per queue. Set-based where it can be: the fields of the
-- whole batch are checked by one statement; when no task of it names a concurrency key, its
-- tasks are created by one insert (the rows orbit_task_create writes for an unkeyed task,
-- m::task_insert_values), and a keyed batch on one queue whose namespace has no key policy,
-- without debounce, is created whole too, each task placed as orbit_task_create places it
-- (orbit_task_create_keyed_many). Either way the receipts follow in one more insert, each
-- written once with its task; when an Idempotency-Key of the batch exists or repeats, that
-- insert fails, the batch is undone, and each task is created by orbit_task_create and its
-- receipt written after it, as orbit_task_submit does. Keyed tasks behind a held key
-- (including one taken by an earlier task of the same call) wait, as with single submits. A
-- full incomplete-task quota (QUOTA_EXCEEDED) fails the whole call. One durable commit and one
-- round trip for up to 1000 tasks.
-- Parameters:
--   p_token_hash BINARY(32)   SHA-256 of the bearer token (scope tasks:submit on every queue)
--   p_tasks                   a JSON array of 1-1000 task objects, each with the members
--     idempotency_key         string, 1-255 bytes
--     queue_id                string, CHAR(32)
--     handler, handler_version, payload_version, business_key, concurrency_key: strings, and
--     priority, max_attempts, retry_base_ms, retry_max_ms, deadline_seconds: integers, and
--     retry_unknown: true/false, delay_seconds, debounce_seconds, debounce_max_seconds:
--     integers, with the rules and defaults of the p_ parameters below;
--     run_at                  a string, the UTC time 'YYYY-MM-DD HH:MM:SS[.ffffff]' (p_run_at);
--     payload                 a string holding the payload's JSON text (e.g. "{\"n\":1}"): the
--                             text is stored and hashed byte for byte, as orbit_task_submit does
--                             with p_payload (the server's JSON functions would reformat a value)
--   A missing member or JSON null takes the default; a missing concurrency_key is '' (none), a
--   null one is invalid (as in orbit_task_submit); no other member is allowed.
{% call m::task_definition_doc() %}
{% call m::task_timing_doc() %}
-- Result: one row per task, in input order: item INT (0-based index in p_tasks), replayed TINYINT
--   (0 = created now, 1 = the original), then the task columns:
{% call m::task_columns_doc() %}
--   then cancelled_attempt_id, cancelled_session_id (see orbit_task_submit).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope, or a queue outside the queue scope),
--   NOT_FOUND (queue), INVALID_ARGUMENT (p_tasks itself, or a task's field), IDEMPOTENCY_CONFLICT,
--   QUOTA_EXCEEDED (incomplete tasks), KEY_BUSY (a task's key policy rejects it: see
--   orbit_task_submit). A task's error starts with its index: "tasks[3]: handler
--   must be 1-191 characters".
-- Session state: creates the temporary table orbit_submit_outcome (so the definer needs
--   CREATE TEMPORARY TABLES) on the connection's first call, with a note (1050: it exists) on
--   later calls; it holds no row between calls, and goes with the connection. A keyed batch
--   created whole raises the connection's group_concat_max_len to 1 MB when it is lower (MySQL's
--   default is 1,024 bytes), for its list of ready tasks.
-- Locks, in order: the orbit_resource rows of the batch's keys: all at once, in key order (a
--   keyed batch created whole, as orbit_task_create_keyed_many), or per task in input order,
--   through orbit_task_create (insert or FOR UPDATE); a batch without concurrency keys takes the
--   AUTO-INC lock of orbit_task for one statement instead. Then the batch's orbit_idempotency
--   rows: one insert, which waits for a concurrent first submit of a key; when a key exists or
--   repeats, each task takes its receipt after its own key's row, in input order (insert, or FOR
--   UPDATE on a replay or a refused task). Then, once for the batch, the connection's
--   orbit_application_quota slot row (or, when it cannot take the batch, as orbit_task_charge per
--   new task). Two calls that share keys in different orders can deadlock, and so can a batch
--   created task by task (a receipt, then the next task's key row; or, under a key policy that
--   replaces or cancels, its give-backs of quota charges before the task's receipt, see
--   orbit_task_submit); the loser is rolled back whole and retried by the caller.
CREATE PROCEDURE orbit_task_submit_many(
  IN p_token_hash BINARY(32),
  IN p_tasks MEDIUMTEXT {{ c.utf8 }})
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_i INT DEFAULT 0;
  -- The first task that breaks a field rule (v_count + 1 when none), and the rule's message.
  DECLARE v_bad_item INT;
  DECLARE v_bad VARCHAR(132) {{ c.utf8 }};
  -- The batch's least and greatest queue id (equal: one queue).
  DECLARE v_queue_least VARBINARY(255);
  DECLARE v_queue_greatest VARBINARY(255);
  DECLARE v_message VARCHAR(255) {{ c.utf8 }};
  DECLARE v_idempotency_key BLOB;
  DECLARE v_queue_id TEXT {{ c.ascii }};
  DECLARE v_last_queue TEXT {{ c.ascii }} DEFAULT NULL;
  DECLARE v_handler TEXT {{ c.utf8 }};
  DECLARE v_handler_version TEXT {{ c.utf8 }};
  DECLARE v_payload_version TEXT {{ c.utf8 }};
  DECLARE v_payload MEDIUMTEXT {{ c.utf8 }};
  DECLARE v_business_key TEXT {{ c.utf8 }};
  DECLARE v_concurrency_key BLOB;
  DECLARE v_priority INT;
  DECLARE v_max_attempts INT;
  DECLARE v_retry_base_ms BIGINT;
  DECLARE v_retry_max_ms BIGINT;
  DECLARE v_retry_unknown TINYINT;
  DECLARE v_deadline_seconds BIGINT;
  DECLARE v_run_at DATETIME(6);
  DECLARE v_debounce_seconds BIGINT;
  DECLARE v_debounce_max_seconds BIGINT;
  DECLARE v_replaced BIGINT UNSIGNED;
  DECLARE v_refusal VARCHAR(32) {{ c.ascii }};
  DECLARE v_cancelled BIGINT UNSIGNED;
  DECLARE v_hash BINARY(32);
  DECLARE v_existing_hash BINARY(32);
  DECLARE v_task_id BIGINT UNSIGNED;
  -- The first id of the batch insert, and how many tasks of the batch name a concurrency key.
  DECLARE v_first BIGINT UNSIGNED;
  DECLARE v_keyed INT;
  -- How many of the batch's tasks are debounced; whether the batch's namespace has key policies.
  DECLARE v_debounced INT;
  DECLARE v_policies TINYINT;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  -- 1 when the batch was created whole, its receipts included.
  DECLARE v_batched TINYINT;
  -- 1 when some Idempotency-Key of the batch has a receipt already (the batch was sent before,
  -- most often): each task then looks for its receipt before it is created.
  DECLARE v_resent TINYINT;
  DECLARE v_replayed TINYINT;
  DECLARE v_created INT DEFAULT 0;
  DECLARE v_charged TINYINT;
  DECLARE v_slot TINYINT UNSIGNED DEFAULT {% call m::quota_slot() %};
  DECLARE v_item INT;
  -- 1 once a row of orbit_submit_outcome is written.
  DECLARE v_noted TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  -- The queues of the tasks before the first bad one, each once, in order of first use (read to
  -- its end by a FETCH with its own NOT FOUND handler, scoped to the FETCH alone: a handler over
  -- the loop would also catch an empty SELECT ... INTO in a nested call). The tasks' loop runs
  -- p_tasks' length, so its FETCH never runs past the end.
  DECLARE c_queues CURSOR FOR
    SELECT MIN(t.queue_id), MIN(t.item)
      FROM {% call m::batch_tasks() %}
     WHERE t.item < v_bad_item
     GROUP BY CAST(t.queue_id AS BINARY)
     ORDER BY MIN(t.item);
  -- The tasks whose creation the quota counts, in input order: every task but a replay and a
  -- task that took the charge of the task it replaced (those have an orbit_submit_outcome row).
  DECLARE c_charged CURSOR FOR
    SELECT b.item
      FROM {% call m::batch_keys("$[*]") %}
      LEFT JOIN orbit_submit_outcome x ON x.item = b.item
     WHERE x.item IS NULL OR (x.replayed = 0 AND x.replaced = 0)
     ORDER BY b.item;
  DECLARE c_tasks CURSOR FOR
    SELECT t.idempotency_key, t.queue_id, t.handler, t.handler_version, t.payload_version, t.payload,
           t.business_key, t.concurrency_key, t.priority, t.max_attempts, t.retry_base_ms, t.retry_max_ms,
           t.retry_unknown, t.deadline_seconds, {% call m::task_run_at("t.", "v_now") %},
           COALESCE(t.debounce_seconds, 0), COALESCE(t.debounce_max_seconds, 0), {% call m::request_hash("t.") %}
      FROM {% call m::batch_tasks() %}
     ORDER BY t.item;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  {% call m::rollback_on_error() %};

  -- The token and the scope first, as for a single submit; queues are checked below.
  CALL orbit_auth_check(p_token_hash, 'tasks:submit', v_application_id, v_environment_id, v_credential_id);
  IF p_tasks IS NULL OR NOT JSON_VALID(p_tasks) THEN
    {% call m::raise("INVALID_ARGUMENT", "tasks must be a JSON array of 1-1000 tasks") %};
  END IF;
  SET v_count = IF(JSON_TYPE(p_tasks) = 'ARRAY', JSON_LENGTH(p_tasks), 0);
  IF v_count NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "tasks must be a JSON array of 1-1000 tasks") %};
  END IF;

  -- Checks, nothing written, reported in input order as a task-by-task check would: the first
  -- task whose fields break a rule, then the queue of each task before it (once per queue); a
  -- queue refused before that task is the error, else its rule. One statement over the whole
  -- batch finds the first bad task (its item, 4 digits, before its message: the least such
  -- string is the first), and also counts the keyed tasks and the least and greatest queue.
  SELECT MIN(IF(b.bad IS NULL, NULL, CONCAT(LPAD(b.item, 4, '0'), b.bad))), SUM(b.concurrency_key <> ''),
         COALESCE(SUM(b.debounce_seconds > 0), 0), MIN(CAST(b.queue_id AS BINARY)), MAX(CAST(b.queue_id AS BINARY))
    INTO v_bad, v_keyed, v_debounced, v_queue_least, v_queue_greatest
    FROM (SELECT t.item, t.queue_id, t.concurrency_key, t.debounce_seconds,
                 CASE
                   WHEN JSON_TYPE(t.task) <> 'OBJECT' THEN 'a task must be a JSON object'
                   WHEN NOT COALESCE(LENGTH(t.idempotency_key) BETWEEN 1 AND 255, 0)
                     THEN 'idempotency_key must be a string of 1-255 bytes'
                   WHEN COALESCE(JSON_TYPE(t.j_queue_id), '') <> 'STRING' THEN 'queue_id must be a string'
                   WHEN NOT ({% call typed("t.j_handler", "STRING") %}) THEN 'handler must be a string'
                   WHEN NOT ({% call typed("t.j_handler_version", "STRING") %}) THEN 'handler_version must be a string'
                   WHEN NOT ({% call typed("t.j_payload_version", "STRING") %}) THEN 'payload_version must be a string'
                   WHEN NOT ({% call typed("t.j_payload", "STRING") %}) THEN 'payload must be a string holding the JSON text'
                   WHEN NOT ({% call typed("t.j_business_key", "STRING") %}) THEN 'business_key must be a string'
                   WHEN NOT ({% call typed("t.j_concurrency_key", "STRING") %}) THEN 'concurrency_key must be a string'
                   WHEN NOT ({% call integer("t.j_priority") %}) THEN 'priority must be an integer'
                   WHEN NOT ({% call integer("t.j_max_attempts") %}) THEN 'max_attempts must be an integer'
                   WHEN NOT ({% call integer("t.j_retry_base_ms") %}) THEN 'retry_base_ms must be an integer'
                   WHEN NOT ({% call integer("t.j_retry_max_ms") %}) THEN 'retry_max_ms must be an integer'
                   WHEN NOT ({% call typed("t.j_retry_unknown", "BOOLEAN") %}) THEN 'retry_unknown must be true or false'
                   WHEN NOT ({% call integer("t.j_deadline_seconds") %}) THEN 'deadline_seconds must be an integer'
                   WHEN NOT ({% call typed("t.j_run_at", "STRING") %}) OR (t.j_run_at IS NOT NULL AND JSON_TYPE(t.j_run_at) = 'STRING' AND t.run_at IS NULL)
                     THEN 'run_at must be a UTC time, a string YYYY-MM-DD HH:MM:SS[.ffffff]'
                   WHEN NOT ({% call integer("t.j_delay_seconds") %}) THEN 'delay_seconds must be an integer'
                   WHEN NOT ({% call integer("t.j_debounce_seconds") %}) THEN 'debounce_seconds must be an integer'
                   WHEN NOT ({% call integer("t.j_debounce_max_seconds") %}) THEN 'debounce_max_seconds must be an integer'
                   -- What is left once every field is removed (a member that is null counts too:
                   -- MySQL's JSON_TABLE reads it as SQL NULL, as it reads a missing one).
                   WHEN JSON_LENGTH(JSON_REMOVE(t.task, '$.idempotency_key', '$.queue_id', '$.handler',
                          '$.handler_version', '$.payload_version', '$.payload', '$.business_key',
                          '$.concurrency_key', '$.priority', '$.max_attempts', '$.retry_base_ms', '$.retry_max_ms',
                          '$.retry_unknown', '$.deadline_seconds', '$.run_at', '$.delay_seconds',
                          '$.debounce_seconds', '$.debounce_max_seconds')) > 0
                     THEN 'the task has a member that is not a field of a submit'
                   ELSE COALESCE({% call m::task_definition_error("t.") %}, {% call m::task_timing_error("t.", "v_now") %})
                 END AS bad
            FROM {% call m::batch_tasks() %}) b;
  SET v_bad_item = COALESCE(CAST(LEFT(v_bad, 4) AS UNSIGNED), v_count + 1), v_bad = SUBSTRING(v_bad, 5);
  queues: BEGIN
    DECLARE EXIT HANDLER FOR SQLSTATE '45000'
    BEGIN
      GET DIAGNOSTICS CONDITION 1 v_message = MESSAGE_TEXT;
      SET v_message = LEFT(CONCAT(SUBSTRING_INDEX(v_message, ': ', 1), ': tasks[', v_i - 1, ']: ',
                                  SUBSTRING(v_message, LOCATE(': ', v_message) + 2)), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
    END;
    -- The usual batch, all valid on one queue, needs no list of its queues.
    IF v_bad IS NULL AND v_queue_least = v_queue_greatest THEN
      SET v_i = 1, v_queue_id = v_queue_least;
      CALL orbit_auth_queue_check(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_namespace_id,
                                  v_credential_id);
      SET v_last_queue = v_queue_id;
      LEAVE queues;
    END IF;
    OPEN c_queues;
    each_queue: LOOP
      SET v_queue_id = NULL;
      fetch_queue: BEGIN
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_queue_id = NULL;
        FETCH c_queues INTO v_queue_id, v_i;
      END fetch_queue;
      IF v_queue_id IS NULL THEN
        LEAVE each_queue;
      END IF;
      CALL orbit_auth_queue_check(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_namespace_id,
                                  v_credential_id);
      SET v_last_queue = v_queue_id;
    END LOOP each_queue;
    CLOSE c_queues;
  END queues;
  IF v_bad IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: tasks[', v_bad_item - 1, ']: ', v_bad);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;

  -- What the result cannot read from the rows: which tasks were replays, took the charge of a
  -- task they replaced, or cancelled a key holder. Rare, so most calls write no row of it. A
  -- table, not a variable: it is read by joins. Created once per connection and kept empty
  -- between calls: its rows are written in this call's transaction (InnoDB: a call that fails
  -- rolls them back) and deleted after the result (re-creating it on every call made every
  -- statement that names it be prepared again). Its comments double no quote: MySQL lists this
  -- body with such a quote undoubled, which `orbit migrate verify` would report as a change.
  CREATE TEMPORARY TABLE IF NOT EXISTS orbit_submit_outcome (
    item INT NOT NULL COMMENT 'the position of the task in p_tasks, from 1',
    replayed TINYINT NOT NULL COMMENT '1 = the receipt of its key existed: the original task is returned',
    replaced TINYINT NOT NULL COMMENT '1 = it took the quota charge of the task it replaced',
    cancelled BIGINT UNSIGNED NOT NULL COMMENT 'the attempt of the key holder that a cancel_running policy ended for it; 0 = none',
    PRIMARY KEY (item)
  ) ENGINE=InnoDB COMMENT='the tasks of orbit_task_submit_many whose outcome the rows do not show';

  {% call m::begin() %};
  SET v_i = 0, v_batched = 0;
  -- A batch sent again (a client's retry) has a receipt for its first task: it is not created
  -- whole only to be undone, but goes task by task, each replayed without being created. One
  -- probe a call.
  SELECT MAX(b.idempotency_key) INTO v_idempotency_key FROM {% call m::batch_keys("$[0]") %};
  {% call m::receipt_count("v_resent", "v_idempotency_key", false, "  ") %};
  -- A keyed batch on one queue whose namespace has no key policy, without debounce, can be
  -- created whole (orbit_task_create_keyed_many; v_policies stays NULL otherwise).
  IF v_keyed > 0 AND v_debounced = 0 AND v_queue_least = v_queue_greatest THEN
    SELECT COUNT(*) INTO v_policies FROM orbit_key_policy p WHERE p.namespace_id = v_namespace_id;
  END IF;
  IF NOT v_resent AND (v_keyed = 0 OR v_policies = 0) THEN
    SAVEPOINT orbit_submit_batch;
    IF v_keyed = 0 THEN
      -- No concurrency key: every task waits for nothing but its run_at, so the batch is created
      -- by one insert of the rows orbit_task_create writes for an unkeyed task
      -- (m::task_insert_values: lane 'ready', or 'scheduled' until a run_at ahead; the
      -- connection's quota slot; no debounce, which needs a key); ORDER BY numbers the tasks in
      -- input order. Under innodb_autoinc_lock_mode 1 the insert holds the table's AUTO-INC lock
      -- for the statement; it still costs less mariadbd CPU a task than an INSERT ... VALUES a
      -- task, which does not (BENCHMARKS.md).
      INSERT INTO orbit_task {% call m::task_insert_columns("                              ") %}
      SELECT {% call m::task_insert_values("v_application_id", "q.namespace_id", "q.id", "t.", "''", "0", "IF(t.effective_run_at > v_now, 'scheduled', 'ready')", "t.effective_run_at", "t.idempotency_key", "0", "0", "v_slot", "v_now", "0", "NULL", "             ") %}
        FROM (SELECT t.*, {% call m::task_run_at("t.", "v_now") %} AS effective_run_at FROM {% call m::batch_tasks() %}) t
        JOIN orbit_queue q ON q.id = t.queue_id
       ORDER BY t.item;
      SET v_first = LAST_INSERT_ID();
    ELSE
      -- What orbit_task_create does for each task (every key of one holder, its tasks queued),
      -- done for the whole batch, set-based, its keys' rows locked first.
      CALL orbit_task_create_keyed_many(p_tasks, v_application_id, v_namespace_id, v_last_queue, v_slot, v_now,
                                        v_first);
    END IF;
    -- Then every receipt at once, each written once, with its task: the new rows (ids from
    -- v_first on) are read first, each probing the batch's keys. A consistent read: INSERT ...
    -- SELECT in READ COMMITTED locks no row it reads, where an UPDATE joined to the new rows
    -- would wait for every concurrent submit's new rows past v_first. A task's key is unique to
    -- its application, so only this call's tasks carry these keys (a task whose receipt was
    -- purged with it is older), and the read stops at the batch's last task (LIMIT), before
    -- concurrent submits' later rows. The insert waits for a concurrent first submit of any key,
    -- and fails whole when one exists or repeats in the batch: then the batch is undone (its
    -- keys' rows stay locked) and each task takes the single submit's path below.
    INSERT INTO orbit_idempotency (application_id, idempotency_key, request_hash, task_id, created_at)
    SELECT v_application_id, b.idempotency_key, b.request_hash, o.id, v_now
      FROM orbit_task o
      STRAIGHT_JOIN (SELECT t.idempotency_key, {% call m::request_hash("t.") %} AS request_hash
                       FROM {% call m::batch_tasks() %}
                      LIMIT 1000) b ON b.idempotency_key = o.idempotency_key
     WHERE o.id >= v_first AND o.application_id = v_application_id
     ORDER BY o.id
     LIMIT v_count;
    IF v_duplicate THEN
      ROLLBACK TO SAVEPOINT orbit_submit_batch;
      SET v_resent = 1;
    ELSE
      SET v_batched = 1, v_created = v_count;
    END IF;
  END IF;
  IF NOT v_batched THEN
    OPEN c_tasks;
    WHILE v_i < v_count DO
      FETCH c_tasks INTO v_idempotency_key, v_queue_id, v_handler, v_handler_version, v_payload_version, v_payload,
                         v_business_key, v_concurrency_key, v_priority, v_max_attempts, v_retry_base_ms,
                         v_retry_max_ms, v_retry_unknown, v_deadline_seconds, v_run_at, v_debounce_seconds,
                         v_debounce_max_seconds, v_hash;
      SET v_i = v_i + 1, v_duplicate = 0, v_replayed = 0, v_replaced = 0, v_cancelled = 0;
      -- The queue was authorised above; a change of queue looks up its namespace (v_last_queue and
      -- v_namespace_id still hold the last queue checked).
      IF v_queue_id <> v_last_queue THEN
        SELECT q.namespace_id, q.id INTO v_namespace_id, v_last_queue
          FROM orbit_queue q
         WHERE q.id = v_queue_id;
      END IF;
      -- As orbit_task_submit: the task first, then its receipt, written once; a receipt found
      -- taken undoes the task, and the same request is a replay. In a batch sent again, a
      -- receipt that exists is read first, and its task is not created (a plain read: a
      -- concurrent first submit's receipt is met by the insert).
      IF v_resent THEN
        {% call m::receipt_count("v_duplicate", "v_idempotency_key", false, "        ") %};
      END IF;
      IF NOT v_duplicate THEN
        SAVEPOINT orbit_submit_task;
        CALL orbit_task_create(v_application_id, v_namespace_id, v_queue_id, v_handler, v_handler_version,
                               v_payload_version, v_payload, v_business_key, v_concurrency_key, v_priority,
                               v_max_attempts, v_retry_base_ms, v_retry_max_ms, v_retry_unknown,
                               v_deadline_seconds, v_run_at, v_debounce_seconds, v_debounce_max_seconds,
                               v_idempotency_key, 0 /* p_plan_id */, 0 /* p_plan_version */, v_now,
                               0 /* p_charge */, v_task_id, v_replaced, v_refusal, v_cancelled);
        {% call m::receipt_insert("v_idempotency_key", "v_hash", "        ") %};
        IF v_refusal = 'KEY_BUSY' AND NOT v_duplicate THEN
          ROLLBACK;
          SET v_message = CONCAT('KEY_BUSY: tasks[', v_i - 1,
                                 ']: the concurrency_key is held or has waiting tasks, and its key policy rejects new tasks');
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
        END IF;
        IF v_duplicate THEN
          ROLLBACK TO SAVEPOINT orbit_submit_task;
          SET v_replaced = 0, v_cancelled = 0;
        END IF;
      END IF;
      IF v_duplicate THEN
        {% call m::receipt_read("v_idempotency_key", "        ") %};
        IF v_existing_hash <> v_hash THEN
          ROLLBACK;
          SET v_message = CONCAT('IDEMPOTENCY_CONFLICT: tasks[', v_i - 1,
                                 ']: this idempotency_key was used with a different request');
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
        END IF;
        SET v_replayed = 1;
      ELSE
        SET v_created = v_created + (v_replaced = 0);
      END IF;
      IF v_replayed OR v_replaced <> 0 OR v_cancelled <> 0 THEN
        SET v_noted = 1;
        INSERT INTO orbit_submit_outcome (item, replayed, replaced, cancelled)
        VALUES (v_i, v_replayed, v_replaced <> 0, IF(v_replayed, 0, v_cancelled));
      END IF;
    END WHILE;
    CLOSE c_tasks;
  END IF;
  -- The incomplete-task quota, last and once: the whole batch on the connection's slot when it
  -- fits that slot's share; otherwise each new task exactly, in input order (orbit_task_charge),
  -- and the first that does not fit fails the call.
  IF v_created > 0 THEN
    {% call m::quota_charge_slot("v_application_id", "v_slot", "incomplete_tasks", "max_incomplete_tasks", "v_created", "v_now") %};
    IF ROW_COUNT() = 0 THEN
      SET v_i = 0;
      OPEN c_charged;
      WHILE v_i < v_created DO
        FETCH c_charged INTO v_item;
        SET v_i = v_i + 1;
        CALL orbit_task_charge(v_application_id, v_now, v_charged);
        IF NOT v_charged THEN
          ROLLBACK;
          SET v_message = CONCAT('QUOTA_EXCEEDED: tasks[', v_item - 1,
                                 ']: the application has reached its incomplete-task quota');
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
        END IF;
      END WHILE;
      CLOSE c_charged;
    END IF;
  END IF;
  COMMIT;

  -- Each task through its key's receipt (a receipt lives as long as its task: orbit_task_purge),
  -- the batch first (STRAIGHT_JOIN: never the application's receipts).
  SELECT CAST(b.item - 1 AS SIGNED) AS item, CAST(COALESCE(x.replayed, 0) AS SIGNED) AS replayed,
         {% call m::task_columns("t") %},
         CAST(COALESCE(x.cancelled, 0) AS UNSIGNED) AS cancelled_attempt_id,
         CAST(COALESCE(c.session_id, 0) AS UNSIGNED) AS cancelled_session_id
    FROM {% call m::batch_keys("$[*]") %}
    STRAIGHT_JOIN orbit_idempotency i ON i.application_id = v_application_id AND i.idempotency_key = b.idempotency_key
    JOIN orbit_task t ON t.id = i.task_id
    LEFT JOIN orbit_submit_outcome x ON x.item = b.item
    LEFT JOIN orbit_attempt c ON c.id = x.cancelled
   ORDER BY b.item;
  IF v_noted THEN
    DELETE FROM orbit_submit_outcome WHERE item IN (SELECT b.item FROM {% call m::batch_keys("$[*]") %});
  END IF;
END
