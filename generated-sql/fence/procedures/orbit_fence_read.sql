-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/fence/procedures/orbit_fence_read.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

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
