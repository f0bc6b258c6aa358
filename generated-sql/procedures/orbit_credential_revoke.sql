-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_credential_revoke.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_credential_revoke: Revoke a credential: its token is UNAUTHENTICATED from now on.
--
-- Operator entry point, not reachable over HTTP: it takes no token. Idempotent: revoking again
-- keeps the first revoked_at. The credential's open worker sessions are closed in the same
-- transaction: their next frame (a renewal, start or result) is refused UNAUTHENTICATED and the
-- server ends the socket, so a result sent after revocation is not recorded; their attempts in
-- flight end by lease expiry (orbit_lease_recover) and their keys go to the next holder with a
-- larger token.
-- Parameters: p_credential_id.
-- Result (one row): credential_id, revoked_at DATETIME(6) (UTC).
-- Signals: NOT_FOUND.
-- Locks: the orbit_credential row, then the credential's open orbit_session rows
--   (ix_session_credential).
DROP PROCEDURE IF EXISTS orbit_credential_revoke;
DELIMITER $$
CREATE PROCEDURE orbit_credential_revoke(IN p_credential_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_revoked_at DATETIME(6) DEFAULT NULL;
  DECLARE v_found TINYINT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT 1, c.revoked_at INTO v_found, v_revoked_at FROM orbit_credential c WHERE c.id = p_credential_id FOR UPDATE;
  IF NOT v_found THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: credential not found';
  END IF;
  IF v_revoked_at IS NULL THEN
    SET v_revoked_at = v_now;
    UPDATE orbit_credential c SET c.revoked_at = v_now WHERE c.id = p_credential_id;
  END IF;
  UPDATE orbit_session s
     SET s.state = 'closed', s.closed_at = v_now
   WHERE s.credential_id = p_credential_id AND s.state IN ('active', 'draining');
  COMMIT;
  SELECT p_credential_id AS credential_id, v_revoked_at AS revoked_at;
END$$
DELIMITER ;
