-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_resource.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_resource: One row per (namespace, concurrency_key): the highest token ever granted, and
-- the key permit. Never deleted or reset, or tokens would stop being monotonic. Every claim and
-- release of the key locks this row FOR UPDATE and advances version; a grant sets highest_token
-- + 1 (refused at 2^64 - 1 rather than wrapping) and holder_attempt_id, a release clears it. The
-- permit is a column of this row, which every grant and release writes anyway, rather than a row
-- or a unique index of its own: a unique secondary index's duplicate check takes gap locks at any
-- isolation level, and two grants inserting beside one released entry deadlocked there.
CREATE TABLE IF NOT EXISTS orbit_resource (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id referenced by tasks, attempts and permits',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  concurrency_key VARBINARY(764) NOT NULL COMMENT 'the key as exact UTF-8 bytes (no collation, no padding)',
  highest_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'largest token granted; 0 = never granted',
  version BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'advanced by every claim and release',
  holder_attempt_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the key permit: orbit_attempt.id of the attempt holding the key (LEASED or RUNNING); 0 = free',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last grant or release',
  PRIMARY KEY (id),
  UNIQUE KEY ux_resource_key (namespace_id, concurrency_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Resource keys and their token high-water marks';
