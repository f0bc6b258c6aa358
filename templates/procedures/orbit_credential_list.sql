{% import "_macros.sql" as m %}
-- orbit_credential_list: List credentials for operators, in id order, a page at a time.
--
-- Operator entry point, not reachable over HTTP: it takes no token (like orbit_credential_create).
-- Never returns a token or its hash: only the 8-character hint the token starts with. Keyset
-- pagination: pass the last credential_id of a page as p_after_id for the next one; reads the
-- primary key in order (ix_credential_application when an application is named).
-- Parameters: p_application (NULL = every application; a name that does not exist lists nothing);
--   p_include_revoked 0/1; p_limit 1-1000; p_after_id (NULL = from the first).
-- Result (0..p_limit rows): credential_id, application, environment, label, token_hint, scopes
--   (comma-separated), namespaces (comma-separated names of the namespaces it reaches), queue_ids
--   (comma-separated; '' = every queue of those namespaces), created_at, revoked_at (NULL =
--   active).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks: none.
CREATE PROCEDURE orbit_credential_list(IN p_application VARCHAR(191) {{ c.utf8 }}, IN p_include_revoked TINYINT, IN p_limit INT, IN p_after_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and 1000") %};
  END IF;
  SELECT c.id AS credential_id, a.name AS application, e.name AS environment, c.label,
         c.token_hint, CAST(c.scopes AS CHAR) AS scopes,
         (SELECT GROUP_CONCAT(DISTINCT n.name ORDER BY n.name SEPARATOR ',')
            FROM orbit_credential_scope s JOIN orbit_namespace n ON n.id = s.namespace_id
           WHERE s.credential_id = c.id) AS namespaces,
         (SELECT COALESCE(GROUP_CONCAT(s.queue_id ORDER BY s.queue_id SEPARATOR ','), '')
            FROM orbit_credential_scope s
           WHERE s.credential_id = c.id AND s.queue_id <> '') AS queue_ids,
         c.created_at, c.revoked_at
    FROM orbit_credential c
    JOIN orbit_application a ON a.id = c.application_id
    JOIN orbit_environment e ON e.id = c.environment_id
   WHERE c.id > COALESCE(p_after_id, 0)
     AND (p_application IS NULL OR a.name = p_application)
     AND (p_include_revoked = 1 OR c.revoked_at IS NULL)
   ORDER BY c.id
   LIMIT p_limit;
END
