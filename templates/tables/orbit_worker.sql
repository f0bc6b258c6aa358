-- orbit_worker: Worker process identities, with the fixed concurrency_keys registration.
-- The flag is set by the first hello of a worker_id and never changes: a later hello with another
-- value is a STATE_CONFLICT (an upgraded process must use a new identity).
CREATE TABLE IF NOT EXISTS orbit_worker (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  environment_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_environment.id',
  worker_id VARCHAR(191) {{ c.utf8 }} NOT NULL COMMENT 'the stable process identity from hello',
  concurrency_keys TINYINT(1) NOT NULL COMMENT '1 = may receive keyed tasks; fixed at registration',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC registration time',
  last_seen_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last hello',
  PRIMARY KEY (id),
  UNIQUE KEY ux_worker_identity (application_id, environment_id, worker_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Worker identities';
