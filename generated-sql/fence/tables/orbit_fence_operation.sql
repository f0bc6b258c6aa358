-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/fence/tables/orbit_fence_operation.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_fence_operation: Resource side: every accepted write, once per operation id (deduplication and audit).
-- id gives the acceptance order, so a checker can prove accepted tokens never went back.
CREATE TABLE IF NOT EXISTS orbit_fence_operation (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'acceptance order',
  fence_namespace VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'orbit_fence_register.fence_namespace',
  resource_key VARBINARY(764) NOT NULL COMMENT 'orbit_fence_register.resource_key',
  operation_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'stable identity of the operation (retries reuse it)',
  token BIGINT UNSIGNED NOT NULL COMMENT 'the token it was accepted with',
  caller VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'who wrote (the resource authenticates callers itself)',
  accepted_at DATETIME(6) NOT NULL COMMENT 'UTC acceptance time',
  PRIMARY KEY (id),
  UNIQUE KEY ux_fence_operation (fence_namespace, resource_key, operation_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Accepted fenced writes';
