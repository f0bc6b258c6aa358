{% import "_macros.sql" as m %}
-- orbit_key_validate: Internal: enforce the concurrency_key rules of SPEC §3 (SIGNALs if invalid).
--
-- '' means "no key". Otherwise: valid UTF-8, 1-{{ c.key_max_chars }} characters, no control
-- characters (Unicode Cc: U+0000-U+001F, U+007F-U+009F), no leading or trailing Unicode White_Space
-- (U+0020, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000; the other
-- White_Space characters are Cc). Checked on the hex of the exact bytes, so no collation, case
-- folding or normalisation is involved.
-- Parameters: p_key BLOB (exact bytes; NULL is invalid: JSON null is not "omitted").
-- Signals: INVALID_ARGUMENT naming concurrency_key.
-- Locks: none.
CREATE PROCEDURE orbit_key_validate(IN p_key BLOB)
  DETERMINISTIC NO SQL
BEGIN
  IF p_key IS NULL THEN
    {% call m::raise("INVALID_ARGUMENT", "concurrency_key must be a string or omitted, not null") %};
  END IF;
  IF p_key <> '' THEN
    -- The round trip catches malformed sequences; MariaDB's conversion lets UTF-16 surrogates
    -- (ED A0-BF xx, not UTF-8) through, so they are refused by their bytes.
    IF CAST(CONVERT(p_key USING utf8mb4) AS BINARY) <> p_key OR HEX(p_key) REGEXP '^(..)*ED[AB]' THEN
      {% call m::raise("INVALID_ARGUMENT", "concurrency_key must be valid UTF-8") %};
    END IF;
    IF CHAR_LENGTH(CONVERT(p_key USING utf8mb4)) > {{ c.key_max_chars }} THEN
      {% call m::raise("INVALID_ARGUMENT", "concurrency_key must be at most 191 characters") %};
    END IF;
    -- `^(..)*` keeps the match on a byte boundary of the hex string.
    IF HEX(p_key) REGEXP '^(..)*(0[0-9A-F]|1[0-9A-F]|7F|C2[89][0-9A-F])' THEN
      {% call m::raise("INVALID_ARGUMENT", "concurrency_key must not contain control characters") %};
    END IF;
    IF HEX(p_key) REGEXP '^(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)'
       OR HEX(p_key) REGEXP '(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)$' THEN
      {% call m::raise("INVALID_ARGUMENT", "concurrency_key must not start or end with whitespace") %};
    END IF;
  END IF;
END
