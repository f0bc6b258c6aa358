-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_validate.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_validate: Internal: apply the defaults of a task definition and enforce its rules.
--
-- One set of rules for everything that defines a task: orbit_task_submit, orbit_plan_create and
-- orbit_plan_version_create (orbit_task_submit_many checks a batch with the same expression,
-- m::task_definition_error). The defaultable fields are INOUT: NULL becomes the default, so the
-- caller stores (and hashes) the effective values. Checked in parameter order; the first broken
-- rule is reported, its message starting with the field name.
-- Parameters:
--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none
-- Result: none.
-- Signals: INVALID_ARGUMENT (naming the field).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_task_validate;
DELIMITER $$
CREATE PROCEDURE orbit_task_validate(
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  INOUT p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  INOUT p_priority INT,
  INOUT p_max_attempts INT,
  INOUT p_retry_base_ms BIGINT,
  INOUT p_retry_max_ms BIGINT,
  INOUT p_retry_unknown TINYINT,
  INOUT p_deadline_seconds BIGINT)
  DETERMINISTIC NO SQL
BEGIN
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  SET p_business_key = COALESCE(p_business_key, ''),
      p_priority = COALESCE(p_priority, 5),
      p_max_attempts = COALESCE(p_max_attempts, 3),
      p_retry_base_ms = COALESCE(p_retry_base_ms, 1000),
      p_retry_max_ms = COALESCE(p_retry_max_ms, 300000),
      p_retry_unknown = COALESCE(p_retry_unknown, 0),
      p_deadline_seconds = COALESCE(p_deadline_seconds, 0);
  SET v_message = COALESCE(CASE
       WHEN p_handler IS NULL OR CHAR_LENGTH(p_handler) NOT BETWEEN 1 AND 191
         THEN 'handler must be 1-191 characters'
       WHEN p_handler_version IS NULL OR CHAR_LENGTH(p_handler_version) NOT BETWEEN 1 AND 64
         THEN 'handler_version must be 1-64 characters'
       WHEN p_payload_version IS NULL OR CHAR_LENGTH(p_payload_version) NOT BETWEEN 1 AND 64
         THEN 'payload_version must be 1-64 characters'
       WHEN p_payload IS NULL OR NOT JSON_VALID(p_payload) THEN 'payload must be valid JSON'
       WHEN CHAR_LENGTH(p_business_key) > 191 THEN 'business_key must be at most 191 characters'
  END, CASE WHEN p_concurrency_key IS NULL THEN 'concurrency_key must be a string or omitted, not null'
       WHEN p_concurrency_key = '' THEN NULL
       WHEN NOT HEX(p_concurrency_key) REGEXP '^([0-7][0-9A-F]|C[2-9A-F][89AB][0-9A-F]|D[0-9A-F][89AB][0-9A-F]|E0[AB][0-9A-F][89AB][0-9A-F]|E[1-9A-CEF][89AB][0-9A-F][89AB][0-9A-F]|ED[89][0-9A-F][89AB][0-9A-F]|F0[9AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F[1-3][89AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F48[0-9A-F][89AB][0-9A-F][89AB][0-9A-F])*$'
         THEN 'concurrency_key must be valid UTF-8'
       WHEN CHAR_LENGTH(CONVERT(p_concurrency_key USING utf8mb4)) > 191
         THEN 'concurrency_key must be at most 191 characters'
       WHEN HEX(p_concurrency_key) REGEXP '^(..)*(0[0-9A-F]|1[0-9A-F]|7F|C2[89][0-9A-F])'
         THEN 'concurrency_key must not contain control characters'
       WHEN HEX(p_concurrency_key) REGEXP '^(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)'
            OR HEX(p_concurrency_key) REGEXP '(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)$'
         THEN 'concurrency_key must not start or end with whitespace'
  END, CASE
       WHEN p_priority NOT BETWEEN 0 AND 9 THEN 'priority must be between 0 and 9'
       WHEN p_max_attempts NOT BETWEEN 1 AND 1000 THEN 'max_attempts must be between 1 and 1000'
       WHEN p_retry_base_ms NOT BETWEEN 0 AND 86400000 OR p_retry_max_ms NOT BETWEEN 0 AND 604800000
         THEN 'retry_base_ms must be 0-86400000 and retry_max_ms 0-604800000'
       WHEN p_retry_unknown NOT IN (0, 1) THEN 'retry_unknown must be true or false'
       WHEN p_deadline_seconds NOT BETWEEN 0 AND 315360000
         THEN 'deadline_seconds must be between 1 and 315360000'
  END);
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END$$
DELIMITER ;
