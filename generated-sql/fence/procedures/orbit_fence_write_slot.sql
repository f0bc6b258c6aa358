-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/fence/procedures/orbit_fence_write_slot.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

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
