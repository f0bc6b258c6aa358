-- orbit_application: Tenants: the top of application -> environment -> namespace -> queue.
CREATE TABLE IF NOT EXISTS orbit_application (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  name VARCHAR(191) {{ c.utf8 }} NOT NULL COMMENT 'unique application name',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  PRIMARY KEY (id),
  UNIQUE KEY ux_application_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Applications (tenants)';
