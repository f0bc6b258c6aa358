{% import "_macros.sql" as m %}
-- orbit_plan_schedule_set: Store the next fire times the server computed for cron plans.
--
-- Each item sets a plan's next_fire_at only while the plan still waits for it (next_fire_at
-- NULL) from the same schedule_after it was computed from: a plan another node already stored,
-- or that fired, was resumed or got a new version meanwhile, is left alone (its answer is
-- computed again from its new schedule_after). One transaction for the whole list.
-- Parameters: p_items: a JSON array of 1-10000 objects {"plan_id": N, "after": "YYYY-MM-DD
--   HH:MM:SS.ffffff" (the schedule_after it was computed from, UTC), "next": the same format
--   (the next fire time, UTC)}.
-- Result (one row): stored INT (plans whose next_fire_at was set), next_fire_at DATETIME(6) (the
--   earliest slot of an active plan, NULL when none).
-- Signals: INVALID_ARGUMENT (p_items).
-- Locks: the orbit_plan rows of the items (the server sends them in plan id order).
CREATE PROCEDURE orbit_plan_schedule_set(IN p_items LONGTEXT {{ c.utf8 }})
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_stored INT DEFAULT 0;
  {% call m::rollback_on_error() %};

  IF p_items IS NULL OR NOT JSON_VALID(p_items) OR JSON_TYPE(p_items) <> 'ARRAY'
     OR JSON_LENGTH(p_items) NOT BETWEEN 1 AND 10000 THEN
    {% call m::raise("INVALID_ARGUMENT", "items must be a JSON array of 1-10000 items") %};
  END IF;
  {% call m::begin() %};
  UPDATE orbit_plan p
    JOIN JSON_TABLE(p_items, '$[*]' COLUMNS (plan_id BIGINT UNSIGNED PATH '$.plan_id',
                                             after_at DATETIME(6) PATH '$.after',
                                             next_at DATETIME(6) PATH '$.next')) i
      ON p.id = i.plan_id
     SET p.next_fire_at = i.next_at, p.updated_at = v_now
   WHERE p.next_fire_at IS NULL AND p.schedule_after = i.after_at AND i.next_at IS NOT NULL;
  SET v_stored = ROW_COUNT();
  COMMIT;
  -- (Quoted: STORED is a reserved word of MySQL.)
  SELECT v_stored AS `stored`,
         (SELECT MIN(p.next_fire_at) FROM orbit_plan p WHERE p.paused = 0) AS next_fire_at;
END
