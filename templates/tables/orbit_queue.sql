-- orbit_queue: Queues of a namespace, with their pause switch and queue-permit limit.
-- A queue permit is held by every LEASED or RUNNING attempt (orbit_attempt.released_at NULL); when
-- max_active_attempts > 0 the claim counts the queue's permits under this row's lock.
-- retention_seconds bounds how long its finished tasks are kept (orbit_task_purge); a queue
-- created without one gets the column default, the same for every server.
CREATE TABLE IF NOT EXISTS orbit_queue (
  id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT '32 lowercase hex digits, random',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  environment_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_environment.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  name VARCHAR(191) {{ c.utf8 }} NOT NULL COMMENT 'name, unique within the namespace',
  paused TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1 = no new claims from this queue; in-flight attempts continue',
  max_active_attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'queue permits available; 0 = unlimited',
  retention_seconds INT UNSIGNED NOT NULL DEFAULT {{ c.retention_default_seconds }} COMMENT 'seconds a finished task (SUCCEEDED, FAILED, CANCELLED, EXPIRED) is kept after finished_at; then orbit_task_purge deletes it with its attempts, history and idempotency receipt',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last change',
  PRIMARY KEY (id),
  UNIQUE KEY ux_queue_name (namespace_id, name),
  KEY ix_queue_application (application_id, environment_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Queues';
