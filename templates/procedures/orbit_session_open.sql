{% import "_macros.sql" as m %}
-- orbit_session_open: Register a worker's WebSocket session (the hello message), resuming its attempts.
--
-- The worker identity (worker_id) is created on first use with its concurrency_keys flag, which is
-- fixed from then on: a hello with the other value is a STATE_CONFLICT (an upgraded process must
-- use a new identity). Sessions of a worker without concurrency_keys never receive keyed tasks.
-- Every queue must be within the credential's scope. Resume: active attempts listed in
-- p_resume_json that belong to the same worker identity AND to one of this session's queues (which
-- the credential may consume: checked above) move to the new session, keeping their attempt, lease
-- and token; others are left alone and not reported. The queue condition matters: worker ids are
-- chosen by workers, so without it a credential of another namespace or queue could take over a
-- running attempt by naming its worker id.
-- start_on_assign = 1: this session's grants are started in the granting transaction (attempt and
-- task RUNNING, as if task.start had been accepted), so the worker runs its handler on the
-- assignment without a task.start round trip and one commit less per task. The price: an attempt
-- whose lease runs out counts as started (ends UNKNOWN, the task goes to NEEDS_REVIEW unless it
-- may retry unknown outcomes), even if the worker never received the assignment.
-- Parameters: p_token_hash BINARY(32) (scopes workers:connect, and workers:consume on every queue);
--   p_worker_id 1-191 characters; p_node (the serve process); p_capacity 1-10000;
--   p_concurrency_keys 0/1; p_start_on_assign 0/1; p_handlers_json JSON array of handler names ([] = any);
--   p_queue_ids_json JSON array of queue ids (1-100); p_resume_json JSON array of attempt ids.
-- Result (one row): session_id, worker_row_id, concurrency_keys, resumed (JSON array of the
--   attempt ids now owned by this session).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (a queue), INVALID_ARGUMENT,
--   STATE_CONFLICT (concurrency_keys differs from the worker's registration).
-- Locks, in order: orbit_worker row (insert or FOR UPDATE), resumed orbit_attempt rows.
CREATE PROCEDURE orbit_session_open(
  IN p_token_hash BINARY(32),
  IN p_worker_id TEXT {{ c.utf8 }},
  IN p_node TEXT {{ c.utf8 }},
  IN p_capacity BIGINT,
  IN p_concurrency_keys TINYINT,
  IN p_start_on_assign TINYINT,
  IN p_handlers_json TEXT {{ c.utf8 }},
  IN p_queue_ids_json TEXT {{ c.utf8 }},
  IN p_resume_json TEXT {{ c.utf8 }})
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_app BIGINT UNSIGNED;
  DECLARE v_cred BIGINT UNSIGNED;
  DECLARE v_worker_row_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_registered TINYINT;
  DECLARE v_session_id BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_position INT DEFAULT 0;
  DECLARE v_queue_id TEXT {{ c.ascii }};
  {% call m::rollback_on_error() %};

  CALL orbit_auth_check(p_token_hash, 'workers:connect', v_application_id, v_environment_id, v_credential_id);
  IF p_worker_id IS NULL OR CHAR_LENGTH(p_worker_id) NOT BETWEEN 1 AND 191 THEN
    {% call m::raise("INVALID_ARGUMENT", "worker_id must be 1-191 characters") %};
  END IF;
  IF p_capacity IS NULL OR p_capacity NOT BETWEEN 1 AND 10000 THEN
    {% call m::raise("INVALID_ARGUMENT", "capacity must be between 1 and 10000") %};
  END IF;
  IF p_concurrency_keys IS NULL OR p_concurrency_keys NOT IN (0, 1) THEN
    {% call m::raise("INVALID_ARGUMENT", "concurrency_keys must be true or false") %};
  END IF;
  IF p_start_on_assign IS NULL OR p_start_on_assign NOT IN (0, 1) THEN
    {% call m::raise("INVALID_ARGUMENT", "start_on_assign must be true or false") %};
  END IF;
  IF p_handlers_json IS NULL OR NOT JSON_VALID(p_handlers_json) OR JSON_TYPE(p_handlers_json) <> 'ARRAY' THEN
    {% call m::raise("INVALID_ARGUMENT", "handlers must be an array of handler names") %};
  END IF;
  IF p_resume_json IS NULL OR NOT JSON_VALID(p_resume_json) OR JSON_TYPE(p_resume_json) <> 'ARRAY' THEN
    {% call m::raise("INVALID_ARGUMENT", "resume must be an array of attempt ids") %};
  END IF;
  IF p_queue_ids_json IS NULL OR NOT JSON_VALID(p_queue_ids_json) OR JSON_TYPE(p_queue_ids_json) <> 'ARRAY'
     OR JSON_LENGTH(p_queue_ids_json) NOT BETWEEN 1 AND 100 THEN
    {% call m::raise("INVALID_ARGUMENT", "queue_ids must be an array of 1-100 queue ids") %};
  END IF;
  SET v_count = JSON_LENGTH(p_queue_ids_json);
  WHILE v_i < v_count DO
    SET v_queue_id = JSON_UNQUOTE(JSON_EXTRACT(p_queue_ids_json, CONCAT('$[', v_i, ']')));
    CALL orbit_auth_queue_check(p_token_hash, 'workers:consume', v_queue_id, v_app, v_namespace_id, v_cred);
    SET v_i = v_i + 1;
  END WHILE;

  {% call m::begin() %};
  INSERT INTO orbit_worker (application_id, environment_id, worker_id, concurrency_keys, created_at, last_seen_at)
  VALUES (v_application_id, v_environment_id, p_worker_id, p_concurrency_keys, v_now, v_now)
  ON DUPLICATE KEY UPDATE last_seen_at = VALUES(last_seen_at);
  SELECT w.id, w.concurrency_keys INTO v_worker_row_id, v_registered
    FROM orbit_worker w
   WHERE w.application_id = v_application_id AND w.environment_id = v_environment_id AND w.worker_id = p_worker_id
     FOR UPDATE;
  IF v_registered <> p_concurrency_keys THEN
    ROLLBACK;
    {% call m::raise("STATE_CONFLICT", "concurrency_keys is fixed for a worker_id; use a new worker_id") %};
  END IF;
  INSERT INTO orbit_session (worker_row_id, worker_id, credential_id, application_id, node, capacity,
                             concurrency_keys, start_on_assign, handlers, state, claim_seq, connected_at, last_seen_at)
  VALUES (v_worker_row_id, p_worker_id, v_credential_id, v_application_id, COALESCE(p_node, ''), p_capacity,
          v_registered, p_start_on_assign, p_handlers_json, 'active', 0, v_now, v_now);
  SET v_session_id = LAST_INSERT_ID();
  -- Positions 0 to n-1 without gaps (a repeated queue id is skipped and takes none): the grant
  -- finds the queue of each visit by its position (orbit_task_grant).
  SET v_i = 0, v_position = 0;
  WHILE v_i < v_count DO
    INSERT IGNORE INTO orbit_session_queue (session_id, queue_id, position)
    VALUES (v_session_id, JSON_UNQUOTE(JSON_EXTRACT(p_queue_ids_json, CONCAT('$[', v_i, ']'))), v_position);
    SET v_position = v_position + ROW_COUNT(), v_i = v_i + 1;
  END WHILE;
  -- Resume: the same worker identity takes its live attempts over; token and lease unchanged.
  -- claim_seq 0: a grant finds its own attempts by (session, claim_seq), and the old session's
  -- sequence number would otherwise make a resumed attempt part of one of this session's grants.
  SET v_count = JSON_LENGTH(p_resume_json), v_i = 0;
  WHILE v_i < v_count DO
    UPDATE orbit_attempt a
       SET a.session_id = v_session_id, a.claim_seq = 0
     WHERE a.id = CAST(JSON_UNQUOTE(JSON_EXTRACT(p_resume_json, CONCAT('$[', v_i, ']'))) AS UNSIGNED)
       AND a.application_id = v_application_id AND a.worker_id = p_worker_id
       AND a.state IN ('LEASED', 'RUNNING')
       AND a.queue_id IN (SELECT sq.queue_id FROM orbit_session_queue sq WHERE sq.session_id = v_session_id);
    SET v_i = v_i + 1;
  END WHILE;
  COMMIT;
  SELECT v_session_id AS session_id, v_worker_row_id AS worker_row_id, v_registered AS concurrency_keys,
         COALESCE((SELECT JSON_ARRAYAGG(a.id) FROM orbit_attempt a
                    WHERE a.session_id = v_session_id AND a.state IN ('LEASED', 'RUNNING')), JSON_ARRAY()) AS resumed;
END
