{% import "_macros.sql" as m %}
-- orbit_task_validate: Internal: apply the defaults of a task definition and enforce its rules.
--
-- One set of rules for everything that defines a task: orbit_task_submit, orbit_plan_create and
-- orbit_plan_version_create (orbit_task_submit_many checks a batch with the same expression,
-- m::task_definition_error). The defaultable fields are INOUT: NULL becomes the default, so the
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
  DECLARE v_message VARCHAR(128) {{ c.utf8 }};
  SET {% call m::task_defaults("p_") %};
  SET v_message = {% call m::task_definition_error("p_") %};
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END
