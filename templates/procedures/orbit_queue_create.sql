{% import "_macros.sql" as m %}
-- orbit_queue_create: Create a queue in one of the credential's namespaces.
--
-- Parameters: p_token_hash BINARY(32) (scope queues:manage, with every queue of the namespace in
--   scope); p_namespace_id (NULL = the credential's only namespace); p_name 1-191 characters;
--   p_max_active_attempts (queue permits; 0 or NULL = unlimited); p_retention_seconds (how long
--   finished tasks are kept, {{ c.retention_min_seconds }}-{{ c.retention_max_seconds }}; NULL = the column default,
--   {{ c.retention_default_seconds }}); p_new_queue_id (32 lowercase hex digits from a random source; NULL = derive one).
-- Result (one row): the queue columns: queue_id, namespace_id, name, paused, max_active_attempts,
--   created_at, updated_at, then retention_seconds.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (namespace), INVALID_ARGUMENT,
--   STATE_CONFLICT (a queue of that name exists in the namespace).
-- Locks: the new orbit_queue row.
CREATE PROCEDURE orbit_queue_create(
  IN p_token_hash BINARY(32),
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_name TEXT {{ c.utf8 }},
  IN p_max_active_attempts BIGINT,
  IN p_retention_seconds BIGINT,
  IN p_new_queue_id TEXT {{ c.ascii }})
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_namespaces INT DEFAULT 0;
  DECLARE v_queue_id CHAR(32) {{ c.ascii }};
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  {% call m::rollback_on_error() %};

  CALL orbit_auth_check(p_token_hash, 'queues:manage', v_application_id, v_environment_id, v_credential_id);
  -- Namespaces where the credential reaches every queue; creating a queue needs that.
  SELECT COUNT(*), MIN(s.namespace_id) INTO v_namespaces, v_namespace_id
    FROM orbit_credential_scope s
   WHERE s.credential_id = v_credential_id AND s.queue_id = ''
     AND (p_namespace_id IS NULL OR s.namespace_id = p_namespace_id);
  IF v_namespaces = 0 THEN
    IF p_namespace_id IS NULL THEN
      {% call m::raise("PERMISSION_DENIED", "the credential reaches no namespace as a whole") %};
    END IF;
    {% call m::raise("NOT_FOUND", "namespace not found") %};
  END IF;
  IF v_namespaces > 1 THEN
    {% call m::raise("INVALID_ARGUMENT", "namespace_id is required: the credential reaches several namespaces") %};
  END IF;
  IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 191 THEN
    {% call m::raise("INVALID_ARGUMENT", "name must be 1-191 characters") %};
  END IF;
  IF COALESCE(p_max_active_attempts, 0) NOT BETWEEN 0 AND 1000000 THEN
    {% call m::raise("INVALID_ARGUMENT", "max_active_attempts must be between 0 and 1000000") %};
  END IF;
  IF p_retention_seconds IS NOT NULL
     AND p_retention_seconds NOT BETWEEN {{ c.retention_min_seconds }} AND {{ c.retention_max_seconds }} THEN
    {% call m::raise("INVALID_ARGUMENT", "retention_seconds must be between " ~ c.retention_min_seconds ~ " and " ~ c.retention_max_seconds) %};
  END IF;
  IF p_new_queue_id IS NOT NULL AND p_new_queue_id NOT REGEXP '^[0-9a-f]{32}$' THEN
    {% call m::raise("INVALID_ARGUMENT", "queue id must be 32 lowercase hex digits") %};
  END IF;
  SET v_queue_id = COALESCE(p_new_queue_id, CONVERT(LEFT(SHA2(CONCAT(UUID(), RAND(), v_namespace_id, p_name), 256), 32) USING ascii));
  {% call m::begin() %};
  INSERT INTO orbit_queue (id, application_id, environment_id, namespace_id, name, max_active_attempts,
                           retention_seconds, created_at, updated_at)
  VALUES (v_queue_id, v_application_id, v_environment_id, v_namespace_id, p_name, COALESCE(p_max_active_attempts, 0),
          COALESCE(p_retention_seconds, {{ c.retention_default_seconds }}), v_now, v_now);
  IF v_duplicate THEN
    ROLLBACK;
    {% call m::raise("STATE_CONFLICT", "a queue with this name already exists in the namespace") %};
  END IF;
  COMMIT;
  SELECT {% call m::queue_columns("q") %}, q.retention_seconds FROM orbit_queue q WHERE q.id = v_queue_id;
END
