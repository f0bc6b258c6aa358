-- orbit_environment: Environments of an application (e.g. production, test).
CREATE TABLE IF NOT EXISTS orbit_environment (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  name VARCHAR(191) {{ c.utf8 }} NOT NULL COMMENT 'name, unique within the application',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  PRIMARY KEY (id),
  UNIQUE KEY ux_environment_name (application_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Environments of applications';
