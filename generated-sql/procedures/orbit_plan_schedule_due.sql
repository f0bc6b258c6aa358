-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_plan_schedule_due.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_plan_schedule_due: The cron plans whose next fire time the server has to compute.
--
-- A cron plan's next_fire_at is NULL after it fired, was created, resumed or got a cron version:
-- the server computes the expression's first fire time after schedule_after in its time zone
-- (src/schedule.rs) and stores it with orbit_plan_schedule_set. Called by the scheduler loop of
-- every serve node right after orbit_plan_fire_due; a plan two nodes both compute is stored once
-- (orbit_plan_schedule_set compares schedule_after). Paused plans are left until resumed.
-- Parameters: p_limit 1-10000 (plans returned).
-- Result (one row per plan, by plan id): plan_id, schedule_after DATETIME(6) (UTC), schedule_spec
--   (the cron expression), timezone (IANA name), catch_up ('none', 'one', 'all').
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_plan_schedule_due;
DELIMITER $$
CREATE PROCEDURE orbit_plan_schedule_due(IN p_limit INT)
  READS SQL DATA
BEGIN
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  SELECT p.id AS plan_id, p.schedule_after, v.schedule_spec, v.timezone, v.catch_up
    FROM orbit_plan p FORCE INDEX (ix_plan_due)
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.paused = 0 AND p.next_fire_at IS NULL AND v.schedule_kind = 'cron'
   ORDER BY p.id
   LIMIT p_limit;
END$$
DELIMITER ;
