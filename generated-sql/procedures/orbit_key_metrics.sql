-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_key_metrics.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_key_metrics: Key gauges per namespace and queue, for operators and GET /metrics.
--
-- Operator entry point: it takes no token (the façade decides who may scrape). Labels are ids
-- (namespace id, queue id), never key names, so the number of series is bounded by the number of
-- queues. One row per queue of the database and gauge, zeros included.
-- Cost: the active attempts (a keyed one holds its key's permit), plus, per queue, one ordered probe of
-- ix_task_dispatch per priority (0-9) for its oldest blocked task, and its blocked tasks counted
-- on ix_task_dispatch (index entries only): the count it grows with the number of blocked tasks, like
-- orbit_metrics_snapshot's task counts, so scrape every few seconds, not per request.
-- Parameters: none.
-- Result (ordered by metric, namespace_id, queue_id): metric VARCHAR, namespace_id BIGINT,
--   queue_id CHAR(32), value DOUBLE:
--   key_held / keys held by attempts of the queue (one permit each);
--   key_blocked_tasks / tasks of the queue in the blocked lane (their key is held, or the queue
--     already has a ready task of it);
--   key_oldest_wait_seconds / seconds since the oldest blocked task of the queue (the one
--     accepted first) became due; 0 when none is blocked.
-- Signals: none.
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_key_metrics;
DELIMITER $$
CREATE PROCEDURE orbit_key_metrics()
  READS SQL DATA
BEGIN
  SELECT 'key_held' AS metric, q.namespace_id, q.id AS queue_id, CAST(COALESCE(h.n, 0) AS DOUBLE) AS value
    FROM orbit_queue q
    LEFT JOIN (SELECT a.queue_id, COUNT(*) AS n
                 FROM orbit_attempt a FORCE INDEX (ix_attempt_active_queue)
                WHERE a.released_at IS NULL AND a.resource_id <> 0
                GROUP BY a.queue_id) h ON h.queue_id = q.id
  UNION ALL
  SELECT 'key_blocked_tasks', q.namespace_id, q.id,
         CAST((SELECT COUNT(*) FROM orbit_task t FORCE INDEX (ix_task_dispatch)
                WHERE t.queue_id = q.id AND t.lane = 'blocked') AS DOUBLE)
    FROM orbit_queue q
  UNION ALL
  SELECT 'key_oldest_wait_seconds', q.namespace_id, q.id,
         COALESCE(GREATEST(TIMESTAMPDIFF(MICROSECOND,
                    (SELECT o.run_at FROM orbit_task o
                      WHERE o.id = (SELECT MIN((SELECT t.id FROM orbit_task t FORCE INDEX (ix_task_dispatch)
                                                 WHERE t.queue_id = q.id AND t.lane = 'blocked' AND t.priority = p.p
                                                 ORDER BY t.queue_id, t.priority, t.id LIMIT 1))
                                      FROM (SELECT 0 AS p UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3
                                            UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
                                            UNION ALL SELECT 8 UNION ALL SELECT 9) p)),
                    UTC_TIMESTAMP(6)), 0) / 1000000, 0)
    FROM orbit_queue q
   ORDER BY metric, namespace_id, queue_id;
END$$
DELIMITER ;
