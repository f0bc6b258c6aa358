{% import "_macros.sql" as m %}
-- orbit_attempt_grant: Internal: grant one locked task to a worker session, in the caller's transaction.
--
-- One grant of orbit_task_grant, which found the task (a ready candidate, or a hand-off's task),
-- locked it, and checked what is the session's to check: its state and credential, its queue's
-- room and the application's quota. Here, the task's own rules, one decision each, in order:
-- 1. Past its total deadline: the task expires (EXPIRED, with its event), and a keyed task's key
--    readies the queue's next task in its place.
-- 2. A keyed task: its key's permit, by the key's policy as it is now, so a change of limit or
--    rate applies from the key's next grant (p_policies = 0: the namespace had no policy when the
--    caller's visit began: one holder, no rate). The task goes back to the blocked lane when:
--    - the key is full (as many hold it as its limit allows: a head left ready when another
--      queue's task took the key's last slot, or a lowered limit); a release promotes it again;
--    - the key has granted its largest token (2^64-1), which is never wrapped: blocked_reason
--      TOKEN_EXHAUSTED and a grant_refused event, and nothing promotes it;
--    - its rate holds the grant back (orbit_key_rate_check): the key waits for rate_wake_at,
--      when orbit_task_promote_due promotes it, and nothing polls it meanwhile.
--    Otherwise it takes the key's lowest free slot (0 on the resource row, else the lowest free
--    orbit_key_slot row, else a new one after the last) and token highest_token + 1, and the
--    resource row's version advances.
-- 3. The attempt: the task's queue permit, and its key permit with the token and version
--    recorded on it; LEASED until p_expires, or RUNNING at once for a start_on_assign session (see
--    orbit_session_open). The task moves to it (its row updated once). A key with room left gets
--    its next task ready in each queue.
-- No history row: the attempt records the grant (granted_at, session, token) and a start on
-- assignment (started_at); see orbit_task_event. The quota charge is the caller's, for the
-- whole grant, last.
-- Parameters, as the caller read them: the session's (its row locked by the caller) p_session_id,
--   p_application_id, p_worker_id, p_start (start_on_assign) and p_seq (the claim_seq recorded on
--   the attempt); the task's (its row locked by the caller, after its scan or its hand-off's read)
--   p_task_id (WAITING in the ready lane, or blocked as a hand-off), p_namespace_id, p_queue_id,
--   p_resource_id (0: unkeyed), p_deadline (its total deadline, or NULL) and p_attempt_no (its
--   attempt_count + 1); p_policies: 1 when the task's namespace has a key policy; p_now;
--   p_expires: the lease's end.
-- Out: o_attempt_id: the attempt granted, NULL when the task was not granted; o_expired: 1 when
--   the task expired, and the caller gives back its incomplete-task charge with its quota work
--   (otherwise a task not granted went back to the blocked lane).
-- Result: none. Signals: none.
-- Locks: the caller holds the orbit_session and orbit_task rows. Then the task's key's
--   orbit_resource row (a hand-off's is held already, by the release that handed it off); the
--   new orbit_attempt row (or, for a task that expires or is refused, a new orbit_task_event
--   row); the key's orbit_key_slot row (a slot above 0; a new one is inserted) and
--   orbit_key_rate_log row (a key with a rate; a new one is inserted); the key's next tasks that
--   orbit_key_promote or orbit_key_promote_all readies, orbit_task rows (FOR UPDATE SKIP
--   LOCKED).
CREATE PROCEDURE orbit_attempt_grant(IN p_session_id BIGINT UNSIGNED, IN p_application_id BIGINT UNSIGNED,
                                     IN p_worker_id VARCHAR(191) {{ c.utf8 }}, IN p_start TINYINT,
                                     IN p_seq BIGINT UNSIGNED,
                                     IN p_task_id BIGINT UNSIGNED, IN p_namespace_id BIGINT UNSIGNED,
                                     IN p_queue_id CHAR(32) {{ c.ascii }}, IN p_resource_id BIGINT UNSIGNED,
                                     IN p_deadline DATETIME(6), IN p_attempt_no INT UNSIGNED,
                                     IN p_policies TINYINT, IN p_now DATETIME(6), IN p_expires DATETIME(6),
                                     OUT o_attempt_id BIGINT UNSIGNED, OUT o_expired TINYINT)
  MODIFIES SQL DATA
body: BEGIN
  -- The task's key: its holders, its policy's holder limit and rate, and the permit this grant
  -- takes (v_key_slot NULL: a new orbit_key_slot row, after v_slot_rows existing ones).
  DECLARE v_key VARBINARY({{ c.key_max_bytes }});
  DECLARE v_highest BIGINT UNSIGNED;
  DECLARE v_version BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_holder BIGINT UNSIGNED;
  DECLARE v_holders SMALLINT UNSIGNED;
  DECLARE v_key_limit SMALLINT UNSIGNED DEFAULT 1;
  DECLARE v_rate_grants SMALLINT UNSIGNED DEFAULT 0;
  DECLARE v_rate_seconds INT UNSIGNED DEFAULT 0;
  -- A rate: when it lets this grant come, and whether this grant's position of
  -- orbit_key_rate_log has a row (orbit_key_rate_check).
  DECLARE v_allowed DATETIME(6);
  DECLARE v_logged TINYINT;
  DECLARE v_key_slot SMALLINT UNSIGNED DEFAULT 0;
  DECLARE v_slot_rows INT;
  DECLARE v_token BIGINT UNSIGNED DEFAULT 0;

  SET o_attempt_id = NULL, o_expired = 0;
  -- A keyed task's key row, locked first: its next task is readied under it when this one
  -- expires (a hand-off's is held already, by the release that handed it off).
  IF p_resource_id <> 0 THEN
    SELECT r.concurrency_key, r.highest_token, r.version, r.holder_attempt_id, r.holders
      INTO v_key, v_highest, v_version, v_holder, v_holders
      FROM orbit_resource r WHERE r.id = p_resource_id FOR UPDATE;
  END IF;

  -- 1. The deadline.
  IF p_deadline IS NOT NULL AND p_deadline <= p_now THEN
    {% call m::task_expire("p_task_id", "'WAITING'", "'total deadline passed before a grant'", "p_now") %};
    IF p_resource_id <> 0 THEN
      CALL orbit_key_promote(p_resource_id, p_queue_id, p_now);
    END IF;
    SET o_expired = 1;
    LEAVE body;
  END IF;

  -- 2. The key's permit.
  IF p_resource_id <> 0 THEN
    IF p_policies THEN
      -- A plain read of at most {{ c.key_policies_max }} index entries of the namespace.
      SELECT p.holder_limit, p.rate_grants, p.rate_per_seconds INTO v_key_limit, v_rate_grants, v_rate_seconds
        {% call m::key_policy_of("p_namespace_id", "v_key") %};
    END IF;
    IF v_holders >= v_key_limit THEN
      UPDATE orbit_task t SET t.lane = 'blocked', t.updated_at = p_now WHERE t.id = p_task_id;
      LEAVE body;
    END IF;
    IF v_highest = {{ c.token_max }} THEN
      UPDATE orbit_task t
         SET t.lane = 'blocked', t.updated_at = p_now,
             t.blocked_reason = 'TOKEN_EXHAUSTED: this key has granted its largest token (2^64-1); no wrap-around'
       WHERE t.id = p_task_id;
      INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
      VALUES (p_task_id, 'grant_refused', 'WAITING', 'WAITING', 'TOKEN_EXHAUSTED', p_now);
      LEAVE body;
    END IF;
    IF v_rate_grants > 0 THEN
      CALL orbit_key_rate_check(p_resource_id, v_highest, v_rate_grants, v_rate_seconds, p_now, v_allowed, v_logged);
      IF v_allowed > p_now THEN
        UPDATE orbit_task t SET t.lane = 'blocked', t.updated_at = p_now WHERE t.id = p_task_id;
        UPDATE orbit_resource r SET r.rate_wake_at = v_allowed WHERE r.id = p_resource_id;
        LEAVE body;
      END IF;
    END IF;
    -- The lowest free slot (plain reads, exact under the resource row's lock): slot 0 while the
    -- resource row has no holder.
    IF v_holder <> 0 THEN
      SELECT MIN(IF(s.attempt_id = 0, s.slot, NULL)), COUNT(*) INTO v_key_slot, v_slot_rows
        FROM orbit_key_slot s
       WHERE s.resource_id = p_resource_id;
    END IF;
    SET v_token = v_highest + 1, v_version = v_version + 1;
  END IF;

  -- 3. The attempt, the key's permit, and the task's move.
  INSERT INTO orbit_attempt (task_id, attempt_no, application_id, namespace_id, queue_id, resource_id,
                             concurrency_token, grant_version, key_slot, session_id, worker_id, claim_seq,
                             quota_slot, state, granted_at, started_at, lease_expires_at)
  VALUES (p_task_id, p_attempt_no, p_application_id, p_namespace_id, p_queue_id, p_resource_id,
          v_token, v_version, COALESCE(v_key_slot, v_slot_rows + 1), p_session_id, p_worker_id, p_seq,
          {% call m::session_slot("p_session_id") %}, IF(p_start, 'RUNNING', 'LEASED'), p_now, IF(p_start, p_now, NULL),
          p_expires);
  SET o_attempt_id = LAST_INSERT_ID();
  IF p_resource_id <> 0 THEN
    -- The key permit: slot 0 on the resource row, another slot on its orbit_key_slot row. The
    -- limit read above is kept for the steps that read no policy (m::key_full).
    UPDATE orbit_resource r
       SET r.highest_token = v_token, r.version = v_version, r.holders = r.holders + 1,
           r.holder_attempt_id = IF(v_key_slot = 0, o_attempt_id, r.holder_attempt_id),
           r.holder_limit = v_key_limit, r.rate_wake_at = NULL, r.updated_at = p_now
     WHERE r.id = p_resource_id;
    IF v_key_slot IS NULL THEN
      INSERT INTO orbit_key_slot (resource_id, slot, attempt_id, updated_at)
      VALUES (p_resource_id, v_slot_rows + 1, o_attempt_id, p_now);
    ELSEIF v_key_slot > 0 THEN
      UPDATE orbit_key_slot s
         SET s.attempt_id = o_attempt_id, s.updated_at = p_now
       WHERE s.resource_id = p_resource_id AND s.slot = v_key_slot;
    END IF;
    IF v_rate_grants > 0 THEN
      -- This grant's time, over grant k - G's.
      IF v_logged THEN
        UPDATE orbit_key_rate_log l
           SET l.token = v_token, l.granted_at = p_now
         WHERE l.resource_id = p_resource_id AND l.position = v_token % v_rate_grants;
      ELSE
        INSERT INTO orbit_key_rate_log (resource_id, position, token, granted_at)
        VALUES (p_resource_id, v_token % v_rate_grants, v_token, p_now);
      END IF;
    END IF;
  END IF;
  UPDATE orbit_task t
     SET t.state = IF(p_start, 'RUNNING', 'LEASED'), t.lane = 'none', t.attempt_count = p_attempt_no,
         t.current_attempt_id = o_attempt_id, t.blocked_reason = '', t.updated_at = p_now
   WHERE t.id = p_task_id;
  IF p_resource_id <> 0 AND v_holders + 1 < v_key_limit THEN
    -- Room for more: the key's next task in each queue becomes ready too (now that this one has
    -- left the ready lane).
    CALL orbit_key_promote_all(p_resource_id, p_now);
  END IF;
END
