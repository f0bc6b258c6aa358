{% import "_macros.sql" as m %}
-- orbit_plan_get: Read one plan with its current version, as its credential may see it.
--
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the plan's queue); p_plan_id.
-- Result (one row): the plan columns:
{% call m::plan_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (no such plan, or another tenant's).
-- Locks: none.
CREATE PROCEDURE orbit_plan_get(IN p_token_hash BINARY(32), IN p_plan_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  SELECT p.queue_id INTO v_queue_id FROM orbit_plan p WHERE p.id = p_plan_id;
  -- A missing plan and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    {% call m::raise("NOT_FOUND", "plan not found") %};
  END IF;
  SELECT {% call m::plan_columns("p", "v") %}
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = p_plan_id;
END
