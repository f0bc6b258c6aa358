-- orbit_key_permit: Resource-key permits: at most one per key, enforced by the primary key.
-- Granted with the attempt in the claim transaction and deleted in the transaction that releases
-- it, so the database itself refuses a second holder of one key.
CREATE TABLE IF NOT EXISTS orbit_key_permit (
  resource_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_resource.id: one permit per (namespace, key)',
  attempt_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_attempt.id holding the permit',
  concurrency_token BIGINT UNSIGNED NOT NULL COMMENT 'the token granted with it',
  granted_at DATETIME(6) NOT NULL COMMENT 'UTC grant time',
  expires_at DATETIME(6) NOT NULL COMMENT 'UTC lease expiry, kept equal to the attempt lease',
  PRIMARY KEY (resource_id),
  UNIQUE KEY ux_key_permit_attempt (attempt_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Resource-key permits of active attempts';
