{% import "_macros.sql" as m %}
-- orbit_plan_list: List the plans a credential reaches, in id order, a page at a time.
--
-- Only plans of queues of the credential's application and environment within its queue scope
-- (a namespace-wide grant or the listed queues); p_queue_id narrows to one queue, which must pass
-- the queue check. Keyset pagination: pass the last plan_id of a page as p_after_id for the next
-- one. Cost: the namespaces of the credential's scope are read from ux_plan_name, so a page reads
-- at most the plans of those namespaces (never another tenant's).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_queue_id (NULL = every queue in
--   scope); p_limit 1-1000; p_after_id (NULL = from the first plan).
-- Result (0..p_limit rows, plan_id order): the plan columns:
{% call m::plan_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (p_queue_id), INVALID_ARGUMENT (p_limit).
-- Locks: none.
CREATE PROCEDURE orbit_plan_list(IN p_token_hash BINARY(32), IN p_queue_id TEXT {{ c.ascii }}, IN p_limit BIGINT,
                                 IN p_after_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_queue_id IS NOT NULL THEN
    CALL orbit_auth_queue_check(p_token_hash, 'tasks:read', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and 1000") %};
  END IF;
  SELECT {% call m::plan_columns("p", "v") %}
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.namespace_id IN (SELECT n.id
                              FROM orbit_credential_scope s
                              JOIN orbit_namespace n ON n.id = s.namespace_id
                             WHERE s.credential_id = v_credential_id AND n.application_id = v_application_id
                               AND n.environment_id = v_environment_id)
     AND p.id > COALESCE(p_after_id, 0)
     AND (p_queue_id IS NULL OR p.queue_id = p_queue_id)
     AND {% call m::queue_in_scope("p.namespace_id", "p.queue_id", "v_credential_id") %}
   ORDER BY p.id
   LIMIT p_limit;
END
