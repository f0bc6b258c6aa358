-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_application_quota.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_application_quota: Per-application limits and the live counters checked against them.
-- The active-attempt counter covers LEASED and RUNNING attempts (a keyed attempt counts once
-- although it holds two permits); the incomplete-task counter covers every accepted task that has
-- not reached a terminal state (NEEDS_REVIEW included). Locked FOR UPDATE last in every
-- transaction that changes a counter, so lock order stays acyclic.
CREATE TABLE IF NOT EXISTS orbit_application_quota (
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  max_active_attempts INT UNSIGNED NOT NULL DEFAULT 10000 COMMENT 'limit on LEASED + RUNNING attempts',
  active_attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'current LEASED + RUNNING attempts',
  max_incomplete_tasks BIGINT UNSIGNED NOT NULL DEFAULT 10000000 COMMENT 'limit on accepted, non-terminal tasks',
  incomplete_tasks BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'current accepted, non-terminal tasks',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last counter change',
  PRIMARY KEY (application_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Application quotas and their counters';
