-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_key_policy_set.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_policy_set: Create or change the policy for a key, or for a key prefix, of a namespace.
--
-- One policy per (namespace, match_kind, key_pattern): setting it again changes its fields. An
-- on_busy change applies to submits accepted after it, a limit or rate change from each key's
-- next grant (see orbit_key_policy); tasks already accepted and held permits are not touched.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the whole namespace);
--   p_namespace_id; p_match_kind 'exact' | 'prefix'; p_key_pattern (exact bytes, the rules of a
--   concurrency_key: m::key_error); p_on_busy 'queue' | 'reject' | 'replace_waiting' |
--   'cancel_running'; p_holder_limit 1-1000; p_rate_grants 0-1000 and
--   p_rate_per_seconds 0-86400, both 0 (no rate) or both above 0.
-- Result (one row): created TINYINT (1 = new, 0 = changed), then the policy columns: policy_id,
--   namespace_id, match_kind, key_pattern, on_busy, holder_limit, rate_grants, rate_per_seconds,
--   created_at, updated_at.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (a namespace the credential does not
--   reach as a whole: one answer for another tenant's), INVALID_ARGUMENT (naming the field),
--   QUOTA_EXCEEDED (the namespace already has 1000 policies).
-- Locks: the orbit_key_policy row (insert, or the existing one by ux_key_policy).
DROP PROCEDURE IF EXISTS orbit_key_policy_set;
DELIMITER $$
CREATE PROCEDURE orbit_key_policy_set(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED,
                                      IN p_match_kind TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_key_pattern BLOB,
                                      IN p_on_busy TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_holder_limit BIGINT,
                                      IN p_rate_grants BIGINT, IN p_rate_per_seconds BIGINT)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_whole TINYINT DEFAULT 0;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_policy_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_created TINYINT DEFAULT 0;
  DECLARE v_count INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'queues:manage', v_application_id, v_environment_id, v_credential_id);
  SELECT EXISTS (SELECT 1 FROM orbit_namespace n
                 WHERE n.id = p_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
                   AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '')) INTO v_whole;
  IF NOT v_whole THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: namespace not found';
  END IF;
  IF p_match_kind IS NULL OR p_match_kind NOT IN ('exact', 'prefix') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: match must be exact or prefix';
  END IF;
  SET v_message = REPLACE(CASE WHEN p_key_pattern IS NULL THEN 'concurrency_key must be a string or omitted, not null'
       WHEN p_key_pattern = '' THEN NULL
       WHEN NOT HEX(p_key_pattern) REGEXP '^([0-7][0-9A-F]|C[2-9A-F][89AB][0-9A-F]|D[0-9A-F][89AB][0-9A-F]|E0[AB][0-9A-F][89AB][0-9A-F]|E[1-9A-CEF][89AB][0-9A-F][89AB][0-9A-F]|ED[89][0-9A-F][89AB][0-9A-F]|F0[9AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F[1-3][89AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F48[0-9A-F][89AB][0-9A-F][89AB][0-9A-F])*$'
         THEN 'concurrency_key must be valid UTF-8'
       WHEN CHAR_LENGTH(CONVERT(p_key_pattern USING utf8mb4)) > 191
         THEN 'concurrency_key must be at most 191 characters'
       WHEN HEX(p_key_pattern) REGEXP '^(..)*(0[0-9A-F]|1[0-9A-F]|7F|C2[89][0-9A-F])'
         THEN 'concurrency_key must not contain control characters'
       WHEN HEX(p_key_pattern) REGEXP '^(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)'
            OR HEX(p_key_pattern) REGEXP '(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)$'
         THEN 'concurrency_key must not start or end with whitespace'
  END, 'concurrency_key', 'key');
  IF p_key_pattern = '' THEN
    SET v_message = 'key must be 1-191 characters';
  END IF;
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  IF p_on_busy IS NULL OR p_on_busy NOT IN ('queue', 'reject', 'replace_waiting', 'cancel_running') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: on_busy must be queue, reject, replace_waiting or cancel_running';
  END IF;
  IF p_holder_limit IS NULL OR p_holder_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;
  IF p_rate_grants IS NULL OR p_rate_grants NOT BETWEEN 0 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: rate.grants must be between 1 and 1000';
  END IF;
  IF p_rate_per_seconds IS NULL OR p_rate_per_seconds NOT BETWEEN 0 AND 86400 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: rate.per_seconds must be between 1 and 86400';
  END IF;
  IF (p_rate_grants = 0) <> (p_rate_per_seconds = 0) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: rate needs both grants and per_seconds';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT p.id INTO v_policy_id
    FROM orbit_key_policy p
   WHERE p.namespace_id = p_namespace_id AND p.match_kind = p_match_kind AND p.key_pattern = p_key_pattern
     FOR UPDATE;
  IF v_policy_id IS NULL THEN
    -- The bound of the match's read (orbit_task_create reads every policy of the namespace).
    SELECT COUNT(*) INTO v_count FROM orbit_key_policy p WHERE p.namespace_id = p_namespace_id;
    IF v_count >= 1000 THEN
      ROLLBACK;
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'QUOTA_EXCEEDED: the namespace already has 1000 key policies';
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
  SELECT v_created AS created, p.id AS policy_id, p.namespace_id, p.match_kind, p.key_pattern,
         p.on_busy, p.holder_limit, p.rate_grants, p.rate_per_seconds,
         p.created_at, p.updated_at
    FROM orbit_key_policy p
   WHERE p.id = v_policy_id;
END$$
DELIMITER ;
