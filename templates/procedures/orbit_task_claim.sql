{% import "_macros.sql" as m %}
-- orbit_task_claim: Grant up to p_max ready tasks to a worker session, in one transaction.
--
-- Runs orbit_task_grant (which tasks are granted, in which order, and what is skipped is described
-- there; each grant's own rules in orbit_attempt_grant) and commits. A claim that grants nothing writes nothing (no durable commit): idle sessions woken
-- by the dispatch signal cost the server no log flush.
-- Parameters: p_session_id; p_max 1-1000 (the session's free capacity); p_lease_ms 1000-3600000.
-- Result (0..p_max rows, one per grant):
--   attempt_id, attempt_no, lease_expires_at, concurrency_token (0 = no key), key_slot (the key's
--   permit slot, 0 to its holder limit - 1; 0 = no key), then the task columns:
{% call m::task_columns_doc() %}
-- Signals: NOT_FOUND (no such session), INVALID_ARGUMENT (p_max, p_lease_ms).
--   A closed or draining session, or a revoked credential, gets no rows.
-- Locks: as orbit_task_grant (orbit_session row first, orbit_application_quota slot rows last).
CREATE PROCEDURE orbit_task_claim(IN p_session_id BIGINT UNSIGNED, IN p_max INT, IN p_lease_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_seq BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_granted INT DEFAULT 0;
  -- (A claim hands nothing off: always 0.)
  DECLARE v_handoffs INT;
  DECLARE v_room BIGINT;
  DECLARE v_deferred TINYINT;
  DECLARE v_queue_limited TINYINT;
  DECLARE v_granted_id BIGINT UNSIGNED;
  {% call m::rollback_on_error() %};

  IF p_max IS NULL OR p_max NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "max must be between 1 and 1000") %};
  END IF;
  IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 3600000 THEN
    {% call m::raise("INVALID_ARGUMENT", "lease_ms must be between 1000 and 3600000") %};
  END IF;
  {% call m::begin() %};
  -- From the front of each ready lane: a claim on its own is how a woken session finds what
  -- other sessions readied.
  CALL orbit_task_grant(p_session_id, p_max, p_lease_ms, v_now, NULL /* p_results */, 0 /* p_hinted */,
                        0 /* p_credit */, 0 /* p_every_slot */, v_deferred, v_seq, v_granted, v_handoffs, v_room,
                        v_queue_limited, v_granted_id /* p_attempt_id */);
  IF v_deferred THEN
    -- The session's slot refused the charge and may stay locked (see orbit_task_grant): again,
    -- in a transaction of its own that locks every slot at once.
    ROLLBACK;
    {% call m::begin() %};
    CALL orbit_task_grant(p_session_id, p_max, p_lease_ms, v_now, NULL /* p_results */, 0 /* p_hinted */,
                          0 /* p_credit */, 1 /* p_every_slot */, v_deferred, v_seq, v_granted, v_handoffs, v_room,
                          v_queue_limited, v_granted_id /* p_attempt_id */);
  END IF;
  IF v_seq = 0 THEN
    ROLLBACK;
  ELSE
    COMMIT;
  END IF;
  {% call m::grants_select("") %}
  ELSE
    -- No grant, no rows: no row has id 0 (a primary-key probe that finds nothing).
    SELECT {% call m::grant_columns("a", "t") %}
      FROM orbit_attempt a
      JOIN orbit_task t ON t.id = a.task_id
     WHERE a.id = 0;
  END IF;
END
