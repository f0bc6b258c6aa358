{% import "_macros.sql" as m %}
-- orbit_key_validate: Internal: enforce the concurrency_key rules of SPEC §3 (SIGNALs if invalid).
--
-- '' means "no key". The rules are m::key_error's: valid UTF-8, 1-{{ c.key_max_chars }}
-- characters, no control characters, no leading or trailing Unicode White_Space, all checked on
-- the exact bytes.
-- Parameters: p_key BLOB (exact bytes; NULL is invalid: JSON null is not "omitted").
-- Signals: INVALID_ARGUMENT naming concurrency_key.
-- Locks: none.
CREATE PROCEDURE orbit_key_validate(IN p_key BLOB)
  DETERMINISTIC NO SQL
BEGIN
  DECLARE v_message VARCHAR(128) {{ c.utf8 }} DEFAULT {% call m::key_error("p_key") %};
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END
