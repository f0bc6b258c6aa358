-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_idempotency.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_idempotency: One row per accepted submit command: (application, Idempotency-Key) -> task.
-- request_hash covers every field of the request (concurrency_key included), so the same key with
-- any other body is an IDEMPOTENCY_CONFLICT rather than a replay.
CREATE TABLE IF NOT EXISTS orbit_idempotency (
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  idempotency_key VARBINARY(255) NOT NULL COMMENT 'the Idempotency-Key header, exact bytes',
  request_hash BINARY(32) NOT NULL COMMENT 'SHA-256 of the canonical request',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id created by the first acceptance',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC acceptance time',
  PRIMARY KEY (application_id, idempotency_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Submit idempotency records';
