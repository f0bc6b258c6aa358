{% import "_macros.sql" as m %}
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
--   separator and the slot's digits together at most {{ c.key_max_bytes }} bytes); p_slot 0-999
--   (the grant's key_slot); p_token > 0; p_operation_id 1-191 characters; p_caller; p_value (text
--   to store; NULL = touch, keep the stored value).
-- Result (one row): decision ('accepted' | 'duplicate' | 'stale'), highest_token (of the slot's
--   register, after the call).
-- Signals: INVALID_ARGUMENT (p_slot outside 0-999, an empty key, a key too long for a slot's
--   register, and orbit_fence_write's).
-- Locks, in order: orbit_fence_write's, on the slot's register: orbit_fence_register row (insert
--   or FOR UPDATE), orbit_fence_operation row.
CREATE PROCEDURE orbit_fence_write_slot(
  IN p_namespace TEXT {{ c.utf8 }},
  IN p_key BLOB,
  IN p_slot BIGINT,
  IN p_token BIGINT UNSIGNED,
  IN p_operation_id TEXT {{ c.utf8 }},
  IN p_caller TEXT {{ c.utf8 }},
  IN p_value MEDIUMTEXT {{ c.utf8 }})
  MODIFIES SQL DATA
BEGIN
  {% call m::fence_slot_register_check() %};
  CALL orbit_fence_write(p_namespace, {% call m::fence_slot_register() %} /* p_key */, p_token, p_operation_id, p_caller,
                         p_value);
END
