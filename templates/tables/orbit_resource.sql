-- orbit_resource: One row per (namespace, concurrency_key): the highest token ever granted, and
-- the key permits. Never deleted or reset, or tokens would stop being monotonic. Every claim and
-- release of the key locks this row FOR UPDATE and advances version; a grant sets highest_token
-- + 1 (refused at 2^64 - 1 rather than wrapping) and takes the lowest free slot, a release frees
-- it. The permits are columns of this row, which every grant and release writes anyway, rather
-- than rows or a unique index of their own: a unique secondary index's duplicate check takes gap
-- locks at any isolation level, and two grants inserting beside one released entry deadlocked
-- there. Slot 0's holder is holder_attempt_id; a key whose policy allows more than one holder
-- (orbit_key_policy.holder_limit) keeps slots 1 and up in orbit_key_slot; holders counts them
-- all, and a grant needs holders < the limit. holder_limit is the limit as of the key's last
-- grant or submit (both read the policy), for the steps that read no policy (a promotion). A key
-- with a rate (orbit_key_policy.rate_grants per rate_per_seconds) records its grants in
-- orbit_key_rate_log; a grant that would exceed the rate leaves its task blocked and sets
-- rate_wake_at, when orbit_task_promote_due promotes the key's tasks again (ix_resource_wake).
CREATE TABLE IF NOT EXISTS orbit_resource (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id referenced by tasks, attempts and permits',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  concurrency_key VARBINARY({{ c.key_max_bytes }}) NOT NULL COMMENT 'the key as exact UTF-8 bytes (no collation, no padding)',
  highest_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'largest token granted; 0 = never granted',
  version BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'advanced by every claim and release',
  holder_attempt_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the key permit of slot 0: orbit_attempt.id of the attempt holding it (LEASED or RUNNING); 0 = free',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last grant or release',
  holders SMALLINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'attempts holding the key now (slot 0 and the held orbit_key_slot rows)',
  holder_limit SMALLINT UNSIGNED NOT NULL DEFAULT 1 COMMENT 'the key''s holder limit as its last grant or submit read it from orbit_key_policy',
  rate_wake_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time the key''s rate allows its next grant, while a grant waits for it; NULL = none',
  PRIMARY KEY (id),
  UNIQUE KEY ux_resource_key (namespace_id, concurrency_key),
  KEY ix_resource_wake (rate_wake_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Resource keys and their token high-water marks';
