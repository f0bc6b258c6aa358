{% import "_macros.sql" as m %}
-- orbit_metrics_snapshot: Gauges for operators and GET /metrics, read in one statement (one snapshot).
--
-- Operator entry point: it takes no token (the façade decides who may scrape). Counting tasks by
-- state scans an index of orbit_task, so its cost grows with the table: scrape every few seconds,
-- not per request.
-- Parameters: none.
-- Result (one row per gauge, ordered by metric then label): metric VARCHAR, label VARCHAR,
--   value BIGINT:
--   tasks / each of the nine task states (zeros included); queue_permits / ''; key_permits / '';
--   resources / ''; sessions / each session state (active, draining, closed; zeros included);
--   application_active_attempts / each application name.
-- Signals: none.
-- Locks: none.
CREATE PROCEDURE orbit_metrics_snapshot()
  READS SQL DATA
BEGIN
  SELECT 'tasks' AS metric, s.label, CAST(COALESCE(n.value, 0) AS SIGNED) AS value
    FROM (SELECT 'WAITING' AS label UNION ALL SELECT 'LEASED' UNION ALL SELECT 'RUNNING'
          UNION ALL SELECT 'RETRY_WAIT' UNION ALL SELECT 'SUCCEEDED' UNION ALL SELECT 'FAILED'
          UNION ALL SELECT 'CANCELLED' UNION ALL SELECT 'NEEDS_REVIEW' UNION ALL SELECT 'EXPIRED') s
    LEFT JOIN (SELECT CAST(t.state AS CHAR) AS state, COUNT(*) AS value FROM orbit_task t GROUP BY t.state) n
      ON n.state = s.label
  UNION ALL
  SELECT 'queue_permits', '', CAST((SELECT COUNT(*) FROM orbit_queue_permit) AS SIGNED)
  UNION ALL
  SELECT 'key_permits', '', CAST((SELECT COUNT(*) FROM orbit_key_permit) AS SIGNED)
  UNION ALL
  SELECT 'resources', '', CAST((SELECT COUNT(*) FROM orbit_resource) AS SIGNED)
  UNION ALL
  SELECT 'sessions', s.label, CAST(COALESCE(n.value, 0) AS SIGNED)
    FROM (SELECT 'active' AS label UNION ALL SELECT 'draining' UNION ALL SELECT 'closed') s
    LEFT JOIN (SELECT CAST(x.state AS CHAR) AS state, COUNT(*) AS value FROM orbit_session x GROUP BY x.state) n
      ON n.state = s.label
  UNION ALL
  SELECT 'application_active_attempts', a.name, CAST(q.active_attempts AS SIGNED)
    FROM orbit_application a
    JOIN (SELECT x.application_id, SUM(x.active_attempts) AS active_attempts
            FROM orbit_application_quota x GROUP BY x.application_id) q ON q.application_id = a.id
   ORDER BY metric, label;
END
