{% import "_macros.sql" as m %}
{#- The filters every candidate range applies on top of the index it is read from. -#}
{% macro filters() %}t.id < v_before AND t.id > v_floor
                            AND (p_state IS NULL OR t.state = p_state)
                            AND (p_business_key IS NULL OR t.business_key = p_business_key)
                            AND (p_concurrency_key IS NULL OR t.concurrency_key = p_concurrency_key)
                            AND (p_queue_id IS NULL OR t.queue_id = p_queue_id){% endmacro %}
{#- A task's queue within the credential's queue scope (its namespace may hold unlisted queues). -#}
{% macro task_in_scope() %}EXISTS (SELECT 1 FROM orbit_credential_scope s
                                        WHERE s.credential_id = v_credential_id AND s.namespace_id = t.namespace_id
                                          AND s.queue_id IN ('', t.queue_id)){% endmacro %}
{#- merge_head() <SELECT t.id FROM orbit_task t WHERE ...> merge_tail(): merges the newest p_limit
    ids of one index range into v_ids, keeping the newest p_limit overall; once p_limit are kept,
    v_floor lets later ranges stop at the oldest of them. -#}
{% macro merge_head() %}SELECT COALESCE(JSON_ARRAYAGG(k.id), '[]'), MIN(k.id), COUNT(*) INTO v_ids, v_min, v_count
          FROM (SELECT u.id
                  FROM (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j
                        UNION ALL
                        ({% endmacro %}
{% macro merge_tail() %}
                          ORDER BY t.id DESC
                          LIMIT p_limit)) u
                 ORDER BY u.id DESC
                 LIMIT p_limit) k;
        IF v_count = p_limit THEN
          SET v_floor = v_min;
        END IF{% endmacro %}
-- orbit_task_list: List tasks newest first (id descending), filtered, a page at a time.
--
-- Only tasks of queues the credential reaches: p_queue_id (which must pass the queue check), or
-- every queue of its queue scope. Filters combine with AND; NULL = no filter. concurrency_key
-- matches exact bytes ('' = tasks without a key). Keyset pagination: pass the last task_id of a
-- page as p_before_id for the next one; ids never change, so pages neither repeat nor skip rows.
-- Every candidate comes from an index range read newest first, at most p_limit rows each, in one
-- read-only snapshot; the ranges are merged keeping the newest p_limit (a range stops early at
-- the oldest id already kept):
--   business_key given    -> ix_task_business, per namespace in scope;
--   concurrency_key given -> the key's resource row, then ix_task_key, per namespace in scope;
--   otherwise             -> ix_task_list, per queue in scope and per state (p_state or all nine).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_queue_id (NULL = all in scope);
--   p_state (a task state; NULL = any); p_business_key (NULL = any); p_concurrency_key (exact
--   bytes; '' = no key; NULL = any); p_limit 1-1000; p_before_id (NULL = from the newest).
-- Result (0..p_limit rows, task_id descending): the task columns:
{% call m::task_columns_doc() %}
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (p_queue_id), INVALID_ARGUMENT (p_state,
--   p_limit).
-- Locks: none (a consistent read).
CREATE PROCEDURE orbit_task_list(
  IN p_token_hash BINARY(32),
  IN p_queue_id TEXT {{ c.ascii }},
  IN p_state TEXT {{ c.ascii }},
  IN p_business_key TEXT {{ c.utf8 }},
  IN p_concurrency_key BLOB,
  IN p_limit BIGINT,
  IN p_before_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_before BIGINT UNSIGNED;
  DECLARE v_floor BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_ids LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_min BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_ns BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_next_ns BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) {{ c.ascii }} DEFAULT '';
  DECLARE v_next_queue CHAR(32) {{ c.ascii }};
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) {{ c.ascii }};
  DECLARE v_s INT;
  {% call m::rollback_on_error() %};

  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_queue_id IS NOT NULL THEN
    CALL orbit_auth_queue_check(p_token_hash, 'tasks:read', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  END IF;
  IF p_state IS NOT NULL AND p_state NOT IN ('WAITING', 'LEASED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED',
                                             'CANCELLED', 'NEEDS_REVIEW', 'EXPIRED') THEN
    {% call m::raise("INVALID_ARGUMENT", "state must be a task state such as WAITING, RUNNING or SUCCEEDED") %};
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and 1000") %};
  END IF;
  SET v_before = COALESCE(p_before_id, {{ c.token_max }});

  {% call m::begin_snapshot() %};
  IF p_business_key IS NOT NULL OR p_concurrency_key <> '' THEN
    namespaces: LOOP
      SET v_next_ns = NULL, v_resource_id = NULL;
      SELECT MIN(s.namespace_id) INTO v_next_ns
        FROM orbit_credential_scope s
       WHERE s.credential_id = v_credential_id AND s.namespace_id > v_ns
         AND (v_namespace_id IS NULL OR s.namespace_id = v_namespace_id);
      IF v_next_ns IS NULL THEN
        LEAVE namespaces;
      END IF;
      SET v_ns = v_next_ns;
      IF p_business_key IS NULL THEN
        SELECT r.id INTO v_resource_id
          FROM orbit_resource r
         WHERE r.namespace_id = v_ns AND r.concurrency_key = p_concurrency_key;
      END IF;
      IF p_business_key IS NOT NULL THEN
        {% call merge_head() %}SELECT t.id
                           FROM orbit_task t
                          WHERE t.namespace_id = v_ns AND t.business_key = p_business_key
                            AND {% call task_in_scope() %}
                            AND {% call filters() %}{% call merge_tail() %};
      ELSEIF v_resource_id IS NOT NULL THEN
        {% call merge_head() %}SELECT t.id
                           FROM orbit_task t
                          WHERE t.resource_id = v_resource_id
                            AND {% call task_in_scope() %}
                            AND {% call filters() %}{% call merge_tail() %};
      END IF;
    END LOOP namespaces;
  ELSE
    queues: LOOP
      SET v_next_queue = NULL;
      SELECT MIN(q.id) INTO v_next_queue
        FROM orbit_queue q
       WHERE q.application_id = v_application_id AND q.environment_id = v_environment_id AND q.id > v_queue_id
         AND (p_queue_id IS NULL OR q.id = p_queue_id)
         AND {% call m::queue_in_scope("q.namespace_id", "q.id", "v_credential_id") %};
      IF v_next_queue IS NULL THEN
        LEAVE queues;
      END IF;
      SET v_queue_id = v_next_queue, v_s = 0;
      states: WHILE v_s < 9 DO
        SET v_s = v_s + 1;
        SET v_state = ELT(v_s, 'WAITING', 'LEASED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED', 'CANCELLED',
                          'NEEDS_REVIEW', 'EXPIRED');
        IF p_state IS NOT NULL AND p_state <> v_state THEN
          ITERATE states;
        END IF;
        {% call merge_head() %}SELECT t.id
                           FROM orbit_task t
                          WHERE t.queue_id = v_queue_id AND t.state = v_state
                            AND {% call filters() %}{% call merge_tail() %};
      END WHILE states;
    END LOOP queues;
  END IF;
  SELECT {% call m::task_columns("t") %}
    FROM orbit_task t
   WHERE t.id IN (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j)
   ORDER BY t.id DESC;
  COMMIT;
END
