-- orbit_key_policy: How many may hold a concurrency key, how often it may be granted, and what a
-- submit does when the key is busy, set per key or per key prefix within a namespace (the scope
-- of its keys).
-- on_busy: see the column; 'cancel_running' ends the key's oldest holder at once
-- (orbit_task_create). holder_limit and the rate are read by every grant of the key
-- (orbit_attempt_grant), so a change applies from the key's next grant: a lowered limit never ends a
-- held permit, it only holds back grants until fewer hold the key. on_busy is read by a submit.
-- A policy matches one key exactly (match_kind 'exact') or every key that starts with its
-- key_pattern ('prefix', e.g. 'customer/'). For a key, the longest matching pattern wins, and an
-- exact match wins over a prefix of the same length; a key that no policy matches behaves as
-- 'queue' with one holder and no rate. orbit_task_create reads the policy under the key's
-- orbit_resource row lock when it accepts a submitted task, so an on_busy change applies from the
-- next submit on: it never touches a held permit or a task already accepted. A plan's tasks
-- follow their plan's own on_busy instead (and the key's limit and rate like every task).
-- At most {{ c.key_policies_max }} policies per namespace (orbit_key_policy_set): the match reads
-- them all, by ux_key_policy.
CREATE TABLE IF NOT EXISTS orbit_key_policy (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'policy id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  match_kind ENUM('exact','prefix') NOT NULL COMMENT 'exact: the key itself; prefix: every key that starts with key_pattern',
  key_pattern VARBINARY({{ c.key_max_bytes }}) NOT NULL COMMENT 'the key, or the prefix, as exact UTF-8 bytes',
  on_busy ENUM('queue','reject','replace_waiting','cancel_running') NOT NULL DEFAULT 'queue' COMMENT 'a submit whose key is held or has waiting tasks: queue = waits; reject = refused (KEY_BUSY), nothing written; replace_waiting = the key''s waiting tasks in its queue end CANCELLED (REPLACED) and it waits; cancel_running = as replace_waiting, and the holder''s attempt ends CANCELLED at once',
  holder_limit SMALLINT UNSIGNED NOT NULL DEFAULT 1 COMMENT 'attempts that may hold the key at once, 1-{{ c.key_limit_max }}; read at grant time',
  rate_grants SMALLINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'at most this many grants of the key in any rate_per_seconds, 1-{{ c.rate_grants_max }}; 0 = no rate; read at grant time',
  rate_per_seconds INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the rate''s window in seconds, 1-{{ c.rate_window_max_seconds }}; 0 = no rate',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last change',
  PRIMARY KEY (id),
  UNIQUE KEY ux_key_policy (namespace_id, match_kind, key_pattern)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Per-key and per-prefix holder limits, rates and busy-key policies';
