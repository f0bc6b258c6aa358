{% import "_macros.sql" as m %}
-- orbit_fence_read_slot: Resource side: read one slot's register of a key (highest token and value).
--
-- The register orbit_fence_write_slot writes for (p_key, p_slot): see there.
-- Parameters: p_namespace; p_key (exact bytes, at least 1; the key, the separator and the slot's
--   digits together at most {{ c.key_max_bytes }} bytes); p_slot 0-999.
-- Result (0 or 1 row): highest_token, value.
-- Signals: INVALID_ARGUMENT (p_slot outside 0-999, an empty key, a key too long for a slot's
--   register).
-- Locks: none.
CREATE PROCEDURE orbit_fence_read_slot(IN p_namespace TEXT {{ c.utf8 }}, IN p_key BLOB, IN p_slot BIGINT)
  READS SQL DATA
BEGIN
  {% call m::fence_slot_register_check() %};
  CALL orbit_fence_read(p_namespace, {% call m::fence_slot_register() %} /* p_key */);
END
