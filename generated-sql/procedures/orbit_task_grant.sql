-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_grant.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_grant: Internal: grant up to p_max ready tasks to a worker session, in the caller's transaction.
--
-- The claim itself, shared by orbit_task_claim (a claim on its own) and orbit_attempt_finish (the
-- releasing transaction grants the session its next tasks, so a hot key is handed on with the
-- result, in one commit). This procedure decides which tasks the session gets: it checks the
-- session, its credential and the application's quota, visits the session's queues, and locks
-- candidates. orbit_attempt_grant grants each one (its deadline, its key's permit by the key's
-- policy, the attempt); the quota is charged once, for the whole grant, last.
-- A grant in a result's transaction (p_results) first takes the hand-off: the next tasks of the
-- keys those results released, which the releases left in the blocked lane for it
-- (orbit_attempt.handoff_task_id; see c_handoffs for which it may take), so a hot key goes on
-- without its next task being readied and found again in the ready lane. A key's next task thus
-- goes before older ready tasks of its priority. What it leaves, the caller readies.
-- Other candidates come only from the 'ready' lane (ix_task_dispatch), a batch per scan, where a
-- key has at most one task per queue and only while the key has room, so tasks blocked on a busy
-- key are never scanned: claim cost does not grow with them, and a blocked key never hides other
-- keys from the LIMIT. Queues are visited from a position that rotates per claim (fair across queues);
-- priority (0 first), then age, orders each queue. Skipped: paused queues, queues at their permit
-- limit, keyed tasks for a session that did not register concurrency_keys, handlers the session
-- does not run. A candidate that orbit_attempt_grant expires or sends back to the blocked lane
-- takes no room, and the scan goes on past it. Never commits: when nothing was granted, expired
-- or moved back to the blocked lane it rolls back to its own savepoint (the session's claim_seq
-- step included), so the caller's other work is kept.
-- Where a scan from the front starts: for a session that lists its handlers, at the first ready
-- task of one of them (ix_task_handler: one probe per handler, and for a session without
-- concurrency_keys its first unkeyed one), so the ready tasks of other handlers waiting in front
-- of it are never read, and a queue where none waits is not scanned at all. Past that task the
-- scan reads what lies between the session's tasks.
-- Where a scan starts: tasks leave the front of a ready lane, and their index entries stay there,
-- delete-marked, until purge removes them; a locking scan passes over each, and a busy queue
-- has hundreds of them. So with p_hinted, a scan of the queue the session
-- scanned last starts past the last candidate that scan took, within its priority: worse
-- priorities are scanned whole, and a better one found ready makes the scan start at the front.
-- It goes on from the front when it comes up short, and every 16th grant of a session
-- starts at the front: a task readied behind that point (a promoted key's task, a retry, a submit
-- that committed late) is passed over by at most that many of the session's grants, and a scan
-- from the front (a claim) takes it at once (the SPEC promises no FIFO order; priority orders
-- every scan).
-- Parameters: p_session_id; p_max 1-1000 and p_lease_ms 1000-3600000 (checked by the caller);
--   p_now; p_results: the caller's results (orbit_attempt_finish's p_results, checked there),
--   whose attempts ended at p_now hold the hand-off, or NULL (a claim, or no key handed off);
--   p_hinted: 1 = scans may start where the session's last one stopped (see above; a caller
--   that has just readied tasks of its own passes 0); p_credit: active-attempt charges of
--   the session's slot that the caller gives back after this grant (orbit_attempt_finish's
--   results, whose quota work comes last), counted as room; p_every_slot: 1 = charge under a lock
--   on every slot of the application at once (a retry after p_deferred, or a caller that then
--   gives back charges of other slots), 0 = the session's slot alone when its room takes the
--   grant; OUT p_deferred: 1 when the session's slot was tried and refused the charge, which
--   leaves that row locked whenever the update waited for it (InnoDB keeps the lock of a row an
--   update waited for and then did not change, even in READ COMMITTED), so every slot's row
--   cannot be taken after it without risking a deadlock: the grant rolled back to its savepoint
--   and the caller retries in a transaction of its own with p_every_slot = 1; OUT p_seq: the session's claim_seq
--   recorded on the granted attempts (0 = nothing written); OUT p_granted: how many attempts it
--   granted (a p_seq with none: only expiries or demotions were written); OUT p_handoffs: how
--   many of them took a hand-off's task (p_results); OUT p_room: the
--   application's room for more active attempts after the grant, as read at its start less what
--   it granted (NULL: no quota rows); OUT p_queue_limited: 1 when one of the session's queues
--   has a permit limit (as the grant began). orbit_attempt_finish uses both to decide, without a
--   statement of its own, whether its releases may have left work for other sessions. OUT
--   p_attempt_id: the last attempt granted (the only one when p_granted = 1), NULL when none:
--   callers read a grant of one by primary key.
-- Result: none. Signals: NOT_FOUND (no such session). A closed or draining session, or a revoked
--   credential, gets nothing.
-- Locks, in order: orbit_session row; per queue, the orbit_queue row when it has a permit limit;
--   the hand-off's and the candidates' orbit_task rows (FOR UPDATE SKIP LOCKED); then, per
--   candidate, orbit_attempt_grant's: the orbit_resource row of a keyed candidate (a hand-off's,
--   the caller's already), the new orbit_attempt row (its queue permit), the key's orbit_key_slot
--   and orbit_key_rate_log rows; orbit_application_quota slot rows last: the session's slot alone
--   when the grant fits its share and nothing expired, otherwise every slot of the application in
--   ascending slot order (one locking read) and the exact total checked (orbit_attempt_charge).
DROP PROCEDURE IF EXISTS orbit_task_grant;
DELIMITER $$
CREATE PROCEDURE orbit_task_grant(IN p_session_id BIGINT UNSIGNED, IN p_max INT, IN p_lease_ms INT,
                                  IN p_now DATETIME(6), IN p_results MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                  IN p_hinted TINYINT, IN p_credit INT,
                                  IN p_every_slot TINYINT, OUT p_deferred TINYINT, OUT p_seq BIGINT UNSIGNED,
                                  OUT p_granted INT, OUT p_handoffs INT, OUT p_room BIGINT, OUT p_queue_limited TINYINT,
                                  OUT p_attempt_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_expires DATETIME(6);
  DECLARE v_application_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_worker_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_keys TINYINT;
  DECLARE v_start TINYINT;
  DECLARE v_handlers TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_any_handler TINYINT;
  DECLARE v_session_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_credential_ok TINYINT DEFAULT 0;
  DECLARE v_seq BIGINT UNSIGNED;
  DECLARE v_queue_count INT DEFAULT 0;
  DECLARE v_budget BIGINT DEFAULT 0;
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_handoffs INT DEFAULT 0;
  DECLARE v_expired INT DEFAULT 0;
  DECLARE v_demoted INT DEFAULT 0;
  DECLARE v_visit INT DEFAULT 0;
  DECLARE v_position INT;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_paused TINYINT;
  -- 1 when the visited queue's namespace has a key policy (its keyed candidates read theirs).
  DECLARE v_policies TINYINT;
  DECLARE v_queue_max INT UNSIGNED;
  DECLARE v_queue_room BIGINT;
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_deadline DATETIME(6);
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_attempt_no INT UNSIGNED;
  -- One candidate's grant (orbit_attempt_grant): the attempt, NULL when none; 1 when it expired.
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_expired_one TINYINT;
  -- The last attempt granted (p_attempt_id).
  DECLARE v_last_attempt_id BIGINT UNSIGNED;
  DECLARE v_slot TINYINT UNSIGNED DEFAULT (p_session_id % 16);
  DECLARE v_charged INT DEFAULT 0;
  DECLARE v_slot_room BIGINT;
  -- Candidates are locked a batch at a time: as many as the room left (v_want), in one scan of
  -- the queue's ready lane; v_fetched counts what the scan found.
  DECLARE v_want BIGINT;
  DECLARE v_fetched INT;
  DECLARE v_any_ready TINYINT;
  -- 1 when one of the session's queues has a permit limit (p_queue_limited).
  DECLARE v_limited TINYINT DEFAULT 1;
  -- Where the session's last scan stopped (orbit_session.scan_*), and where this visit's scan
  -- starts: past (v_from_priority, v_from_task_id); v_from_task_id 0 = from the front.
  DECLARE v_scan_position INT UNSIGNED;
  DECLARE v_scan_priority TINYINT UNSIGNED;
  DECLARE v_scan_task_id BIGINT UNSIGNED;
  DECLARE v_from_priority TINYINT UNSIGNED;
  DECLARE v_from_task_id BIGINT UNSIGNED;
  DECLARE v_priority TINYINT UNSIGNED;
  DECLARE v_hinted TINYINT;
  DECLARE v_better TINYINT;
  -- 1 when the visit's next scan starts at the front (for a session with a handler list: at its
  -- handlers' first ready task, and v_from_head = 1 once it does).
  DECLARE v_front TINYINT DEFAULT 0;
  DECLARE v_from_head TINYINT DEFAULT 0;
  -- 1 once the hand-off readied a task (see there): the scans start at the front.
  DECLARE v_readied TINYINT DEFAULT 0;
  DECLARE v_lock BIGINT UNSIGNED;
  -- A subquery that takes the first entry of an index under an equality on an outer column also
  -- orders by that column: MySQL otherwise reads every entry of the prefix and sorts them. (Not
  -- by a column equal to a constant, such as the lane: MariaDB then reads them all.)
  -- FORCE INDEX, as in every probe of a ready lane: the queue id is a constant when the statement
  -- is planned, and the optimizer otherwise estimates the range in each index that starts with
  -- queue_id or lane (four of them, two B-tree dives each), for this and the visit's probe
  -- below.
  DECLARE c_candidates CURSOR FOR
    SELECT t.id, t.resource_id, t.deadline_at, t.namespace_id, t.attempt_count + 1, t.priority
      FROM orbit_task t FORCE INDEX (ix_task_dispatch)
     WHERE t.queue_id = v_queue_id AND t.lane = 'ready'
       AND (v_from_task_id = 0 OR t.priority > v_from_priority
            OR (t.priority = v_from_priority AND t.id > v_from_task_id))
       AND (v_keys OR t.resource_id = 0)
       AND (v_any_handler OR JSON_CONTAINS(v_handlers, JSON_QUOTE(t.handler)))
     ORDER BY t.priority, t.id
     LIMIT v_want
       FOR UPDATE SKIP LOCKED;
  -- The hand-off (p_results): the keys the caller's results released go to their next tasks,
  -- which the releases left blocked for this grant (orbit_attempt.handoff_task_id), where the
  -- session may take them: in one of its queues, not paused and without a permit limit (whose
  -- room is counted per visit), with no ready task of a better priority there: the ready lane's
  -- head, its best priority, read as one entry (a NOT EXISTS over `b.priority < t.priority` reads
  -- every ready entry of the task's priority and worse, since an outer column bounds no range of
  -- the subquery's index). A plain read (a locking one would lock every row it joins): each task
  -- is locked as it is taken.
  DECLARE c_handoffs CURSOR FOR
    SELECT t.id, t.resource_id, t.deadline_at, t.namespace_id, t.attempt_count + 1, t.queue_id,
           (SELECT 1 FROM orbit_key_policy p WHERE p.namespace_id = t.namespace_id LIMIT 1) IS NOT NULL
      FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r
      STRAIGHT_JOIN orbit_attempt x FORCE INDEX (PRIMARY) ON x.id = r.attempt_id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = x.handoff_task_id
      STRAIGHT_JOIN orbit_session_queue sq FORCE INDEX (PRIMARY) ON sq.session_id = p_session_id AND sq.queue_id = t.queue_id
      STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = t.queue_id
     WHERE x.session_id = p_session_id AND x.released_at = p_now AND x.handoff_task_id <> 0
       AND t.lane = 'blocked' AND t.blocked_reason = ''
       AND (v_any_handler OR JSON_CONTAINS(v_handlers, JSON_QUOTE(t.handler)))
       AND NOT q.paused AND q.max_active_attempts = 0
       AND COALESCE((SELECT b.priority FROM orbit_task b FORCE INDEX (ix_task_dispatch)
                      WHERE b.queue_id = t.queue_id AND b.lane = 'ready'
                      ORDER BY b.queue_id, b.priority
                      LIMIT 1) >= t.priority, 1)
     ORDER BY t.priority, t.id
     LIMIT v_budget;

  SET p_deferred = 0, p_seq = 0, p_granted = 0, p_handoffs = 0, p_room = NULL, p_queue_limited = 1, p_attempt_id = NULL;
  SET v_expires = DATE_ADD(p_now, INTERVAL p_lease_ms * 1000 MICROSECOND);
  SAVEPOINT orbit_task_grant;
  SELECT s.application_id, s.credential_id, s.worker_id, s.concurrency_keys, s.start_on_assign, s.handlers,
         s.state, s.claim_seq + 1, s.scan_position, s.scan_priority, s.scan_task_id
    INTO v_application_id, v_credential_id, v_worker_id, v_keys, v_start, v_handlers, v_session_state, v_seq,
         v_scan_position, v_scan_priority, v_scan_task_id
    FROM orbit_session s
   WHERE s.id = p_session_id
     FOR UPDATE;
  IF v_application_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: session not found';
  END IF;
  -- Plain reads from here on unless a lock is named: a subquery inside a locking statement, SET or
  -- IF is a locking read, and every session of a fleet shares its credential and quota rows.
  -- The credential, the quota's room, the session's slot's room (-1: it takes no charge on its
  -- own), the session's queue count and whether one of them has a permit limit: one statement.
  SELECT (SELECT COUNT(*) FROM orbit_credential c WHERE c.id = v_credential_id AND c.revoked_at IS NULL),
         (SELECT CAST(MIN(q.max_active_attempts) AS SIGNED) - CAST(SUM(q.active_attempts) AS SIGNED)
            FROM orbit_application_quota q WHERE q.application_id = v_application_id),
         (SELECT IF(q.checked_max_active_attempts = q.max_active_attempts,
                    CAST((q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16)) AS SIGNED) - CAST(q.active_attempts AS SIGNED), -1)
            FROM orbit_application_quota q WHERE q.application_id = v_application_id AND q.slot = v_slot),
         (SELECT COUNT(*) FROM orbit_session_queue sq WHERE sq.session_id = p_session_id),
         (SELECT COALESCE(MAX(q.max_active_attempts > 0), 0)
            FROM orbit_session_queue sq JOIN orbit_queue q ON q.id = sq.queue_id
           WHERE sq.session_id = p_session_id)
    INTO v_credential_ok, v_budget, v_slot_room, v_queue_count, v_limited;
  SET p_room = v_budget + p_credit, v_slot_room = v_slot_room + p_credit,
      v_budget = LEAST(p_max, GREATEST(COALESCE(v_budget + p_credit, 0), 0));
  IF v_session_state <> 'active' OR v_credential_ok = 0 OR v_budget = 0 THEN
    LEAVE body;
  END IF;
  SET v_any_handler = (v_handlers = '[]');

  -- The hand-off first (p_results; for a session that takes keyed tasks): each task carries its
  -- queue, and the cursor's LIMIT is the grant's room.
  IF p_results IS NOT NULL AND v_keys THEN
    OPEN c_handoffs;
    handoffs: LOOP
      SET v_task_id = NULL;
      fetch_handoff: BEGIN
        -- Scoped to the FETCH alone: no nested call's empty SELECT ... INTO can set it.
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_task_id = NULL;
        FETCH c_handoffs INTO v_task_id, v_resource_id, v_deadline, v_namespace_id, v_attempt_no,
                              v_queue_id, v_policies;
      END fetch_handoff;
      IF v_task_id IS NULL THEN
        LEAVE handoffs;
      END IF;
      -- The task, unless someone else holds it (a cancel or expiry is never waited for: the
      -- queue's next task of the key is readied instead, as a release readies it, for the
      -- scans below) or it was taken already (a result repeated in p_results: the key is full,
      -- and nothing is readied).
      SET v_lock = NULL;
      SELECT t.id INTO v_lock
        FROM orbit_task t
       WHERE t.id = v_task_id AND t.lane = 'blocked' AND t.blocked_reason = ''
         FOR UPDATE SKIP LOCKED;
      IF v_lock IS NULL THEN
        CALL orbit_key_promote(v_resource_id, v_queue_id, p_now);
        SET v_readied = 1;
        ITERATE handoffs;
      END IF;
      -- The task's own rules (its deadline, its key's permit) and the attempt.
      CALL orbit_attempt_grant(p_session_id, v_application_id, v_worker_id, v_start, v_seq,
                               v_task_id, v_namespace_id, v_queue_id, v_resource_id, v_deadline, v_attempt_no,
                               v_policies, p_now, v_expires, v_attempt_id, v_expired_one);
      IF v_attempt_id IS NOT NULL THEN
        SET v_granted = v_granted + 1, v_handoffs = v_handoffs + 1, v_last_attempt_id = v_attempt_id;
      ELSEIF v_expired_one THEN
        SET v_expired = v_expired + 1;
      ELSE
        SET v_demoted = v_demoted + 1;
      END IF;
    END LOOP handoffs;
    CLOSE c_handoffs;
  END IF;

  queues: WHILE v_visit < v_queue_count AND v_granted < v_budget DO
    -- Visit the session's queues from a rotating start position: visit v takes the queue at
    -- position (v - claim_seq) mod n (positions run 0 to n-1, see orbit_session_open), one probe
    -- of ux_session_queue_position, no sort.
    -- For a session of several queues an empty ready lane is common (a hot key's other queue, an
    -- idle queue) and opening the cursor costs a temporary table: the same statement probes the
    -- lane's head first. Not for one queue: a busy lane's head is full of entries just moved out
    -- of it, which the probe would pass over as the cursor does, and then the scan again.
    -- A scan from where the session's last one stopped (see the header) first needs to know that
    -- no better priority is ready: probed downwards from that priority, because a probe upwards
    -- from the front would pass over the entries the scan is to skip.
    SET v_queue_id = NULL, v_position = (v_visit + v_queue_count - v_seq % v_queue_count) % v_queue_count,
        v_hinted = p_hinted AND NOT v_readied AND v_scan_task_id > 0 AND v_position = v_scan_position
                   AND v_seq % 16 <> 0;
    SELECT sq.queue_id, q.paused, q.max_active_attempts,
           IF(v_queue_count > 1,
              EXISTS (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
                       WHERE t.queue_id = sq.queue_id AND t.lane = 'ready'), 1),
           IF(v_hinted,
              (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
                WHERE t.queue_id = sq.queue_id AND t.lane = 'ready' AND t.priority < v_scan_priority
                ORDER BY t.queue_id DESC, t.priority DESC, t.id DESC
                LIMIT 1) IS NOT NULL, 1),
           (SELECT 1 FROM orbit_key_policy p WHERE p.namespace_id = q.namespace_id LIMIT 1) IS NOT NULL
      INTO v_queue_id, v_paused, v_queue_max, v_any_ready, v_better, v_policies
      FROM orbit_session_queue sq
      JOIN orbit_queue q ON q.id = sq.queue_id
     WHERE sq.session_id = p_session_id AND sq.position = v_position;
    SET v_visit = v_visit + 1;
    IF v_queue_id IS NULL OR v_paused THEN
      ITERATE queues;
    END IF;
    SET v_queue_room = v_budget, v_front = NOT v_hinted OR v_better, v_from_head = 0,
        v_from_priority = v_scan_priority, v_from_task_id = v_scan_task_id;
    IF v_queue_max > 0 AND v_any_ready THEN
      SELECT q.max_active_attempts INTO v_queue_max FROM orbit_queue q WHERE q.id = v_queue_id FOR UPDATE;
      SELECT CAST(v_queue_max AS SIGNED) - COUNT(*) INTO v_queue_room
        FROM orbit_attempt a FORCE INDEX (ix_attempt_active_queue)
       WHERE a.released_at IS NULL AND a.queue_id = v_queue_id;
    END IF;

    -- One scan locks a batch of candidates (each scan passes over the rows other sessions hold
    -- and the entries they just moved out of the lane, so one per batch, not one per task); a
    -- batch that grants less than it found (expired, demoted, refused) is followed by another.
    candidates: WHILE v_any_ready AND v_queue_room > 0 AND v_granted < v_budget DO
      IF v_front THEN
        -- The front: the lane's, or the first ready task of the session's handlers (the best of
        -- each handler's first, one probe of ix_task_handler each; none: nothing here for this
        -- session). The scan starts at that task (past id - 1 within its priority). Each name
        -- is read in the handler column's character set and collation (a string column without
        -- them would be in the database's default, which may not hold the name; JSON_UNQUOTE is
        -- utf8mb3 on MariaDB 10.6), at most 192 characters: a longer name matches no task.
        SET v_front = 0, v_from_task_id = 0, v_from_head = 0;
        IF NOT v_any_handler THEN
          SET v_from_priority = NULL;
          SELECT t.priority, t.id INTO v_from_priority, v_from_task_id
            FROM JSON_TABLE(v_handlers, '$[*]' COLUMNS (name VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) h
            STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY)
              ON t.id = (SELECT b.id FROM orbit_task b FORCE INDEX (ix_task_handler)
                          WHERE b.queue_id = v_queue_id AND b.lane = 'ready'
                            AND b.handler = h.name AND (v_keys OR b.resource_id = 0)
                          ORDER BY b.handler, b.priority, b.id
                          LIMIT 1)
           ORDER BY t.priority, t.id
           LIMIT 1;
          IF v_from_priority IS NULL THEN
            LEAVE candidates;
          END IF;
          SET v_from_task_id = v_from_task_id - 1, v_from_head = 1;
        END IF;
      END IF;
      SET v_want = LEAST(v_queue_room, v_budget - v_granted), v_fetched = 0;
      OPEN c_candidates;
      batch: LOOP
        SET v_task_id = NULL;
        fetch_candidate: BEGIN
          -- Scoped to the FETCH alone: no nested call's empty SELECT ... INTO can set it.
          DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_task_id = NULL;
          FETCH c_candidates INTO v_task_id, v_resource_id, v_deadline, v_namespace_id, v_attempt_no, v_priority;
        END fetch_candidate;
        IF v_task_id IS NULL THEN
          LEAVE batch;
        END IF;
        -- Every candidate fetched leaves the ready lane (granted, expired or demoted below).
        SET v_fetched = v_fetched + 1,
            v_scan_position = v_position, v_scan_priority = v_priority, v_scan_task_id = v_task_id;
        -- The task's own rules (its deadline, its key's permit) and the attempt.
        CALL orbit_attempt_grant(p_session_id, v_application_id, v_worker_id, v_start, v_seq,
                                 v_task_id, v_namespace_id, v_queue_id, v_resource_id, v_deadline, v_attempt_no,
                                 v_policies, p_now, v_expires, v_attempt_id, v_expired_one);
        IF v_attempt_id IS NOT NULL THEN
          SET v_granted = v_granted + 1, v_queue_room = v_queue_room - 1, v_last_attempt_id = v_attempt_id;
        ELSEIF v_expired_one THEN
          SET v_expired = v_expired + 1;
        ELSE
          SET v_demoted = v_demoted + 1;
        END IF;
      END LOOP batch;
      CLOSE c_candidates;
      IF v_fetched < v_want THEN
        IF v_from_task_id > 0 AND NOT v_from_head THEN
          -- A scan from the session's last stop came up short: the rest from the front, which
          -- also finds what was readied behind that stop.
          SET v_front = 1;
          ITERATE candidates;
        END IF;
        -- The scan found fewer than it asked for: the queue has nothing more for this session.
        LEAVE candidates;
      END IF;
    END WHILE candidates;
  END WHILE queues;
  SET p_queue_limited = v_limited;
  -- The claim_seq step and where the scan stopped (undone below when nothing was written).
  UPDATE orbit_session s
     SET s.claim_seq = v_seq,
         s.scan_position = v_scan_position, s.scan_priority = v_scan_priority, s.scan_task_id = v_scan_task_id
   WHERE s.id = p_session_id;

  IF v_granted = 0 AND v_expired = 0 THEN
    IF v_demoted = 0 THEN
      -- Nothing granted, expired or demoted: undo the claim_seq step (a caller with nothing else
      -- to commit then writes nothing).
      ROLLBACK TO SAVEPOINT orbit_task_grant;
      LEAVE body;
    END IF;
    SET p_seq = v_seq;
    LEAVE body;
  END IF;
  -- The common case: the whole grant fits the session's slot (the attempts recorded it), as the
  -- slot's room read above says. Otherwise every slot's row, without trying this one first (see
  -- p_deferred).
  IF v_expired = 0 AND NOT p_every_slot AND v_slot_room >= v_granted THEN
    UPDATE orbit_application_quota q
     SET q.active_attempts = q.active_attempts + v_granted, q.updated_at = p_now
   WHERE q.application_id = v_application_id AND q.slot = v_slot
     AND q.checked_max_active_attempts = q.max_active_attempts
     AND q.active_attempts + v_granted <= (q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16)) + p_credit;
    SET v_charged = ROW_COUNT();
    IF v_charged = 0 THEN
      -- Charged meanwhile by another grant of the slot: see p_deferred.
      ROLLBACK TO SAVEPOINT orbit_task_grant;
      SET p_deferred = 1;
      LEAVE body;
    END IF;
  END IF;
  IF v_charged = 0 THEN
    -- Otherwise every slot's row, locked at once, the exact total checked, and the expired
    -- tasks' charges given back under that lock (orbit_attempt_charge).
    CALL orbit_attempt_charge(v_application_id, p_session_id, v_seq, v_slot, v_granted, v_expired, p_credit, p_now,
                              v_charged);
    IF NOT v_charged THEN
      -- Concurrent claims used the quota first: grant nothing this time.
      ROLLBACK TO SAVEPOINT orbit_task_grant;
      LEAVE body;
    END IF;
  END IF;
  SET p_seq = v_seq, p_granted = v_granted, p_handoffs = v_handoffs, p_room = p_room - v_granted, p_attempt_id = v_last_attempt_id;
END$$
DELIMITER ;
