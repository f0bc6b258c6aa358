-- orbit_queue_permit: Queue permits: one per LEASED or RUNNING attempt, deleted on release.
-- Every active attempt holds exactly one, so ix_queue_permit_expiry is also the index lease
-- recovery scans for expired attempts.
CREATE TABLE IF NOT EXISTS orbit_queue_permit (
  attempt_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_attempt.id holding the permit',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  expires_at DATETIME(6) NOT NULL COMMENT 'UTC lease expiry, kept equal to the attempt lease',
  PRIMARY KEY (attempt_id),
  KEY ix_queue_permit_queue (queue_id),
  KEY ix_queue_permit_expiry (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Queue permits of active attempts';
