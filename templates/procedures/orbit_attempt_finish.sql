{% import "_macros.sql" as m %}
{#- What the results did, read from the rows once every result is recorded (see there): the
    acknowledgements and what the call ended, INTO the variables. `first`: the results as a FROM
    item, alias r, columns ord, attempt_id and first (1 for an attempt's first result). -#}
{% macro acks_and_ended(first) %}SELECT CONCAT('[', GROUP_CONCAT(JSON_OBJECT('attempt_id', r.attempt_id, 'task_id', a.task_id, 'task_state', t.state,
                                              'attempt_state', a.state,
                                              'duplicate', CAST(a.id IS NOT NULL AND NOT (r.first AND a.released_at = v_now) AS UNSIGNED),
                                              'code', IF(a.id IS NULL, 'NOT_FOUND', ''))
                                  ORDER BY r.ord SEPARATOR ','), ']'),
         MAX(IF(r.first AND a.released_at = v_now, a.id, NULL)),
         COALESCE(SUM(r.first AND a.released_at = v_now AND a.handoff_task_id <> 0), 0),
         COALESCE(MAX(r.first AND a.released_at = v_now AND t.state IN ('WAITING', 'RETRY_WAIT')), 0),
         COALESCE(SUM(r.first AND a.released_at = v_now AND a.quota_slot = v_session_slot), 0),
         COALESCE(SUM(r.first AND a.released_at = v_now AND a.quota_slot = v_session_slot
                      AND t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')), 0),
         -- A session's attempts all belong to its application.
         MAX(IF(r.first AND a.released_at = v_now, a.application_id, NULL))
    INTO v_acks, v_ended_id, v_handed_off, v_requeued, v_credit, v_credit_terminal, v_back_application_id
    FROM {{ first }}
    LEFT JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = r.attempt_id AND a.session_id = p_session_id
    LEFT JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id{% endmacro %}

{#- The attempts this call ended, each once (a derived table, to be given an alias): the results'
    attempts of this session released now (a repeated result's attempt was released by an earlier
    call, at another time). Read from the rows, so no list of them is kept while they are ended. -#}
{% let ended = "(SELECT DISTINCT x.id, x.task_id, x.queue_id, x.quota_slot
             FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r
             STRAIGHT_JOIN orbit_attempt x FORCE INDEX (PRIMARY) ON x.id = r.attempt_id
            WHERE x.session_id = p_session_id AND x.released_at = v_now)" %}
-- orbit_attempt_finish: Record a session's results for its attempts, each once, in one transaction; release their permits; grant the next tasks.
--
-- A worker's results that arrive together are confirmed together: one CALL, one commit, one
-- grant for the capacity they free (SPEC §10: fewer than two durable commits per task). Each
-- attempt is still confirmed on its own, in the order given: the first result ends the attempt
-- (see orbit_attempt_end for what each outcome does to the task and the permits); a repeated
-- result gets the same answer with duplicate = 1 and releases nothing again. A result arriving
-- after the attempt already ended another way (lease expiry recovery, cancel) is recorded in
-- late_result and changes no permit and no other attempt. A result for an attempt that does not
-- exist or belongs to another session changes nothing and is answered NOT_FOUND (one answer for
-- both); the other results of the call still count. A closed session's results are refused.
-- With p_claim_max > 0 the same transaction then grants the session up to p_claim_max tasks
-- (orbit_task_grant, as orbit_task_claim would): a key a result released goes to its next task
-- with this one commit, and the worker gets the assignment with the acknowledgement instead of
-- after a claim of its own (the hand-off the SPEC's hot-key target asks for). Such a release
-- readies nothing: it leaves the key's next task, the best head over its queues (priority, then
-- age), blocked for the grant to take (orbit_key_release with p_hand_off = 1, orbit_task_grant's
-- hand-off); a key the grant did not take is then readied in every queue with blocked tasks of
-- it, as any other release leaves it (orbit_key_promote_all).
-- Parameters: p_session_id; p_results: a JSON array of 1-1000 results
--   {"attempt_id": N, "outcome": "succeeded" | "failed" | "unknown", "retryable": true/false
--   (failed only; default false), "output": JSON or null, "error": JSON or null}; p_claim_max
--   0-1000 (the session's free capacity after these results; 0 = grant nothing); p_lease_ms
--   1000-3600000 (the grants' lease; ignored when p_claim_max = 0).
-- Result (one row per grant, or one row when nothing was granted): acks, a JSON array with one
--   object per result in input order {"attempt_id", "task_id", "task_state", "attempt_state",
--   "duplicate" (0/1), "code" ("" or NOT_FOUND; then nothing else is set)};
--   wake_queues, a JSON array of the queue ids where these results may have made work
--   claimable for other sessions that the grant did not take (unpaused queues with a ready task;
--   the caller wakes the sessions that serve them, and no other), the same in every row;
--   claim_again, 1 when the grant was left to a claim of the session's own (the session's quota
--   slot refused the charge: see orbit_task_grant's p_deferred), the same in every row;
--   then the grant as
--   orbit_task_claim returns it, all NULL in the row of no grant: attempt_id, attempt_no,
--   lease_expires_at, concurrency_token, key_slot, then the task columns.
-- Signals: INVALID_ARGUMENT (p_results, an outcome, p_claim_max, p_lease_ms), UNAUTHENTICATED (no
--   such session, or it is closed: its socket went away, the sweep closed it, or its credential
--   was revoked).
-- Session state: raises the connection's group_concat_max_len to 1 MB when it is lower (MySQL's
--   default is 1,024 bytes), for the acknowledgements; nothing else is left set.
-- Locks, in order: orbit_session row (when granting: the claim's first lock, taken first so that
--   finishing and claiming sessions lock in one order), then as orbit_attempt_end (every result's
--   orbit_attempt row, then per result its task, resource, promoted tasks); then as orbit_task_grant,
--   whose charge is the quota work it does; then, for each handed-off key the grant did not take,
--   the key's blocked head task per queue (orbit_key_promote_all, SKIP LOCKED); last, the
--   orbit_application_quota slot rows the ended attempts charged (their active attempts and their
--   tasks' incomplete charges go back, in one statement, each row by its primary key). The grant
--   counts the charges given back on the session's slot as room (p_credit), so the capacity
--   the results free is granted in the same transaction although it goes back after.
CREATE PROCEDURE orbit_attempt_finish(
  IN p_session_id BIGINT UNSIGNED,
  IN p_results MEDIUMTEXT {{ c.utf8 }},
  IN p_claim_max INT,
  IN p_lease_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_count INT DEFAULT 0;
  -- The first result's fault (1 attempt_id, 2 outcome, 3 retryable), NULL when none.
  DECLARE v_fault TINYINT;
  DECLARE v_resource_id BIGINT UNSIGNED;
  -- The acknowledgements (the result's acks array), read from the rows once every result is
  -- recorded (see there).
  DECLARE v_acks MEDIUMTEXT {{ c.utf8 }};
  -- What the results ended: how many attempts (orbit_attempt_end); read with the
  -- acknowledgements, the highest of them (the one, for the history of a call that ended one),
  -- how many of their keys went to a next task; then how many of those the grant took.
  DECLARE v_ended_count INT DEFAULT 0;
  DECLARE v_ended_id BIGINT UNSIGNED;
  DECLARE v_handed_off INT DEFAULT 0;
  DECLARE v_handoffs_taken INT DEFAULT 0;
  DECLARE v_wake TINYINT DEFAULT 0;
  DECLARE v_wake_queues TEXT {{ c.ascii }} DEFAULT '[]';
  DECLARE v_session_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_seq BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_granted INT DEFAULT 0;
  -- The application's room for more active attempts after the grant (from orbit_task_grant).
  DECLARE v_room BIGINT;
  -- The session's quota slot, which its grants charge (orbit_task_grant); how many of the ended
  -- attempts were charged to it, and how many of those ended their task (its incomplete-task
  -- charge goes back too); whether the grant was left to a claim of the session's own
  -- (orbit_task_grant's p_deferred).
  DECLARE v_session_slot TINYINT UNSIGNED DEFAULT {% call m::session_slot("p_session_id") %};
  DECLARE v_credit INT DEFAULT 0;
  DECLARE v_credit_terminal INT DEFAULT 0;
  DECLARE v_deferred TINYINT DEFAULT 0;
  DECLARE v_queue_limited TINYINT DEFAULT 1;
  -- The granted attempt when v_granted = 1 (from orbit_task_grant).
  DECLARE v_granted_id BIGINT UNSIGNED;
  -- What the releases may have left for other sessions (see the wake check at the end): a task
  -- back in the WAITING or RETRY_WAIT state; a released key the grant did not take, with a ready
  -- task.
  DECLARE v_requeued TINYINT DEFAULT 0;
  DECLARE v_key_left TINYINT DEFAULT 0;
  -- The ended attempts' application.
  DECLARE v_back_application_id BIGINT UNSIGNED DEFAULT NULL;
  -- 1 when no two results are for one attempt.
  DECLARE v_unique TINYINT DEFAULT 1;
  DECLARE v_done TINYINT;
  -- The keys this call handed off that still have room after the grant: the grant did not take
  -- their next task (opened after the grant; the results' attempts ended now, and plain reads of
  -- the resource rows, exact: we hold them).
  DECLARE c_released_keys CURSOR FOR
    SELECT DISTINCT e.resource_id
      FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) j
      STRAIGHT_JOIN orbit_attempt e FORCE INDEX (PRIMARY) ON e.id = j.attempt_id
      STRAIGHT_JOIN orbit_resource r FORCE INDEX (PRIMARY) ON r.id = e.resource_id
     WHERE e.session_id = p_session_id AND e.released_at = v_now AND e.handoff_task_id <> 0
       AND NOT {% call m::key_full("r", "v_now") %};
  {% call m::rollback_on_error() %};

  IF p_results IS NULL OR NOT JSON_VALID(p_results) OR JSON_TYPE(p_results) <> 'ARRAY'
     OR JSON_LENGTH(p_results) NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "results must be a JSON array of 1-1000 results") %};
  END IF;
  SET v_count = JSON_LENGTH(p_results);
  -- Every result is checked before anything is written, in one read of p_results: the first
  -- fault in input order is raised (within a result: attempt_id, then outcome, then retryable).
  SELECT MIN(r.ord * 4 + CASE
               WHEN COALESCE(JSON_TYPE(r.attempt_id), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR r.attempt_id < 1 THEN 1
               WHEN COALESCE(JSON_UNQUOTE(r.outcome), '') NOT IN ('succeeded', 'failed', 'unknown') THEN 2
               WHEN COALESCE(JSON_TYPE(r.retryable), 'BOOLEAN') NOT IN ('BOOLEAN', 'NULL') THEN 3
             END) % 4
    INTO v_fault
    FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY, attempt_id JSON PATH '$.attempt_id',
                    outcome JSON PATH '$.outcome', retryable JSON PATH '$.retryable')) r;
  IF v_fault = 1 THEN
    {% call m::raise("INVALID_ARGUMENT", "attempt_id must be a positive integer") %};
  ELSEIF v_fault = 2 THEN
    {% call m::raise("INVALID_ARGUMENT", "outcome must be succeeded, failed or unknown") %};
  ELSEIF v_fault = 3 THEN
    {% call m::raise("INVALID_ARGUMENT", "retryable must be true or false") %};
  END IF;
  IF p_claim_max IS NULL OR p_claim_max NOT BETWEEN 0 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "claim_max must be between 0 and 1000") %};
  END IF;
  IF p_claim_max > 0 AND (p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 3600000) THEN
    {% call m::raise("INVALID_ARGUMENT", "lease_ms must be between 1000 and 3600000") %};
  END IF;
  {% call m::begin() %};
  -- The session, checked where it is read: locked when granting (the claim's first lock).
  IF p_claim_max > 0 THEN
    SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id FOR UPDATE;
  ELSE
    SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id;
  END IF;
  IF v_session_state IS NULL OR v_session_state = 'closed' THEN
    {% call m::raise("UNAUTHENTICATED", "the session is closed") %};
  END IF;
  -- Every result is ended, or kept as a late result, where its attempt is locked.
  CALL orbit_attempt_end(p_session_id, p_results, v_now, p_claim_max > 0 /* p_hand_off */, v_ended_count);
  IF v_count > 1 THEN
    SELECT COUNT(DISTINCT r.attempt_id) = v_count
      INTO v_unique
      FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r;
  END IF;
  -- Every result is recorded: the acknowledgements, in input order, and what the call ended, in
  -- one read of the rows (locked above). A result ended its attempt when it is the first for the
  -- attempt in p_results and the attempt was released now; any other result for one of the
  -- session's attempts is a duplicate; a result for no attempt of the session is NOT_FOUND. The
  -- task states are read before the grant moves any task. (GROUP_CONCAT, the ordered aggregate
  -- both servers have, stops at group_concat_max_len: 1,024 bytes by default on MySQL, and 1,000
  -- acknowledgements take at most about 190 KB.)
  IF @@SESSION.group_concat_max_len < 1048576 THEN
    SET SESSION group_concat_max_len = 1048576;
  END IF;
  IF v_unique THEN
    {% call acks_and_ended("(SELECT j.ord, j.attempt_id, 1 AS first
            FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY, attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) j) r") %};
  ELSE
    -- Each attempt's first result, by a second read of p_results (no window function: MariaDB
    -- counts its row updates as Handler_update, the figure BENCHMARKS.md publishes as row writes).
    {% call acks_and_ended("(SELECT j.ord, j.attempt_id, j.ord = f.first_ord AS first
            FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY, attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) j
            STRAIGHT_JOIN (SELECT k.attempt_id, MIN(k.ord) AS first_ord
                             FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY,
                                             attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) k
                            GROUP BY k.attempt_id
                            ORDER BY NULL) f ON f.attempt_id = j.attempt_id) r") %};
  END IF;
  -- The history of every attempt ended above, in one insert (one per attempt would each wait on
  -- the AUTO-INC lock of the grants' bulk inserts), before the grant moves any of their tasks.
  -- One attempt (every hand-off of a hot key) by its id, without reading p_results again.
  IF v_ended_count = 1 THEN
    {% call m::attempt_end_events("(SELECT v_ended_id AS id) e", "v_now") %};
  ELSEIF v_ended_count > 0 THEN
    {% call m::attempt_end_events(ended ~ " e", "v_now") %};
  END IF;
  IF p_claim_max > 0 THEN
    -- The grant takes the keys these results handed off first (p_results, when there are any:
    -- their next tasks are still blocked). Its scans start where the session's last one stopped
    -- unless these results readied tasks (a retry), which may sit behind that point. The charges given back below
    -- (quota rows last, after the grant's rows) count as room for it: v_credit of them on the
    -- session's slot. An ended attempt charged to another slot (a grant that took every slot's
    -- row spread its charges) makes the grant lock every slot, so the give-back below waits for
    -- no quota row out of slot order.
    CALL orbit_task_grant(p_session_id, p_claim_max, p_lease_ms, v_now,
                          IF(v_handed_off > 0, p_results, NULL) /* p_results */, NOT v_requeued /* p_hinted */,
                          v_credit /* p_credit */, v_credit < v_ended_count /* p_every_slot */, v_deferred, v_seq,
                          v_granted, v_handoffs_taken /* p_handoffs */, v_room, v_queue_limited,
                          v_granted_id /* p_attempt_id */);
    -- The keys handed off above readied nothing (orbit_key_release). One whose next task the
    -- grant did not take still has room: it gets a ready task in each queue with blocked tasks
    -- of it, as any other release leaves it, for other sessions (v_key_left, for the wake
    -- below). Nothing to look for when the grant took every hand-off.
    IF v_handed_off > v_handoffs_taken THEN
      SET v_done = 0;
      OPEN c_released_keys;
      released_keys: LOOP
        fetch_key: BEGIN
          DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
          FETCH c_released_keys INTO v_resource_id;
        END fetch_key;
        IF v_done THEN
          LEAVE released_keys;
        END IF;
        SET v_key_left = 1;
        CALL orbit_key_promote_all(v_resource_id, v_now);
      END LOOP released_keys;
      CLOSE c_released_keys;
    END IF;
  END IF;
  -- The charges of the ended attempts go back last: quota rows after every other row. Usually
  -- every ended attempt charged the session's slot: that row alone, by the counts kept above.
  -- Otherwise each slot's, from the ended attempts' rows.
  IF v_ended_count > 0 AND v_credit = v_ended_count THEN
    UPDATE orbit_application_quota q
       SET q.active_attempts = q.active_attempts - v_credit,
           q.incomplete_tasks = q.incomplete_tasks - v_credit_terminal, q.updated_at = v_now
     WHERE q.application_id = v_back_application_id AND q.slot = v_session_slot;
  ELSEIF v_ended_count > 0 THEN
    {% call m::quota_give_back_ended("v_back_application_id", ended ~ " a", "v_now") %};
  END IF;
  -- Other sessions need waking only for what these releases made claimable and the grant above
  -- left: a ready task of a released key (known above when granting: a key handed off and not
  -- taken; a key of several holders or with a rate readied its tasks itself and is not looked at
  -- here: the server's periodic dispatch probe, orbit_task_ready_queues, finds them), room under
  -- an application quota that was full (conservatively: at most one attempt below its limit, as
  -- the grant read it), a task itself back in the ready lane (a retry without backoff), or room
  -- under a queue's permit limit. The last two concern only the ended attempts' queues, and need
  -- a statement, run only when a task went back to waiting or the session has a queue with a
  -- limit: most results end their task, and most queues have no limit.
  -- Which sessions to wake: those serving a queue of the application (a key, the quota) or of an
  -- ended attempt that now has a ready task; never another application's (wake_queues).
  IF v_ended_count > 0 AND (p_claim_max = 0 OR v_key_left OR COALESCE(v_room, 0) <= 1) THEN
    SET v_wake = 1;
    {% call m::application_ready_queues_into("v_wake_queues", "v_back_application_id") %};
  ELSEIF v_ended_count > 0 AND (v_requeued OR v_queue_limited) THEN
    -- One statement over the ended attempts, each lookup an index probe: they are joined first
    -- (STRAIGHT_JOIN) into a forced index, because an EXISTS over `lane = 'ready'` is otherwise
    -- materialised through ix_task_due, reading every ready task on every result. (SELECT ...
    -- INTO: a subquery in SET or IF would be a locking read.)
    SELECT EXISTS (SELECT 1
                     FROM {{ ended }} e
                     STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = e.task_id
                    WHERE t.lane = 'ready')
        OR EXISTS (SELECT 1
                     FROM {{ ended }} e
                     STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = e.queue_id
                    WHERE q.max_active_attempts > 0)
      INTO v_wake;
    IF v_wake THEN
      {% call m::ready_queues_into("v_wake_queues", "(SELECT DISTINCT e.queue_id FROM " ~ ended ~ " e) w") %};
    END IF;
  END IF;
  COMMIT;
  -- The acks on every row, the grants (v_granted, from orbit_task_grant) one per row in attempt
  -- order, or one row of NULL grant columns. Not one LEFT JOIN from a one-row table: its ORDER BY
  -- needed a temporary table, on disk because the task columns are TEXT (MariaDB's in-memory
  -- temporary tables hold no BLOB/TEXT), on every result.
  {% call m::grants_select("v_acks AS acks, v_wake_queues AS wake_queues, v_deferred AS claim_again, ") %}
  ELSE
    SELECT v_acks AS acks, v_wake_queues AS wake_queues, v_deferred AS claim_again,
           {% call m::grant_columns("a", "t") %}
      FROM (SELECT 1 AS one) AS ack
      -- No row has id 0: a primary-key probe that finds nothing (ON FALSE is a full scan).
      LEFT JOIN orbit_attempt a ON a.id = 0
      LEFT JOIN orbit_task t ON t.id = 0;
  END IF;
END
