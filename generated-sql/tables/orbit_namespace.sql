-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_namespace.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_namespace: Namespaces: the scope of a concurrency_key (one permit per namespace and key).
CREATE TABLE IF NOT EXISTS orbit_namespace (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id (denormalised for scope checks)',
  environment_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_environment.id',
  name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'name, unique within the environment',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  PRIMARY KEY (id),
  UNIQUE KEY ux_namespace_name (environment_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Namespaces of environments';
