-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_key_rate_log.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_rate_log: The recent grant times of a key with a rate, a ring of rate_grants rows per key.
-- A key whose policy allows at most G grants in any T seconds (orbit_key_policy.rate_grants,
-- rate_per_seconds) records grant number k (its token) at position k mod G, overwriting grant
-- k - G: so when grant k is decided, its position holds the time of grant k - G, which must be at
-- least T ago, and position (k - 1) mod G the previous grant's time, which it may not precede (so
-- grant times never go back). A fixed cost per grant, two primary-key reads and one write,
-- whatever G is. Rows are kept for reuse (at most G per key); a row whose token is not the one
-- expected (the rate changed, or was just set) is not used: the grant reads the time of grant
-- k - G from the key's attempts instead (ix_attempt_resource, G index entries). Every change
-- happens under the key's orbit_resource row lock, after it (templates/lock_order.md).
CREATE TABLE IF NOT EXISTS orbit_key_rate_log (
  resource_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_resource.id',
  position SMALLINT UNSIGNED NOT NULL COMMENT 'token mod the rate''s grants',
  token BIGINT UNSIGNED NOT NULL COMMENT 'the grant recorded here (its concurrency_token)',
  granted_at DATETIME(6) NOT NULL COMMENT 'UTC time of that grant (its attempt''s granted_at)',
  PRIMARY KEY (resource_id, position)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Recent grant times of rate-limited keys';
