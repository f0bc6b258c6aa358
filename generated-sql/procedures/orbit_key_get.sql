-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_key_get.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_get: Inspect one concurrency key: its token, its holder, and who waits for it.
--
-- Answers "why is my task waiting, and who holds the key?" from the mariadb client:
--   CALL orbit_key_get(UNHEX(SHA2('<token>', 256)), <namespace id>, '<key>');
-- The namespace must be in the credential's scope as a whole (a namespace-wide grant): a key
-- spans every queue of its namespace. A key nobody ever submitted a task with has no row: it
-- gets NOT_FOUND, the same answer as another tenant's namespace or key (no existence oracle). A
-- known key that is free and has no waiters answers with its token, no holder and no queues.
-- Waiting tasks are those of the key in the 'blocked' lane (the key is held, or its queue already
-- has a ready task of the key) or the 'ready' lane (claimable now). Retries not yet due
-- ('scheduled') are not waiting for the key.
-- Cost: independent of the number of keys and tasks. Every read is an index probe: the resource
-- row by ux_resource_key, the oldest holder by its primary key (from the resource row and the key's orbit_key_slot rows), the queues of the key by ordered probes of
-- ix_task_key (two per queue), each queue's oldest waiter by one probe per lane and priority (20),
-- its head by one or two ordered probes, and its count reads at most 10,001 index entries (a count of 10,000 with waiting_more = 1 means "10,000 or more").
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_namespace_id; p_key (exact bytes,
--   the rules of orbit_key_validate; '' is not a key).
-- Result (one row), all times UTC:
--   namespace_id, concurrency_key (text), highest_token (0 = never granted);
--   holder_attempt_id, holder_task_id, holder_queue_id, holder_worker_id, holder_session_id,
--     holder_state (LEASED or RUNNING), holder_granted_at, holder_lease_expires_at,
--     holder_token: the key's oldest holder (the lowest attempt id of its holders), all NULL
--     when nobody holds the key;
--   waiting (tasks waiting for the key, summed over queues, each queue counted up to 10,000),
--     waiting_more (1 when some queue has more than it counted);
--   oldest_task_id, oldest_waiting_since (the waiting task accepted first and its run_at: the
--     time it became due), NULL when none waits;
--   next_task_id, next_queue_id, next_lane: the task the key goes to next: the best ready task
--     (priority, then id) if any, else the best blocked one that may be granted (blocked_reason
--     empty), as a release hands the key on; NULL when none;
--   queues: JSON array, one object per queue with waiting tasks, in queue id order:
--     {"queue_id", "waiting", "waiting_more" (1 or 0), "ready", "oldest_task_id",
--      "oldest_waiting_since" (ISO 8601), "next_task_id"};
--   recent_grants: JSON array of the key's last 10 grants, newest first (the holder's included),
--     one object per attempt: {"attempt_id", "task_id", "queue_id", "worker_id", "state",
--     "concurrency_token", "key_slot", "granted_at", "released_at" (ISO 8601; null while held), "outcome"
--     ('' while active)}: ten ordered probes of ix_attempt_resource;
--   policy_id, on_busy: the key policy a submit for this key meets now (orbit_key_policy; NULL
--     and 'queue' when none matches);
--   holders (attempts holding the key now), holder_limit, rate_grants, rate_per_seconds (the
--     policy's, which the key's next grant applies: 1, 0 and 0 when none matches), rate_wake_at
--     (when the key's rate lets a grant through again while one waits for it; NULL otherwise).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT (p_key), NOT_FOUND (no such key
--   in a namespace the credential reaches as a whole).
-- Locks: none (a consistent read in one read-only snapshot).
DROP PROCEDURE IF EXISTS orbit_key_get;
DELIMITER $$
CREATE PROCEDURE orbit_key_get(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED, IN p_key BLOB)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_policy_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT 'queue';
  DECLARE v_limit SMALLINT UNSIGNED DEFAULT 1;
  DECLARE v_rate_grants SMALLINT UNSIGNED DEFAULT 0;
  DECLARE v_rate_seconds INT UNSIGNED DEFAULT 0;
  DECLARE v_oldest_holder BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_next_ready CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_next_blocked CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_step CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_p INT;
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_ready INT;
  DECLARE v_oldest BIGINT UNSIGNED;
  DECLARE v_since DATETIME(6);
  DECLARE v_head BIGINT UNSIGNED;
  DECLARE v_head_priority INT;
  DECLARE v_head_lane VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_waiting BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_more TINYINT DEFAULT 0;
  DECLARE v_key_oldest BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_key_since DATETIME(6) DEFAULT NULL;
  DECLARE v_next BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_next_queue CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_next_lane VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_next_priority INT;
  DECLARE v_queues LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_grants LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_grant BIGINT UNSIGNED;
  DECLARE v_before BIGINT UNSIGNED DEFAULT 18446744073709551615;
  DECLARE v_g INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  CALL orbit_key_validate(p_key);
  IF p_key = '' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: concurrency_key is required';
  END IF;

  SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION READ ONLY;
  SELECT r.id INTO v_resource_id
    FROM orbit_namespace n
    JOIN orbit_resource r ON r.namespace_id = n.id AND r.concurrency_key = p_key
   WHERE n.id = p_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
     AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                  WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '');
  IF v_resource_id IS NULL THEN
    COMMIT;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: key not found';
  END IF;

  -- The queues with waiting tasks of the key, in queue id order.
  queues: LOOP
    SET v_next_ready = NULL, v_next_blocked = NULL;
    SELECT t.queue_id INTO v_next_ready FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id > v_queue_id
     ORDER BY t.queue_id LIMIT 1;
    SELECT t.queue_id INTO v_next_blocked FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id > v_queue_id
     ORDER BY t.queue_id LIMIT 1;
    SET v_step = LEAST(COALESCE(v_next_ready, v_next_blocked), COALESCE(v_next_blocked, v_next_ready));
    IF v_step IS NULL THEN
      LEAVE queues;
    END IF;
    SET v_queue_id = v_step;
    SELECT COUNT(*) INTO v_count
      FROM (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_key)
             WHERE t.resource_id = v_resource_id AND t.lane IN ('ready', 'blocked') AND t.queue_id = v_queue_id
             LIMIT 10001) x;
    SELECT COUNT(*) INTO v_ready
      FROM (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_key)
             WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id = v_queue_id
             LIMIT 10001) x;
    SET v_oldest = NULL, v_p = 0;
    WHILE v_p <= 9 DO
      SET v_id = NULL;
      SELECT t.id INTO v_id FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id = v_queue_id AND t.priority = v_p
       ORDER BY t.id LIMIT 1;
      IF v_id IS NOT NULL AND (v_oldest IS NULL OR v_id < v_oldest) THEN
        SET v_oldest = v_id;
      END IF;
      SET v_id = NULL;
      SELECT t.id INTO v_id FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id = v_queue_id AND t.priority = v_p
       ORDER BY t.id LIMIT 1;
      IF v_id IS NOT NULL AND (v_oldest IS NULL OR v_id < v_oldest) THEN
        SET v_oldest = v_id;
      END IF;
      SET v_p = v_p + 1;
    END WHILE;
    SELECT t.run_at INTO v_since FROM orbit_task t WHERE t.id = v_oldest;
    -- The queue's head: its ready task, else its best blocked task a grant may take.
    SET v_head = NULL, v_head_lane = 'ready';
    SELECT t.id, t.priority INTO v_head, v_head_priority FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id = v_queue_id
     ORDER BY t.priority, t.id LIMIT 1;
    IF v_head IS NULL THEN
      SET v_head_lane = 'blocked';
      SELECT t.id, t.priority INTO v_head, v_head_priority FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id = v_queue_id
         AND t.blocked_reason = ''
       ORDER BY t.priority, t.id LIMIT 1;
    END IF;
    IF v_head IS NOT NULL
       AND (v_next IS NULL OR (v_head_lane = 'ready' AND v_next_lane = 'blocked')
            OR (v_head_lane = v_next_lane AND (v_head_priority < v_next_priority
                                               OR (v_head_priority = v_next_priority AND v_head < v_next)))) THEN
      SET v_next = v_head, v_next_queue = v_queue_id, v_next_lane = v_head_lane, v_next_priority = v_head_priority;
    END IF;
    IF v_key_oldest IS NULL OR v_oldest < v_key_oldest THEN
      SET v_key_oldest = v_oldest, v_key_since = v_since;
    END IF;
    SET v_waiting = v_waiting + LEAST(v_count, 10000), v_more = v_more OR v_count > 10000;
    -- `+ 0` on the variables: MariaDB's JSON_OBJECT writes a bare procedure variable as a string.
    SET v_queues = JSON_ARRAY_APPEND(v_queues, '$', JSON_OBJECT(
          'queue_id', v_queue_id, 'waiting', LEAST(v_count, 10000),
          'waiting_more', IF(v_count > 10000, 1, 0),
          'ready', LEAST(v_ready, 10000), 'oldest_task_id', v_oldest + 0,
          'oldest_waiting_since', DATE_FORMAT(v_since, '%Y-%m-%dT%H:%i:%s.%fZ'), 'next_task_id', v_head + 0));
  END LOOP queues;

  -- The key's last grants, newest first: one ordered probe of ix_attempt_resource each.
  grants: WHILE v_g < 10 DO
    SET v_g = v_g + 1, v_grant = NULL;
    SELECT a.id INTO v_grant FROM orbit_attempt a FORCE INDEX (ix_attempt_resource)
     WHERE a.resource_id = v_resource_id AND a.id < v_before
     ORDER BY a.id DESC LIMIT 1;
    IF v_grant IS NULL THEN
      LEAVE grants;
    END IF;
    SET v_before = v_grant;
    SELECT JSON_ARRAY_APPEND(v_grants, '$', JSON_OBJECT(
             'attempt_id', a.id, 'task_id', a.task_id, 'queue_id', a.queue_id, 'worker_id', a.worker_id,
             'state', CAST(a.state AS CHAR), 'concurrency_token', a.concurrency_token,
             'key_slot', a.key_slot, 'granted_at', DATE_FORMAT(a.granted_at, '%Y-%m-%dT%H:%i:%s.%fZ'),
             'released_at', DATE_FORMAT(a.released_at, '%Y-%m-%dT%H:%i:%s.%fZ'), 'outcome', CAST(a.outcome AS CHAR)))
      INTO v_grants
      FROM orbit_attempt a WHERE a.id = v_grant;
  END WHILE grants;

  -- The key policy a submit for this key meets now.
  SELECT p.id, CAST(p.on_busy AS CHAR), p.holder_limit, p.rate_grants, p.rate_per_seconds
    INTO v_policy_id, v_on_busy, v_limit, v_rate_grants, v_rate_seconds
    FROM orbit_key_policy p
       WHERE p.namespace_id = p_namespace_id
         AND ((p.match_kind = 'exact' AND p.key_pattern = p_key)
              OR (p.match_kind = 'prefix' AND p.key_pattern = LEFT(p_key, LENGTH(p.key_pattern))))
       ORDER BY LENGTH(p.key_pattern) DESC, p.match_kind = 'exact' DESC
       LIMIT 1;
  -- The oldest holder: slot 0's or a slot row's.
  SELECT MIN(h.attempt_id) INTO v_oldest_holder
    FROM (SELECT r.holder_attempt_id AS attempt_id FROM orbit_resource r
           WHERE r.id = v_resource_id AND r.holder_attempt_id <> 0
          UNION ALL
          SELECT s.attempt_id FROM orbit_key_slot s
           WHERE s.resource_id = v_resource_id AND s.attempt_id <> 0) h;
  SELECT r.namespace_id, CONVERT(r.concurrency_key USING utf8mb4) AS concurrency_key, r.highest_token,
         a.id AS holder_attempt_id, a.task_id AS holder_task_id, a.queue_id AS holder_queue_id,
         a.worker_id AS holder_worker_id, a.session_id AS holder_session_id,
         CAST(a.state AS CHAR) AS holder_state, a.granted_at AS holder_granted_at,
         a.lease_expires_at AS holder_lease_expires_at, a.concurrency_token AS holder_token,
         v_waiting AS waiting, v_more AS waiting_more, v_key_oldest AS oldest_task_id,
         v_key_since AS oldest_waiting_since, v_next AS next_task_id, v_next_queue AS next_queue_id,
         v_next_lane AS next_lane, v_queues AS queues, v_grants AS recent_grants,
         v_policy_id AS policy_id, v_on_busy AS on_busy, r.holders, v_limit AS holder_limit,
         v_rate_grants AS rate_grants, v_rate_seconds AS rate_per_seconds, r.rate_wake_at
    FROM orbit_resource r
    LEFT JOIN orbit_attempt a ON a.id = v_oldest_holder
   WHERE r.id = v_resource_id;
  COMMIT;
END$$
DELIMITER ;
