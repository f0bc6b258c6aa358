-- orbit_plan_version: Immutable plan versions: the schedule and the task definition they fire.
-- Tasks fired from a version inherit its concurrency_key verbatim (no interpolation).
CREATE TABLE IF NOT EXISTS orbit_plan_version (
  plan_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_plan.id',
  version INT UNSIGNED NOT NULL COMMENT '1, 2, ... per plan',
  schedule_kind ENUM('interval','cron') NOT NULL COMMENT 'how schedule_spec is read',
  schedule_spec VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'interval seconds, or a cron expression (5 or 6 fields) read in timezone',
  timezone VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT 'cron plans: IANA time zone of the expression; empty for interval plans',
  catch_up ENUM('none','one','all') NOT NULL DEFAULT 'one' COMMENT 'missed slots: none fired, one fired (the oldest), or all fired (at most 100)',
  on_busy ENUM('queue','skip','replace_waiting') NOT NULL DEFAULT 'queue' COMMENT 'a slot while concurrency_key is busy: queue a task, skip it, or keep the plan''s waiting task',
  handler VARCHAR(191) {{ c.utf8 }} NOT NULL COMMENT 'task handler',
  handler_version VARCHAR(64) {{ c.utf8 }} NOT NULL COMMENT 'task handler version',
  payload_version VARCHAR(64) {{ c.utf8 }} NOT NULL COMMENT 'task payload version',
  payload MEDIUMTEXT {{ c.utf8 }} NOT NULL COMMENT 'task payload JSON',
  business_key VARCHAR(191) {{ c.utf8 }} NOT NULL DEFAULT '' COMMENT 'task business_key; empty = none',
  concurrency_key VARBINARY({{ c.key_max_bytes }}) NOT NULL DEFAULT '' COMMENT 'task concurrency_key, exact bytes; empty = none',
  priority TINYINT UNSIGNED NOT NULL DEFAULT 5 COMMENT 'task priority',
  max_attempts INT UNSIGNED NOT NULL DEFAULT 3 COMMENT 'task max_attempts',
  retry_base_ms INT UNSIGNED NOT NULL DEFAULT 1000 COMMENT 'task first retry delay',
  retry_max_ms INT UNSIGNED NOT NULL DEFAULT 300000 COMMENT 'task largest retry delay',
  retry_unknown TINYINT(1) NOT NULL DEFAULT 0 COMMENT 'task safe to retry after an unknown outcome',
  deadline_seconds INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'task total deadline from firing; 0 = none',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  PRIMARY KEY (plan_id, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Immutable plan versions';
