-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_attempt.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_attempt: Attempts: one per grant of a task to a session, with its lease, token and permits.
-- An attempt holds its permits from granted_at until released_at (NULL while it holds them, that
-- is while it is LEASED or RUNNING). The permits are columns of the attempt, not rows of their own
-- (SPEC §4): the queue permit is the attempt itself while released_at is NULL
-- (ix_attempt_active_queue counts a queue's, ix_attempt_active_lease lists them by lease expiry
-- for recovery), and the key permit is its key's orbit_resource.holder_attempt_id (slot 0) or an
-- orbit_key_slot row (key_slot 1 and up, for keys that more than one attempt may hold).
-- concurrency_token is the key's token granted with this attempt (0 for a task without a key).
-- grant_version and release_version are the key's resource-row versions written by the grant and
-- the release: both happen under that row's lock, so they order all holders of one key exactly
-- (a checker proves no overlap with release_version(n) < grant_version(n+1), no clocks involved).
CREATE TABLE IF NOT EXISTS orbit_attempt (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'attempt id',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id',
  attempt_no INT UNSIGNED NOT NULL COMMENT '1 for the first attempt of the task',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id',
  resource_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_resource.id whose permit it holds; 0 = no key',
  concurrency_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'fencing token granted with the key permit; 0 = no key',
  grant_version BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_resource.version written by the grant; 0 = no key',
  release_version BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_resource.version written by the release; 0 = not released or no key',
  session_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_session.id it was granted to',
  worker_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the worker identity of that session',
  claim_seq BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the session claim batch that granted it; 0 once resumed by another session',
  quota_slot TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_application_quota.slot whose active_attempts it charged; its release decrements that slot',
  state ENUM('LEASED','RUNNING','SUCCEEDED','FAILED','CANCELLED','EXPIRED','UNKNOWN') NOT NULL COMMENT 'attempt state',
  granted_at DATETIME(6) NOT NULL COMMENT 'UTC time the permits were granted',
  lease_expires_at DATETIME(6) NOT NULL COMMENT 'UTC lease expiry; renew moves it',
  started_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time Start confirmed the execution right',
  released_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time the permits were released; NULL = still held',
  outcome ENUM('','succeeded','failed','unknown','expired','cancelled') NOT NULL DEFAULT '' COMMENT 'how it ended; empty while active',
  retryable TINYINT(1) NOT NULL DEFAULT 0 COMMENT 'the worker reported a retryable failure',
  output MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL COMMENT 'JSON output reported by the worker',
  error MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL COMMENT 'JSON error reported by the worker or recovery',
  late_result VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT 'outcome reported after the attempt had already ended; recorded, never acted on',
  key_slot SMALLINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the key permit''s slot it holds (0 to its key''s holder_limit - 1; orbit_key_slot for 1 and up); 0 for a task without a key',
  handoff_task_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_task.id of the key''s next task its release left blocked for the releasing transaction''s grant to take (orbit_key_release, a result that grants); 0 = none',
  PRIMARY KEY (id),
  UNIQUE KEY ux_attempt_task (task_id, attempt_no),
  KEY ix_attempt_session (session_id, claim_seq),
  KEY ix_attempt_resource (resource_id, id),
  KEY ix_attempt_active_queue (released_at, queue_id),
  KEY ix_attempt_active_lease (released_at, lease_expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Task attempts';
