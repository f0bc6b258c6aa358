{% import "_macros.sql" as m %}
-- orbit_fence_write: Resource side: in ONE transaction, reject a stale token, deduplicate, raise the highest token, record the write.
--
-- Installed in the resource's own database and called by whoever writes to the resource (grant
-- EXECUTE only to the callers allowed to write: the resource's own permission check). Decision:
-- an operation id already accepted with this token -> 'duplicate' (nothing written again); with
-- another token -> 'stale'; a token below highest_token -> 'stale'; otherwise 'accepted'. What a
-- highest-token check cannot prove: a stale holder that writes before any newer token has reached
-- the resource is accepted; a successor that must exclude it touches first (p_value NULL: raise
-- highest_token, keep the value), then reads, then writes.
-- Parameters: p_namespace 1-191 characters; p_key (exact bytes, 1-{{ c.key_max_bytes }} bytes);
--   p_token > 0; p_operation_id 1-191 characters; p_caller; p_value (text to store; NULL = touch,
--   keep the stored value).
-- Result (one row): decision ('accepted' | 'duplicate' | 'stale'), highest_token (after the call).
-- Signals: INVALID_ARGUMENT.
-- Locks, in order: orbit_fence_register row (insert or FOR UPDATE), orbit_fence_operation row.
CREATE PROCEDURE orbit_fence_write(
  IN p_namespace TEXT {{ c.utf8 }},
  IN p_key BLOB,
  IN p_token BIGINT UNSIGNED,
  IN p_operation_id TEXT {{ c.utf8 }},
  IN p_caller TEXT {{ c.utf8 }},
  IN p_value MEDIUMTEXT {{ c.utf8 }})
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_highest BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_previous BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_decision VARCHAR(16) {{ c.ascii }} DEFAULT 'accepted';
  {% call m::rollback_on_error() %};

  IF p_namespace IS NULL OR CHAR_LENGTH(p_namespace) NOT BETWEEN 1 AND 191 THEN
    {% call m::raise("INVALID_ARGUMENT", "namespace must be 1-191 characters") %};
  END IF;
  IF p_key IS NULL OR LENGTH(p_key) NOT BETWEEN 1 AND {{ c.key_max_bytes }} THEN
    {% call m::raise("INVALID_ARGUMENT", "key must be 1-764 bytes") %};
  END IF;
  IF p_token IS NULL OR p_token = 0 THEN
    {% call m::raise("INVALID_ARGUMENT", "token must be a non-zero concurrency_token") %};
  END IF;
  IF p_operation_id IS NULL OR CHAR_LENGTH(p_operation_id) NOT BETWEEN 1 AND 191 THEN
    {% call m::raise("INVALID_ARGUMENT", "operation_id must be 1-191 characters") %};
  END IF;

  {% call m::begin() %};
  -- Create-or-lock in one statement (no shared-then-exclusive upgrade between writers).
  INSERT INTO orbit_fence_register (fence_namespace, resource_key, highest_token, updated_at)
  VALUES (p_namespace, p_key, 0, v_now)
  ON DUPLICATE KEY UPDATE highest_token = highest_token;
  SELECT r.highest_token INTO v_highest
    FROM orbit_fence_register r
   WHERE r.fence_namespace = p_namespace AND r.resource_key = p_key
     FOR UPDATE;
  SELECT o.token INTO v_previous
    FROM orbit_fence_operation o
   WHERE o.fence_namespace = p_namespace AND o.resource_key = p_key AND o.operation_id = p_operation_id;
  IF v_previous IS NOT NULL THEN
    SET v_decision = IF(v_previous = p_token, 'duplicate', 'stale');
  ELSEIF p_token < v_highest THEN
    SET v_decision = 'stale';
  ELSE
    UPDATE orbit_fence_register r
       SET r.highest_token = p_token, r.value = COALESCE(p_value, r.value), r.updated_at = v_now
     WHERE r.fence_namespace = p_namespace AND r.resource_key = p_key;
    INSERT INTO orbit_fence_operation (fence_namespace, resource_key, operation_id, token, caller, accepted_at)
    VALUES (p_namespace, p_key, p_operation_id, p_token, COALESCE(p_caller, ''), v_now);
    SET v_highest = p_token;
  END IF;
  COMMIT;
  SELECT v_decision AS decision, v_highest AS highest_token;
END
