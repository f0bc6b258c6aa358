-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_ready_queues.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_ready_queues: List the queues that have claimable work (the dispatch probe of `serve`).
--
-- Each serve process wakes its worker sessions itself when it accepts or releases work; this probe
-- is how it learns about work accepted or released by OTHER processes on the same database. One
-- index probe per unpaused queue (ix_task_dispatch, m::queue_has_ready), independent of how many
-- tasks wait.
-- Parameters: p_limit 1-10000 (queues to report at most).
-- Result (0..p_limit rows): queue_id CHAR(32).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks: none (plain reads).
DROP PROCEDURE IF EXISTS orbit_task_ready_queues;
DELIMITER $$
CREATE PROCEDURE orbit_task_ready_queues(IN p_limit INT)
  READS SQL DATA
BEGIN
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  SELECT q.id AS queue_id
    FROM orbit_queue q
   WHERE q.paused = 0
     AND (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = q.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL
   ORDER BY q.id
   LIMIT p_limit;
END$$
DELIMITER ;
