-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_plan.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_plan: Plans: named schedules that fire tasks into a queue from their current version.
-- An interval plan's next slot is computed in SQL. A cron plan's is computed by the server
-- (src/schedule.rs: the expression in its time zone): firing sets next_fire_at NULL and
-- schedule_after to the slot, and orbit_plan_schedule_set stores the next one.
CREATE TABLE IF NOT EXISTS orbit_plan (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'plan id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id the tasks go to',
  name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'name, unique within the namespace',
  current_version INT UNSIGNED NOT NULL COMMENT 'orbit_plan_version.version that fires',
  paused TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1 = does not fire',
  next_fire_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time of the next scheduled slot; NULL = a cron plan whose next slot the server has yet to compute (after schedule_after)',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last change',
  schedule_after DATETIME(6) NULL DEFAULT NULL COMMENT 'cron plans: the next slot is the first fire time after this UTC time (the fired slot, or when it was created, resumed or got a new version); NULL for interval plans',
  PRIMARY KEY (id),
  UNIQUE KEY ux_plan_name (namespace_id, name),
  KEY ix_plan_due (paused, next_fire_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Plans (schedules)';
