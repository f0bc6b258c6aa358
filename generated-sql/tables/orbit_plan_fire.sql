-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_plan_fire.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_plan_fire: One row per fired plan slot: makes firing idempotent per (plan, scheduled time),
-- and is the plan's history (a slot skipped because its key was busy has a row too).
CREATE TABLE IF NOT EXISTS orbit_plan_fire (
  plan_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_plan.id',
  scheduled_for DATETIME(6) NOT NULL COMMENT 'UTC slot time',
  version INT UNSIGNED NOT NULL COMMENT 'orbit_plan_version.version that fired',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id created (created) or kept (kept); 0 = none (skipped)',
  outcome ENUM('created','skipped','kept') NOT NULL DEFAULT 'created' COMMENT 'created a task; skipped (key busy, on_busy skip); kept the plan''s waiting task (on_busy replace_waiting)',
  fired_at DATETIME(6) NOT NULL COMMENT 'UTC time it fired',
  PRIMARY KEY (plan_id, scheduled_for)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Fired plan slots';
