-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_key_validate.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_validate: Internal: enforce the concurrency_key rules of SPEC §3 (SIGNALs if invalid).
--
-- '' means "no key". The rules are m::key_error's: valid UTF-8, 1-191
-- characters, no control characters, no leading or trailing Unicode White_Space, all checked on
-- the exact bytes.
-- Parameters: p_key BLOB (exact bytes; NULL is invalid: JSON null is not "omitted").
-- Signals: INVALID_ARGUMENT naming concurrency_key.
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_key_validate;
DELIMITER $$
CREATE PROCEDURE orbit_key_validate(IN p_key BLOB)
  DETERMINISTIC NO SQL
BEGIN
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT CASE WHEN p_key IS NULL THEN 'concurrency_key must be a string or omitted, not null'
       WHEN p_key = '' THEN NULL
       WHEN NOT HEX(p_key) REGEXP '^([0-7][0-9A-F]|C[2-9A-F][89AB][0-9A-F]|D[0-9A-F][89AB][0-9A-F]|E0[AB][0-9A-F][89AB][0-9A-F]|E[1-9A-CEF][89AB][0-9A-F][89AB][0-9A-F]|ED[89][0-9A-F][89AB][0-9A-F]|F0[9AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F[1-3][89AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F48[0-9A-F][89AB][0-9A-F][89AB][0-9A-F])*$'
         THEN 'concurrency_key must be valid UTF-8'
       WHEN CHAR_LENGTH(CONVERT(p_key USING utf8mb4)) > 191
         THEN 'concurrency_key must be at most 191 characters'
       WHEN HEX(p_key) REGEXP '^(..)*(0[0-9A-F]|1[0-9A-F]|7F|C2[89][0-9A-F])'
         THEN 'concurrency_key must not contain control characters'
       WHEN HEX(p_key) REGEXP '^(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)'
            OR HEX(p_key) REGEXP '(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)$'
         THEN 'concurrency_key must not start or end with whitespace'
  END;
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END$$
DELIMITER ;
