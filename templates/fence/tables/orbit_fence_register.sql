-- orbit_fence_register: Resource side: one register per (namespace, key) with the highest token it accepted.
-- Installed in the RESOURCE's own database. A write is accepted only with a token at least as
-- large as highest_token; accepting raises highest_token. Never reset: that would let stale
-- holders write again.
CREATE TABLE IF NOT EXISTS orbit_fence_register (
  fence_namespace VARCHAR(191) {{ c.utf8 }} NOT NULL COMMENT 'the Orbit namespace the key belongs to',
  resource_key VARBINARY({{ c.key_max_bytes }}) NOT NULL COMMENT 'the concurrency_key, exact UTF-8 bytes',
  highest_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'largest token accepted; 0 = none yet',
  value MEDIUMTEXT {{ c.utf8 }} NULL DEFAULT NULL COMMENT 'the last accepted value',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last accepted write',
  PRIMARY KEY (fence_namespace, resource_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Fenced registers of a resource';
