-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_key_list.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_list: List a namespace's held keys, busiest first, a page at a time.
--
-- From the mariadb client: CALL orbit_key_list(UNHEX(SHA2('<token>', 256)), <namespace id>,
-- 'waiting', 50, NULL, NULL);
-- The keys listed are the namespace's held keys (those with a permit holder): only a held key
-- makes tasks wait for it. The namespace must be in the credential's scope as a whole; another
-- tenant's namespace, or one it does not reach, lists nothing (the same answer as a namespace
-- without held keys).
-- Orders (ties broken by resource_id ascending):
--   'waiting'     -> most waiting tasks first (each key counted up to 1,000; waiting_more = 1
--                    means "1,000 or more");
--   'oldest_wait' -> the key whose oldest waiting task was accepted first comes first; keys with
--                    no waiting task come last.
-- Keyset pagination: pass the last row's sort_value and resource_id as p_after_value and
-- p_after_resource_id for the next page (both NULL = from the start). The ranking is live: a key
-- whose rank changes between two pages may appear on both or neither; a steady state is walked
-- exactly once.
-- Cost: independent of the number of keys and tasks. It reads the active attempts (a key's holders
-- are among them), and per held key of the namespace its slot rows (at most its limit), a count of at
-- most 1,001 ix_task_key entries and, per queue with waiting tasks of the key, 22 one-entry probes
-- of ix_task_key (the next queue, and the oldest per lane and priority).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_namespace_id; p_order ('waiting' or
--   'oldest_wait'); p_limit 1-1000; p_after_value, p_after_resource_id (the cursor; NULL = none).
-- Result (0..p_limit rows, in the order asked), all times UTC:
--   namespace_id, concurrency_key (text), highest_token, holder_attempt_id, holder_task_id,
--   holder_queue_id, holder_worker_id, holder_session_id, holder_state, holder_granted_at,
--   holder_lease_expires_at, holder_token, waiting (up to 1,000), waiting_more (1 or 0),
--   oldest_task_id (NULL = none waits), oldest_waiting_since (its run_at; NULL = none waits),
--   resource_id, sort_value (the cursor's value: waiting, or oldest_task_id with
--   18446744073709551615 for none), holders (attempts holding the key now). The holder_* columns
--   are the key's oldest holder's (the lowest attempt id).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT (p_order, p_limit).
-- Locks: none (a consistent read in one read-only snapshot).
DROP PROCEDURE IF EXISTS orbit_key_list;
DELIMITER $$
CREATE PROCEDURE orbit_key_list(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED,
                                IN p_order VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin, IN p_limit BIGINT,
                                IN p_after_value BIGINT UNSIGNED, IN p_after_resource_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_keys LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_stats LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_n INT;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_oldest BIGINT UNSIGNED;
  DECLARE v_holder BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_step CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_a CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_b CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_queue_oldest BIGINT UNSIGNED;
  DECLARE v_p INT;
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_order IS NULL OR p_order NOT IN ('waiting', 'oldest_wait') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: order must be waiting or oldest_wait';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;

  SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION READ ONLY;
  SELECT n.id INTO v_namespace_id
    FROM orbit_namespace n
   WHERE n.id = p_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
     AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                  WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '');
  IF v_namespace_id IS NOT NULL THEN
    -- A held key's holders are active attempts: found among those (ix_attempt_active_queue).
    SELECT COALESCE(JSON_ARRAYAGG(x.resource_id), '[]') INTO v_keys
      FROM (SELECT DISTINCT k.resource_id
              FROM orbit_attempt k FORCE INDEX (ix_attempt_active_queue)
             WHERE k.released_at IS NULL AND k.resource_id <> 0 AND k.namespace_id = v_namespace_id) x;
  END IF;
  SET v_n = JSON_LENGTH(v_keys);
  WHILE v_i < v_n DO
    -- (JSON_EXTRACT: MySQL's JSON_VALUE takes only a literal path.)
    SET v_resource_id = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
    SELECT MIN(h.attempt_id) INTO v_holder
    FROM (SELECT r.holder_attempt_id AS attempt_id FROM orbit_resource r
           WHERE r.id = v_resource_id AND r.holder_attempt_id <> 0
          UNION ALL
          SELECT s.attempt_id FROM orbit_key_slot s
           WHERE s.resource_id = v_resource_id AND s.attempt_id <> 0) h;
    SELECT COUNT(*) INTO v_count
      FROM (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_key)
             WHERE t.resource_id = v_resource_id AND t.lane IN ('ready', 'blocked')
             LIMIT 1001) x;
    -- The oldest waiter over the key's queues.
    SET v_oldest = NULL, v_queue_id = '';
    queues: LOOP
      SET v_a = NULL, v_b = NULL;
    SELECT t.queue_id INTO v_a FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id > v_queue_id
     ORDER BY t.queue_id LIMIT 1;
    SELECT t.queue_id INTO v_b FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id > v_queue_id
     ORDER BY t.queue_id LIMIT 1;
    SET v_step = LEAST(COALESCE(v_a, v_b), COALESCE(v_b, v_a));
      IF v_step IS NULL THEN
        LEAVE queues;
      END IF;
      SET v_queue_id = v_step;
      SET v_queue_oldest = NULL, v_p = 0;
    WHILE v_p <= 9 DO
      SET v_id = NULL;
      SELECT t.id INTO v_id FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id = v_queue_id AND t.priority = v_p
       ORDER BY t.id LIMIT 1;
      IF v_id IS NOT NULL AND (v_queue_oldest IS NULL OR v_id < v_queue_oldest) THEN
        SET v_queue_oldest = v_id;
      END IF;
      SET v_id = NULL;
      SELECT t.id INTO v_id FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id = v_queue_id AND t.priority = v_p
       ORDER BY t.id LIMIT 1;
      IF v_id IS NOT NULL AND (v_queue_oldest IS NULL OR v_id < v_queue_oldest) THEN
        SET v_queue_oldest = v_id;
      END IF;
      SET v_p = v_p + 1;
    END WHILE;
      IF v_oldest IS NULL OR v_queue_oldest < v_oldest THEN
        SET v_oldest = v_queue_oldest;
      END IF;
    END LOOP queues;
    -- `+ 0` on the variables: MariaDB's JSON_OBJECT writes a bare procedure variable as a string.
    SET v_stats = JSON_ARRAY_APPEND(v_stats, '$', JSON_OBJECT(
          'r', v_resource_id + 0, 'w', LEAST(v_count, 1000), 'm', IF(v_count > 1000, 1, 0),
          'o', v_oldest + 0, 'h', v_holder + 0));
    SET v_i = v_i + 1;
  END WHILE;

  SELECT r.namespace_id, CONVERT(r.concurrency_key USING utf8mb4) AS concurrency_key, r.highest_token,
         a.id AS holder_attempt_id, a.task_id AS holder_task_id, a.queue_id AS holder_queue_id,
         a.worker_id AS holder_worker_id, a.session_id AS holder_session_id,
         CAST(a.state AS CHAR) AS holder_state, a.granted_at AS holder_granted_at,
         a.lease_expires_at AS holder_lease_expires_at, a.concurrency_token AS holder_token,
         j.w AS waiting, j.m AS waiting_more, j.o AS oldest_task_id,
         o.run_at AS oldest_waiting_since,
         r.id AS resource_id,
         IF(p_order = 'waiting', j.w, COALESCE(j.o, 18446744073709551615)) AS sort_value, r.holders
    FROM JSON_TABLE(v_stats, '$[*]' COLUMNS (
           r BIGINT UNSIGNED PATH '$.r', w BIGINT UNSIGNED PATH '$.w', m INT PATH '$.m',
           o BIGINT UNSIGNED PATH '$.o', h BIGINT UNSIGNED PATH '$.h')) j
    JOIN orbit_resource r ON r.id = j.r
    JOIN orbit_attempt a ON a.id = j.h
    LEFT JOIN orbit_task o ON o.id = j.o
   WHERE p_after_resource_id IS NULL
      OR (p_order = 'waiting' AND (j.w < p_after_value OR (j.w = p_after_value AND r.id > p_after_resource_id)))
      OR (p_order = 'oldest_wait' AND (COALESCE(j.o, 18446744073709551615) > p_after_value
                                       OR (COALESCE(j.o, 18446744073709551615) = p_after_value AND r.id > p_after_resource_id)))
   ORDER BY IF(p_order = 'waiting', 18446744073709551615 - j.w, COALESCE(j.o, 18446744073709551615)), r.id
   LIMIT p_limit;
  COMMIT;
END$$
DELIMITER ;
