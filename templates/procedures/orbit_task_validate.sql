{% import "_macros.sql" as m %}
-- orbit_task_validate: Internal: apply the defaults of a task definition and enforce its rules.
--
-- One set of rules for everything that defines a task: orbit_task_submit, orbit_plan_create and
-- orbit_plan_version_create. The defaultable fields are INOUT: NULL becomes the default, so the
-- caller stores (and hashes) the effective values. Checked in parameter order; the first broken
-- rule is reported, its message starting with the field name.
-- Parameters:
{% call m::task_definition_doc() %}
-- Result: none.
-- Signals: INVALID_ARGUMENT (naming the field).
-- Locks: none.
CREATE PROCEDURE orbit_task_validate(
  IN p_handler TEXT {{ c.utf8 }},
  IN p_handler_version TEXT {{ c.utf8 }},
  IN p_payload_version TEXT {{ c.utf8 }},
  IN p_payload MEDIUMTEXT {{ c.utf8 }},
  INOUT p_business_key TEXT {{ c.utf8 }},
  IN p_concurrency_key BLOB,
  INOUT p_priority INT,
  INOUT p_max_attempts INT,
  INOUT p_retry_base_ms BIGINT,
  INOUT p_retry_max_ms BIGINT,
  INOUT p_retry_unknown TINYINT,
  INOUT p_deadline_seconds BIGINT)
  DETERMINISTIC NO SQL
BEGIN
  SET {% call m::task_defaults("p_") %};
  IF p_handler IS NULL OR CHAR_LENGTH(p_handler) NOT BETWEEN 1 AND 191 THEN
    {% call m::raise("INVALID_ARGUMENT", "handler must be 1-191 characters") %};
  END IF;
  IF p_handler_version IS NULL OR CHAR_LENGTH(p_handler_version) NOT BETWEEN 1 AND 64 THEN
    {% call m::raise("INVALID_ARGUMENT", "handler_version must be 1-64 characters") %};
  END IF;
  IF p_payload_version IS NULL OR CHAR_LENGTH(p_payload_version) NOT BETWEEN 1 AND 64 THEN
    {% call m::raise("INVALID_ARGUMENT", "payload_version must be 1-64 characters") %};
  END IF;
  IF p_payload IS NULL OR NOT JSON_VALID(p_payload) THEN
    {% call m::raise("INVALID_ARGUMENT", "payload must be valid JSON") %};
  END IF;
  IF CHAR_LENGTH(p_business_key) > 191 THEN
    {% call m::raise("INVALID_ARGUMENT", "business_key must be at most 191 characters") %};
  END IF;
  CALL orbit_key_validate(p_concurrency_key);
  IF p_priority NOT BETWEEN 0 AND 9 THEN
    {% call m::raise("INVALID_ARGUMENT", "priority must be between 0 and 9") %};
  END IF;
  IF p_max_attempts NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "max_attempts must be between 1 and 1000") %};
  END IF;
  IF p_retry_base_ms NOT BETWEEN 0 AND 86400000 OR p_retry_max_ms NOT BETWEEN 0 AND 604800000 THEN
    {% call m::raise("INVALID_ARGUMENT", "retry_base_ms must be 0-86400000 and retry_max_ms 0-604800000") %};
  END IF;
  IF p_retry_unknown NOT IN (0, 1) THEN
    {% call m::raise("INVALID_ARGUMENT", "retry_unknown must be true or false") %};
  END IF;
  IF p_deadline_seconds NOT BETWEEN 0 AND 315360000 THEN
    {% call m::raise("INVALID_ARGUMENT", "deadline_seconds must be between 1 and 315360000") %};
  END IF;
END
