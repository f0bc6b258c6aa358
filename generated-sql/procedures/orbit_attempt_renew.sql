-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_attempt_renew.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_attempt_renew: Extend an active attempt's lease, and its queue and key permits with it.
--
-- The attempt keeps its token: renewing never grants anything new. An attempt whose lease has
-- already run out, that has ended, or that belongs to another session is rejected.
-- Parameters: p_session_id; p_attempt_id; p_lease_ms 1000-3600000 (new expiry = now + lease).
-- Result (one row): attempt_id, renewed TINYINT, code ('' or LEASE_EXPIRED, NOT_FOUND,
--   PERMISSION_DENIED, STATE_CONFLICT), lease_expires_at (the new expiry, or the old one when
--   rejected; NULL when not found or foreign).
-- Signals: INVALID_ARGUMENT (p_lease_ms).
-- Locks, in order: orbit_attempt row, orbit_queue_permit row, orbit_key_permit row.
DROP PROCEDURE IF EXISTS orbit_attempt_renew;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_renew(IN p_session_id BIGINT UNSIGNED, IN p_attempt_id BIGINT UNSIGNED, IN p_lease_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_session_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_expires DATETIME(6) DEFAULT NULL;
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_code VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 3600000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: lease_ms must be between 1000 and 3600000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT a.session_id, a.state, a.lease_expires_at, a.resource_id
    INTO v_session_id, v_state, v_expires, v_resource_id
    FROM orbit_attempt a
   WHERE a.id = p_attempt_id
     FOR UPDATE;
  IF v_session_id IS NULL THEN
    SET v_code = 'NOT_FOUND';
  ELSEIF v_session_id <> p_session_id THEN
    SET v_code = 'PERMISSION_DENIED';
  ELSEIF v_state NOT IN ('LEASED', 'RUNNING') THEN
    SET v_code = 'STATE_CONFLICT';
  ELSEIF v_expires <= v_now THEN
    SET v_code = 'LEASE_EXPIRED';
  ELSE
    SET v_expires = DATE_ADD(v_now, INTERVAL p_lease_ms * 1000 MICROSECOND);
    UPDATE orbit_attempt a SET a.lease_expires_at = v_expires WHERE a.id = p_attempt_id;
    UPDATE orbit_queue_permit p SET p.expires_at = v_expires WHERE p.attempt_id = p_attempt_id;
    IF v_resource_id <> 0 THEN
      UPDATE orbit_key_permit k SET k.expires_at = v_expires
       WHERE k.resource_id = v_resource_id AND k.attempt_id = p_attempt_id;
    END IF;
  END IF;
  COMMIT;
  SELECT p_attempt_id AS attempt_id, (v_code = '') AS renewed, v_code AS code,
         IF(v_code IN ('NOT_FOUND', 'PERMISSION_DENIED'), NULL, v_expires) AS lease_expires_at;
END$$
DELIMITER ;
