-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_key_slot.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_slot: The permits of slots 1 and up of a key that more than one attempt may hold.
-- A key's slot 0 is its orbit_resource.holder_attempt_id; a key whose policy allows N holders
-- (orbit_key_policy.holder_limit) gets a row here for each further slot the first time a grant
-- needs it, and keeps it (never deleted: at most holder_limit - 1 rows per key). Every change
-- happens under the key's orbit_resource row lock, after it (templates/lock_order.md), so the rows
-- are read without locks of their own and a slot is never granted twice. A grant takes the lowest
-- free slot; the attempt records it (orbit_attempt.key_slot) and its release frees it.
CREATE TABLE IF NOT EXISTS orbit_key_slot (
  resource_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_resource.id',
  slot SMALLINT UNSIGNED NOT NULL COMMENT 'the slot, 1 to holder_limit - 1 (slot 0 is orbit_resource.holder_attempt_id)',
  attempt_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_attempt.id of the attempt holding the slot (LEASED or RUNNING); 0 = free',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last grant or release of the slot',
  PRIMARY KEY (resource_id, slot)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Key permits beyond the first, for keys with a holder limit above 1';
