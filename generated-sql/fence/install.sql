-- GENERATED FILE: do not edit. Rendered by `orbit gen` from every template under templates/fence/ (the resource-side fence).
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- Install in the RESOURCE's database (not Orbit's): mariadb resource_db < generated-sql/fence/install.sql
SET NAMES utf8mb4;
SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

-- ---- orbit_fence_operation (from templates/fence/tables/orbit_fence_operation.sql) ----
-- orbit_fence_operation: Resource side: every accepted write, once per operation id (deduplication and audit).
-- id gives the acceptance order, so a checker can prove accepted tokens never went back.
CREATE TABLE IF NOT EXISTS orbit_fence_operation (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'acceptance order',
  fence_namespace VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'orbit_fence_register.fence_namespace',
  resource_key VARBINARY(764) NOT NULL COMMENT 'orbit_fence_register.resource_key',
  operation_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'stable identity of the operation (retries reuse it)',
  token BIGINT UNSIGNED NOT NULL COMMENT 'the token it was accepted with',
  caller VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'who wrote (the resource authenticates callers itself)',
  accepted_at DATETIME(6) NOT NULL COMMENT 'UTC acceptance time',
  PRIMARY KEY (id),
  UNIQUE KEY ux_fence_operation (fence_namespace, resource_key, operation_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Accepted fenced writes';

-- ---- orbit_fence_register (from templates/fence/tables/orbit_fence_register.sql) ----
-- orbit_fence_register: Resource side: one register per (namespace, key) with the highest token it accepted.
-- Installed in the RESOURCE's own database. A write is accepted only with a token at least as
-- large as highest_token; accepting raises highest_token. Never reset: that would let stale
-- holders write again.
CREATE TABLE IF NOT EXISTS orbit_fence_register (
  fence_namespace VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the Orbit namespace the key belongs to',
  resource_key VARBINARY(764) NOT NULL COMMENT 'the concurrency_key, exact UTF-8 bytes',
  highest_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'largest token accepted; 0 = none yet',
  value MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL COMMENT 'the last accepted value',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last accepted write',
  PRIMARY KEY (fence_namespace, resource_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Fenced registers of a resource';

-- ---- orbit_fence_read (from templates/fence/procedures/orbit_fence_read.sql) ----
-- orbit_fence_read: Resource side: read a register (highest token and value).
--
-- Parameters: p_namespace; p_key (exact bytes).
-- Result (0 or 1 row): highest_token, value.
-- Signals: none. Locks: none.
DROP PROCEDURE IF EXISTS orbit_fence_read;
DELIMITER $$
CREATE PROCEDURE orbit_fence_read(IN p_namespace TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, IN p_key BLOB)
  READS SQL DATA
BEGIN
  SELECT r.highest_token, r.value
    FROM orbit_fence_register r
   WHERE r.fence_namespace = p_namespace AND r.resource_key = p_key;
END$$
DELIMITER ;

-- ---- orbit_fence_read_slot (from templates/fence/procedures/orbit_fence_read_slot.sql) ----
-- orbit_fence_read_slot: Resource side: read one slot's register of a key (highest token and value).
--
-- The register orbit_fence_write_slot writes for (p_key, p_slot): see there.
-- Parameters: p_namespace; p_key (exact bytes, at least 1; the key, the separator and the slot's
--   digits together at most 764 bytes); p_slot 0-999.
-- Result (0 or 1 row): highest_token, value.
-- Signals: INVALID_ARGUMENT (p_slot outside 0-999, an empty key, a key too long for a slot's
--   register).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_fence_read_slot;
DELIMITER $$
CREATE PROCEDURE orbit_fence_read_slot(IN p_namespace TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, IN p_key BLOB, IN p_slot BIGINT)
  READS SQL DATA
BEGIN
  IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND 999 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: slot must be 0-999 (the key_slot of the grant)';
  END IF;
  IF p_key IS NULL OR LENGTH(p_key) = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: key must be 1-764 bytes';
  END IF;
  IF LENGTH(p_key) + 1 + LENGTH(p_slot) > 764 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: key too long for a slot register: key bytes + 1 + slot digits must be at most 764';
  END IF;
  CALL orbit_fence_read(p_namespace, CONCAT(p_key, X'1F', p_slot) /* p_key */);
END$$
DELIMITER ;

-- ---- orbit_fence_write (from templates/fence/procedures/orbit_fence_write.sql) ----
-- orbit_fence_write: Resource side: in ONE transaction, reject a stale token, deduplicate, raise the highest token, record the write.
--
-- Installed in the resource's own database and called by whoever writes to the resource (grant
-- EXECUTE only to the callers allowed to write: the resource's own permission check). Decision:
-- an operation id already accepted with this token -> 'duplicate' (nothing written again); with
-- another token -> 'stale'; a token below highest_token -> 'stale'; otherwise 'accepted'. What a
-- highest-token check cannot prove: a stale holder that writes before any newer token has reached
-- the resource is accepted; a successor that must exclude it touches first (p_value NULL: raise
-- highest_token, keep the value), then reads, then writes.
-- Parameters: p_namespace 1-191 characters; p_key (exact bytes, 1-764 bytes);
--   p_token > 0; p_operation_id 1-191 characters; p_caller; p_value (text to store; NULL = touch,
--   keep the stored value).
-- Result (one row): decision ('accepted' | 'duplicate' | 'stale'), highest_token (after the call).
-- Signals: INVALID_ARGUMENT.
-- Locks, in order: orbit_fence_register row (insert or FOR UPDATE), orbit_fence_operation row.
DROP PROCEDURE IF EXISTS orbit_fence_write;
DELIMITER $$
CREATE PROCEDURE orbit_fence_write(
  IN p_namespace TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key BLOB,
  IN p_token BIGINT UNSIGNED,
  IN p_operation_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_caller TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_value MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_highest BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_previous BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_decision VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT 'accepted';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_namespace IS NULL OR CHAR_LENGTH(p_namespace) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: namespace must be 1-191 characters';
  END IF;
  IF p_key IS NULL OR LENGTH(p_key) NOT BETWEEN 1 AND 764 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: key must be 1-764 bytes';
  END IF;
  IF p_token IS NULL OR p_token = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: token must be a non-zero concurrency_token';
  END IF;
  IF p_operation_id IS NULL OR CHAR_LENGTH(p_operation_id) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: operation_id must be 1-191 characters';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
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
END$$
DELIMITER ;

-- ---- orbit_fence_write_slot (from templates/fence/procedures/orbit_fence_write_slot.sql) ----
-- orbit_fence_write_slot: Resource side: orbit_fence_write on one slot's register of a key (keys held by up to N attempts at once).
--
-- A key whose policy has limit N > 1 has up to N live holders, each with its own key_slot
-- (0..N-1) and token. One highest-token register per key would refuse every live holder whose
-- token is below the newest holder's; a register per slot does not: the holders of one slot
-- follow each other with strictly larger tokens, so a slot's register refuses a stale holder of
-- that slot once the slot's newer holder has written (touch first, then read, then write, as with
-- orbit_fence_write). The slot's register is the orbit_fence_register row whose resource_key is
-- p_key, byte 0x1F, the slot in decimal digits (a concurrency_key holds no control character, so
-- no key's own register is a slot's register); operation ids are per register. The decision,
-- deduplication and touch are orbit_fence_write's, which this calls. For limit 1 the slot is
-- always 0; a resource picks one kind of register per key and keeps it (the two never fence each
-- other).
-- Parameters: p_namespace 1-191 characters; p_key (exact bytes, at least 1; the key, the
--   separator and the slot's digits together at most 764 bytes); p_slot 0-999
--   (the grant's key_slot); p_token > 0; p_operation_id 1-191 characters; p_caller; p_value (text
--   to store; NULL = touch, keep the stored value).
-- Result (one row): decision ('accepted' | 'duplicate' | 'stale'), highest_token (of the slot's
--   register, after the call).
-- Signals: INVALID_ARGUMENT (p_slot outside 0-999, an empty key, a key too long for a slot's
--   register, and orbit_fence_write's).
-- Locks, in order: orbit_fence_write's, on the slot's register: orbit_fence_register row (insert
--   or FOR UPDATE), orbit_fence_operation row.
DROP PROCEDURE IF EXISTS orbit_fence_write_slot;
DELIMITER $$
CREATE PROCEDURE orbit_fence_write_slot(
  IN p_namespace TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_key BLOB,
  IN p_slot BIGINT,
  IN p_token BIGINT UNSIGNED,
  IN p_operation_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_caller TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_value MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND 999 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: slot must be 0-999 (the key_slot of the grant)';
  END IF;
  IF p_key IS NULL OR LENGTH(p_key) = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: key must be 1-764 bytes';
  END IF;
  IF LENGTH(p_key) + 1 + LENGTH(p_slot) > 764 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: key too long for a slot register: key bytes + 1 + slot digits must be at most 764';
  END IF;
  CALL orbit_fence_write(p_namespace, CONCAT(p_key, X'1F', p_slot) /* p_key */, p_token, p_operation_id, p_caller,
                         p_value);
END$$
DELIMITER ;

