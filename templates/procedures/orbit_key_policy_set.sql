{% import "_macros.sql" as m %}
-- orbit_key_policy_set: Create or change the policy for a key, or for a key prefix, of a namespace.
--
-- One policy per (namespace, match_kind, key_pattern): setting it again changes its fields. An
-- on_busy change applies to submits accepted after it, a limit or rate change from each key's
-- next grant (see orbit_key_policy); tasks already accepted and held permits are not touched.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the whole namespace);
--   p_namespace_id; p_match_kind 'exact' | 'prefix'; p_key_pattern (exact bytes, the rules of a
--   concurrency_key: m::key_error); p_on_busy 'queue' | 'reject' | 'replace_waiting' |
--   'cancel_running'; p_holder_limit 1-{{ c.key_limit_max }}; p_rate_grants 0-{{ c.rate_grants_max }} and
--   p_rate_per_seconds 0-{{ c.rate_window_max_seconds }}, both 0 (no rate) or both above 0.
-- Result (one row): created TINYINT (1 = new, 0 = changed), then the policy columns: policy_id,
--   namespace_id, match_kind, key_pattern, on_busy, holder_limit, rate_grants, rate_per_seconds,
--   created_at, updated_at.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (a namespace the credential does not
--   reach as a whole: one answer for another tenant's), INVALID_ARGUMENT (naming the field),
--   QUOTA_EXCEEDED (the namespace already has {{ c.key_policies_max }} policies).
-- Locks: the orbit_key_policy row (insert, or the existing one by ux_key_policy).
CREATE PROCEDURE orbit_key_policy_set(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED,
                                      IN p_match_kind TEXT {{ c.ascii }}, IN p_key_pattern BLOB,
                                      IN p_on_busy TEXT {{ c.ascii }}, IN p_holder_limit BIGINT,
                                      IN p_rate_grants BIGINT, IN p_rate_per_seconds BIGINT)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_whole TINYINT DEFAULT 0;
  DECLARE v_message VARCHAR(128) {{ c.utf8 }};
  DECLARE v_policy_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_created TINYINT DEFAULT 0;
  DECLARE v_count INT;
  {% call m::rollback_on_error() %};

  CALL orbit_auth_check(p_token_hash, 'queues:manage', v_application_id, v_environment_id, v_credential_id);
  SELECT {% call m::namespace_whole("p_namespace_id") %} INTO v_whole;
  IF NOT v_whole THEN
    {% call m::raise("NOT_FOUND", "namespace not found") %};
  END IF;
  IF p_match_kind IS NULL OR p_match_kind NOT IN ('exact', 'prefix') THEN
    {% call m::raise("INVALID_ARGUMENT", "match must be exact or prefix") %};
  END IF;
  SET v_message = REPLACE({% call m::key_error("p_key_pattern") %}, 'concurrency_key', 'key');
  IF p_key_pattern = '' THEN
    SET v_message = 'key must be 1-{{ c.key_max_chars }} characters';
  END IF;
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  IF p_on_busy IS NULL OR p_on_busy NOT IN ('queue', 'reject', 'replace_waiting', 'cancel_running') THEN
    {% call m::raise("INVALID_ARGUMENT", "on_busy must be queue, reject, replace_waiting or cancel_running") %};
  END IF;
  IF p_holder_limit IS NULL OR p_holder_limit NOT BETWEEN 1 AND {{ c.key_limit_max }} THEN
    {% call m::raise("INVALID_ARGUMENT", "limit must be between 1 and " ~ c.key_limit_max) %};
  END IF;
  IF p_rate_grants IS NULL OR p_rate_grants NOT BETWEEN 0 AND {{ c.rate_grants_max }} THEN
    {% call m::raise("INVALID_ARGUMENT", "rate.grants must be between 1 and " ~ c.rate_grants_max) %};
  END IF;
  IF p_rate_per_seconds IS NULL OR p_rate_per_seconds NOT BETWEEN 0 AND {{ c.rate_window_max_seconds }} THEN
    {% call m::raise("INVALID_ARGUMENT", "rate.per_seconds must be between 1 and " ~ c.rate_window_max_seconds) %};
  END IF;
  IF (p_rate_grants = 0) <> (p_rate_per_seconds = 0) THEN
    {% call m::raise("INVALID_ARGUMENT", "rate needs both grants and per_seconds") %};
  END IF;

  {% call m::begin() %};
  SELECT p.id INTO v_policy_id
    FROM orbit_key_policy p
   WHERE p.namespace_id = p_namespace_id AND p.match_kind = p_match_kind AND p.key_pattern = p_key_pattern
     FOR UPDATE;
  IF v_policy_id IS NULL THEN
    -- The bound of the match's read (orbit_task_create reads every policy of the namespace).
    SELECT COUNT(*) INTO v_count FROM orbit_key_policy p WHERE p.namespace_id = p_namespace_id;
    IF v_count >= {{ c.key_policies_max }} THEN
      ROLLBACK;
      {% call m::raise("QUOTA_EXCEEDED", "the namespace already has " ~ c.key_policies_max ~ " key policies") %};
    END IF;
    INSERT INTO orbit_key_policy (namespace_id, match_kind, key_pattern, on_busy, holder_limit, rate_grants,
                                  rate_per_seconds, created_at, updated_at)
    VALUES (p_namespace_id, p_match_kind, p_key_pattern, p_on_busy, p_holder_limit, p_rate_grants,
            p_rate_per_seconds, v_now, v_now);
    SET v_policy_id = LAST_INSERT_ID(), v_created = 1;
  ELSE
    UPDATE orbit_key_policy p
       SET p.on_busy = p_on_busy, p.holder_limit = p_holder_limit, p.rate_grants = p_rate_grants,
           p.rate_per_seconds = p_rate_per_seconds, p.updated_at = v_now
     WHERE p.id = v_policy_id;
  END IF;
  COMMIT;
  SELECT v_created AS created, {% call m::key_policy_columns("p") %}
    FROM orbit_key_policy p
   WHERE p.id = v_policy_id;
END
