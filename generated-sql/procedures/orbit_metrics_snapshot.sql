-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_metrics_snapshot.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_metrics_snapshot: Gauges for operators and GET /metrics, read in one statement (one snapshot).
--
-- Operator entry point: it takes no token (the façade decides who may scrape). Its cost grows
-- with the number of queues, sessions and applications and with the unfinished tasks, never
-- with the finished ones: each queue's count of a live state is one range of ix_task_list
-- (queue_id, state), permits are counted from the active attempts' indexes, and the applications'
-- counters are read from orbit_application_quota. Finished tasks are not counted here: the
-- server counts results as they happen (orbit_task_results_total).
-- Parameters: none.
-- Result (one row per gauge, ordered by metric, queue, label): metric VARCHAR, queue_id VARCHAR
--   ('' when the gauge is not per queue), label VARCHAR, value BIGINT:
--   tasks / queue / each live state (WAITING, LEASED, RUNNING, RETRY_WAIT, NEEDS_REVIEW; zeros
--   included); queue_paused / queue / the queue's name / 0 or 1; queue_permits / queue / '';
--   key_permits / '' / ''; sessions / '' / active or draining (zeros included);
--   application_active_attempts and application_incomplete_tasks / '' / each application name.
-- Signals: none.
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_metrics_snapshot;
DELIMITER $$
CREATE PROCEDURE orbit_metrics_snapshot()
  READS SQL DATA
BEGIN
  SELECT 'tasks' AS metric, q.id AS queue_id, s.label,
         CAST((SELECT COUNT(*) FROM orbit_task t
                WHERE t.queue_id = q.id AND t.state = s.label) AS SIGNED) AS value
    FROM orbit_queue q
    CROSS JOIN (SELECT 'WAITING' AS label UNION ALL SELECT 'LEASED' UNION ALL SELECT 'RUNNING'
                UNION ALL SELECT 'RETRY_WAIT' UNION ALL SELECT 'NEEDS_REVIEW') s
  UNION ALL
  SELECT 'queue_paused', q.id, q.name, CAST(q.paused AS SIGNED)
    FROM orbit_queue q
  UNION ALL
  SELECT 'queue_permits', q.id, '',
         CAST((SELECT COUNT(*) FROM orbit_attempt p FORCE INDEX (ix_attempt_active_queue)
                WHERE p.released_at IS NULL AND p.queue_id = q.id) AS SIGNED)
    FROM orbit_queue q
  UNION ALL
  SELECT 'key_permits', '', '',
         CAST((SELECT COUNT(*) FROM orbit_attempt k FORCE INDEX (ix_attempt_active_queue)
                WHERE k.released_at IS NULL AND k.resource_id <> 0) AS SIGNED)
  UNION ALL
  SELECT 'sessions', '', s.label,
         CAST((SELECT COUNT(*) FROM orbit_session x WHERE x.state = s.label) AS SIGNED)
    FROM (SELECT 'active' AS label UNION ALL SELECT 'draining') s
  UNION ALL
  SELECT 'application_active_attempts', '', a.name, CAST(c.active_attempts AS SIGNED)
    FROM orbit_application a
    JOIN (SELECT x.application_id, SUM(x.active_attempts) AS active_attempts
            FROM orbit_application_quota x GROUP BY x.application_id) c ON c.application_id = a.id
  UNION ALL
  SELECT 'application_incomplete_tasks', '', a.name, CAST(c.incomplete_tasks AS SIGNED)
    FROM orbit_application a
    JOIN (SELECT x.application_id, SUM(x.incomplete_tasks) AS incomplete_tasks
            FROM orbit_application_quota x GROUP BY x.application_id) c ON c.application_id = a.id
   ORDER BY metric, queue_id, label;
END$$
DELIMITER ;
