-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_attempt_charge.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_attempt_charge: Internal: charge a grant's new attempts to the active-attempt quota under a lock on every slot, in the caller's transaction.
--
-- The exact charge of a grant (see orbit_application_quota), when the granting session's slot
-- cannot take it alone: after a limit change, with deadline-expired tasks to give back, or when
-- the caller gives back charges on other slots (orbit_task_grant's p_every_slot). It locks every
-- slot of the application and admits the grant only while the total stays within the limit,
-- counting the p_credit charges the caller gives back on the session's slot after the grant as
-- room. The attempts go to the session's slot when it takes them all within its share (with that
-- credit), else all to the lowest slot that does, else each to the lowest slot below its share
-- (one exists while the total is below the limit); each attempt records its slot, where its
-- release gives the charge back. Once every slot is within its share of the current limit,
-- one-slot charges resume (checked_max_active_attempts). The p_expired tasks a grant found past
-- their deadline give back their incomplete-task charges on the session's slot, under the same
-- lock (only that counter's sum has a meaning).
-- Parameters: p_application_id; p_session_id and p_seq (the grant's attempts: the session's, of
--   claim_seq p_seq); p_slot (the session's quota slot); p_granted (how many attempts, 0 or
--   more); p_expired (how many tasks expired); p_credit; p_now.
-- Out: o_charged (1 = charged; 0 = the quota is full, nothing was charged: the caller rolls the
--   grant back).
-- Result: none. Signals: none.
-- Locks: orbit_application_quota slot rows: every slot of the application in ascending slot
--   order (one locking read). The grant's attempts are the caller's new orbit_attempt rows.
DROP PROCEDURE IF EXISTS orbit_attempt_charge;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_charge(
  IN p_application_id BIGINT UNSIGNED,
  IN p_session_id BIGINT UNSIGNED,
  IN p_seq BIGINT UNSIGNED,
  IN p_slot TINYINT UNSIGNED,
  IN p_granted INT,
  IN p_expired INT,
  IN p_credit INT,
  IN p_now DATETIME(6),
  OUT o_charged TINYINT)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_limit BIGINT UNSIGNED;
  DECLARE v_total BIGINT UNSIGNED;
  DECLARE v_checked TINYINT;
  DECLARE v_over INT;
  DECLARE v_charged INT DEFAULT 0;
  DECLARE v_charge_slot TINYINT UNSIGNED;
  DECLARE v_attempt_id BIGINT UNSIGNED DEFAULT 0;
  SET o_charged = 0;
  SELECT MIN(q.max_active_attempts), SUM(q.active_attempts),
         MIN(q.checked_max_active_attempts = q.max_active_attempts)
    INTO v_limit, v_total, v_checked
    FROM orbit_application_quota q
   WHERE q.application_id = p_application_id
     FOR UPDATE;
  IF v_total IS NULL OR (p_granted > 0 AND v_total + p_granted > v_limit + p_credit) THEN
    LEAVE body;
  END IF;
  SET o_charged = 1;
  IF p_expired > 0 THEN
    UPDATE orbit_application_quota q
       SET q.incomplete_tasks = q.incomplete_tasks - p_expired, q.updated_at = p_now
     WHERE q.application_id = p_application_id AND q.slot = p_slot;
  END IF;
  IF p_granted > 0 THEN
    -- The session's slot, else the lowest slot that takes them all: charges kept on the
    -- session's slot go back there, and the session's next grants take one slot's row.
    SELECT q.slot INTO v_charge_slot
      FROM orbit_application_quota q
     WHERE q.application_id = p_application_id
       AND q.active_attempts + p_granted <= (q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16)) + IF(q.slot = p_slot, p_credit, 0)
     ORDER BY q.slot <> p_slot, q.slot
     LIMIT 1;
    IF v_charge_slot IS NOT NULL THEN
      UPDATE orbit_application_quota q
         SET q.active_attempts = q.active_attempts + p_granted, q.updated_at = p_now
       WHERE q.application_id = p_application_id AND q.slot = v_charge_slot;
      IF v_charge_slot <> p_slot THEN
        UPDATE orbit_attempt a SET a.quota_slot = v_charge_slot
         WHERE a.session_id = p_session_id AND a.claim_seq = p_seq;
      END IF;
      SET v_charged = p_granted;
    END IF;
  END IF;
  -- Otherwise each attempt to the lowest slot below its share, recorded on the attempt.
  charge: WHILE v_charged < p_granted DO
    SELECT a.id INTO v_attempt_id
      FROM orbit_attempt a
     WHERE a.session_id = p_session_id AND a.claim_seq = p_seq AND a.id > v_attempt_id
     ORDER BY a.id
     LIMIT 1;
    SELECT q.slot INTO v_charge_slot
      FROM orbit_application_quota q
     WHERE q.application_id = p_application_id
       AND q.active_attempts < (q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16))
     ORDER BY q.slot
     LIMIT 1;
    UPDATE orbit_application_quota q
       SET q.active_attempts = q.active_attempts + 1, q.updated_at = p_now
     WHERE q.application_id = p_application_id AND q.slot = v_charge_slot;
    UPDATE orbit_attempt a SET a.quota_slot = v_charge_slot WHERE a.id = v_attempt_id;
    SET v_charged = v_charged + 1;
  END WHILE charge;
  IF v_checked = 0 THEN
    SELECT COUNT(*) INTO v_over
      FROM orbit_application_quota q
     WHERE q.application_id = p_application_id
       AND q.active_attempts > (q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16));
    IF v_over = 0 THEN
      -- Every slot is within its share of the current limit: one-slot charges may resume.
      UPDATE orbit_application_quota q
         SET q.checked_max_active_attempts = q.max_active_attempts
       WHERE q.application_id = p_application_id;
    END IF;
  END IF;
END$$
DELIMITER ;
