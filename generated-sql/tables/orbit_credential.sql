-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_credential.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_credential: Bearer credentials: stored only as a SHA-256 hash, with scopes.
-- The token itself is shown once at creation and never stored. A credential belongs to one
-- application and environment; which namespaces and queues it reaches is in orbit_credential_scope.
CREATE TABLE IF NOT EXISTS orbit_credential (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  environment_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_environment.id',
  label VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'free-form description for operators',
  token_hash BINARY(32) NOT NULL COMMENT 'SHA-256 of the bearer token',
  token_hint CHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'first characters of the token, to recognise it',
  scopes SET('queues:manage','tasks:submit','tasks:read','workers:connect','workers:consume','metrics:read') NOT NULL COMMENT 'granted scopes',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  revoked_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC revocation time; NULL = active',
  PRIMARY KEY (id),
  UNIQUE KEY ux_credential_token (token_hash),
  KEY ix_credential_application (application_id, environment_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Bearer credentials (hashed)';
