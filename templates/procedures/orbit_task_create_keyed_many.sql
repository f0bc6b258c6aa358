{% import "_macros.sql" as m %}
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
CREATE PROCEDURE orbit_task_create_keyed_many(
  IN p_tasks MEDIUMTEXT {{ c.utf8 }},
  IN p_application_id BIGINT UNSIGNED,
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_queue_id CHAR(32) {{ c.ascii }},
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
  DECLARE v_ready_items MEDIUMTEXT {{ c.ascii }};
  -- The keys that have no row yet (a plain read).
  DECLARE c_new_keys CURSOR FOR
    SELECT k.concurrency_key
      FROM {% call m::batch_concurrency_keys() %}
      LEFT JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = k.concurrency_key
     WHERE r.id IS NULL;
  -- The keys' rows, locked in key order; then the missing ones inserted, each locked by its
  -- insert (a concurrent submit may insert one first: ON DUPLICATE KEY UPDATE then takes its
  -- lock), with the holder limit 1.
  SELECT COUNT(*), COUNT(r.id), COALESCE(SUM(r.holder_limit <> 1), 0) INTO v_keys, v_key_rows, v_stale_limits
    FROM {% call m::batch_concurrency_keys() %}
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
       AND r.concurrency_key IN (SELECT k.concurrency_key FROM {% call m::batch_concurrency_keys() %});
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
            FROM {% call m::batch_tasks() %}
           WHERE t.concurrency_key <> '' AND {% call m::task_run_at("t.", "p_now") %} <= p_now
           GROUP BY t.concurrency_key) f
    STRAIGHT_JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = f.concurrency_key
   WHERE {% call m::keyed_lane("r", "p_queue_id", "p_now") %} = 'ready';
  INSERT INTO orbit_task {% call m::task_insert_columns("                          ") %}
  SELECT {% call m::task_insert_values("p_application_id", "q.namespace_id", "q.id", "t.", "t.concurrency_key", "COALESCE(r.id, 0)", "CASE WHEN t.effective_run_at > p_now THEN 'scheduled' WHEN r.id IS NULL OR FIND_IN_SET(t.item, v_ready_items) THEN 'ready' ELSE 'blocked' END", "t.effective_run_at", "t.idempotency_key", "0", "0", "p_slot", "p_now", "0", "NULL", "         ") %}
    FROM (SELECT t.*, {% call m::task_run_at("t.", "p_now") %} AS effective_run_at FROM {% call m::batch_tasks() %}) t
    JOIN orbit_queue q ON q.id = t.queue_id
    LEFT JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = t.concurrency_key
                              AND t.concurrency_key <> ''
   ORDER BY t.item;
  SET o_first = LAST_INSERT_ID();
END
