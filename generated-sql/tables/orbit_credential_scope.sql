-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_credential_scope.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_credential_scope: The namespaces and queues a credential reaches.
-- queue_id = '' grants every queue of the namespace, present and future.
CREATE TABLE IF NOT EXISTS orbit_credential_scope (
  credential_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_credential.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT 'orbit_queue.id, or empty for all queues of the namespace',
  PRIMARY KEY (credential_id, namespace_id, queue_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Namespace and queue scope of credentials';
