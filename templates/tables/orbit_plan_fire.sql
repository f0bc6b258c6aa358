-- orbit_plan_fire: One row per fired plan slot: makes firing idempotent per (plan, scheduled time).
CREATE TABLE IF NOT EXISTS orbit_plan_fire (
  plan_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_plan.id',
  scheduled_for DATETIME(6) NOT NULL COMMENT 'UTC slot time',
  version INT UNSIGNED NOT NULL COMMENT 'orbit_plan_version.version that fired',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id created',
  fired_at DATETIME(6) NOT NULL COMMENT 'UTC time it fired',
  PRIMARY KEY (plan_id, scheduled_for)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Fired plan slots';
