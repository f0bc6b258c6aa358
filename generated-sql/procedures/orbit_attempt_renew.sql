-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_attempt_renew.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_attempt_renew: Extend active attempts' leases, and so their permits, each on its own, in one transaction.
--
-- An attempt keeps its token: renewing never grants anything new. An attempt whose lease has
-- already run out or that has ended is rejected; one that belongs to another session gets the
-- answer of one that does not exist (NOT_FOUND: ids of other sessions reveal nothing). A worker's
-- renewal message names all its attempts: one call and one commit for them all.
-- Parameters: p_session_id; p_attempt_ids: a JSON array of 1-1000 attempt ids; p_lease_ms
--   1000-3600000 (new expiry = now + lease).
-- Result (one row): answers, a JSON array with one object per id in input order {"attempt_id",
--   "renewed" (0/1), "code" ("" or LEASE_EXPIRED, NOT_FOUND, STATE_CONFLICT),
--   "lease_expires_at" (UTC, RFC 3339: the new expiry, or the old one when rejected; null when
--   not found or foreign)}.
-- Signals: INVALID_ARGUMENT (p_attempt_ids, p_lease_ms), UNAUTHENTICATED (the session is closed:
--   its socket went away, the sweep closed it, or its credential was revoked).
-- Locks, in order, per id: orbit_attempt row (its permits are its columns).
DROP PROCEDURE IF EXISTS orbit_attempt_renew;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_renew(IN p_session_id BIGINT UNSIGNED, IN p_attempt_ids TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_lease_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_count INT DEFAULT 0;
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_session_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_expires DATETIME(6);
  DECLARE v_code VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_answers MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_session_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_attempt_ids IS NULL OR NOT JSON_VALID(p_attempt_ids) OR JSON_TYPE(p_attempt_ids) <> 'ARRAY'
     OR JSON_LENGTH(p_attempt_ids) NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: attempt_ids must be a JSON array of 1-1000 ids';
  END IF;
  SET v_count = JSON_LENGTH(p_attempt_ids), v_i = 0;
  WHILE v_i < v_count DO
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']'))), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
       OR JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']')) < 1 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: attempt_ids must be positive integers';
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  SET v_session_state = NULL;
  SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id;
  IF v_session_state IS NULL OR v_session_state = 'closed' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: the session is closed';
  END IF;
  IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 3600000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: lease_ms must be between 1000 and 3600000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET v_i = 0;
  WHILE v_i < v_count DO
    SET v_attempt_id = CAST(JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']')) AS UNSIGNED),
        v_session_id = NULL, v_state = '', v_expires = NULL, v_code = '';
    SELECT a.session_id, a.state, a.lease_expires_at
      INTO v_session_id, v_state, v_expires
      FROM orbit_attempt a
     WHERE a.id = v_attempt_id
       FOR UPDATE;
    IF v_session_id IS NULL THEN
      SET v_code = 'NOT_FOUND';
    ELSEIF v_session_id <> p_session_id THEN
      SET v_code = 'NOT_FOUND', v_expires = NULL;
    ELSEIF v_state NOT IN ('LEASED', 'RUNNING') THEN
      SET v_code = 'STATE_CONFLICT';
    ELSEIF v_expires <= v_now THEN
      SET v_code = 'LEASE_EXPIRED';
    ELSE
      SET v_expires = DATE_ADD(v_now, INTERVAL p_lease_ms * 1000 MICROSECOND);
      UPDATE orbit_attempt a SET a.lease_expires_at = v_expires WHERE a.id = v_attempt_id;
    END IF;
    SET v_answers = CONCAT(v_answers, IF(v_i > 0, ',', ''),
                           JSON_OBJECT('attempt_id', CAST(v_attempt_id AS UNSIGNED), 'renewed', CAST(v_code = '' AS UNSIGNED),
                                       'code', v_code, 'lease_expires_at', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ'))),
        v_i = v_i + 1;
  END WHILE;
  COMMIT;
  SELECT CONCAT('[', v_answers, ']') AS answers;
END$$
DELIMITER ;
