-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/fence/procedures/orbit_fence_read_slot.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

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
