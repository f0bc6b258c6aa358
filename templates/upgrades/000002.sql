-- 000002: orbit 0.2 (extension 2), upgrading orbit 0.1.0 (extension 1).
--
-- Data rewritten: none. Every task, attempt, permit, session, plan, idempotency receipt and
-- credential keeps its row as it is; only the orbit_extension catalog rows of the changed objects
-- are rewritten (by the migration's catalog section, which gen writes).
--
-- Tables altered, each by a statement that is safe to run again (a `migrate up` stopped part-way
-- is completed by running it again):
-- - orbit_credential.scopes: a sixth scope, `metrics:read`, which `/metrics` now requires (it named
--   every application to anyone). Appended to the SET, so every stored value keeps its meaning and
--   no row is copied.
-- - orbit_session: two indexes, ix_session_seen (state, last_seen_at) for the sweep that closes
--   sessions no longer heard from (orbit_session_sweep), and ix_session_credential
--   (credential_id, state) for closing a revoked credential's sessions (orbit_credential_revoke);
--   last_seen_at's comment says it is now written at most once per lease. The table holds one
--   row per worker connection, so building the indexes takes moments; both are added online.
--   Sessions left open by the stopped 0.1 servers are closed by the first sweep after three
--   leases, and their attempts end by lease expiry as before.
-- - orbit_queue.retention_seconds: a new column, how long the queue's finished tasks are kept
--   before orbit_task_purge deletes them. Every existing queue gets the column default, 7 days
--   ({{ c.retention_default_seconds }} seconds): after the upgrade, the first purges delete the tasks that finished
--   more than 7 days ago, in batches (docs/operations.md, "Retention"). To keep them longer, set
--   the retention between `migrate up` and starting the 0.2 servers (`UPDATE orbit_queue SET
--   retention_seconds = ...`; later, `orbit queue set-retention`). orbit_queue holds one row per
--   queue, so the column is added in moments.
-- - orbit_task: an index, ix_task_finished (queue_id, finished_at), by which the purge finds a
--   queue's finished tasks oldest first. Built online (ALGORITHM=INPLACE, LOCK=NONE): claims and
--   submits go on while it builds; on a large table it takes a while (about as long as copying
--   the table's (queue_id, finished_at, id) columns) and needs that much free space.
-- - orbit_extension.version: the column comment now says what the value means once upgrades
--   exist: the extension version that last created or changed the object, not the one that first
--   installed it. A comment change only: no row is copied and nothing waits on it.
--
-- Procedures re-created (gen lists them from the templates' difference). Parameters and result
-- shapes that change, so a 0.1 server must not run against the upgraded database (and `orbit
-- serve` refuses another extension version):
-- - orbit_queue_create takes p_retention_seconds, and every queue procedure (create, get, list,
--   set_paused) returns retention_seconds after the queue columns;
-- - orbit_session_attempts takes p_touch_after_ms: a renewal is the session's heartbeat;
-- - orbit_task_cancel, orbit_task_resolve and orbit_attempt_finish return the queues whose
--   sessions to wake (wake_queues), so a notification reaches only those sessions;
-- - orbit_metrics_snapshot returns (metric, queue_id, label, value) and reads unfinished tasks
--   only.
-- Behaviour that changes without a shape change: a closed session's start, renewal and result are
-- refused, and orbit_credential_revoke closes the credential's sessions; another tenant's or
-- session's id gets the answer of a missing one (task, plan and attempt procedures); the scope
-- lists accept metrics:read; a grant no longer writes the session's last_seen_at. The other
-- re-created procedures change comments only: they no longer carry benchmark timings or
-- development history (BENCHMARKS.md holds the figures).
--
-- Rules for this file: one statement per change, each idempotent as written (ALTER TABLE ...
-- MODIFY with the full new definition, CREATE ... IF NOT EXISTS, an index added only where
-- information_schema does not list it yet, data rewrites whose WHERE skips rows already
-- rewritten); a comment before each saying why; no DROP of data without saying where it went.

-- The column's definition exactly as templates/tables/orbit_extension.sql now writes it.
ALTER TABLE orbit_extension
  MODIFY version INT UNSIGNED NOT NULL COMMENT 'extension version that last created or changed the object (migration: its own version)';

-- metrics:read appended to the scopes, exactly as templates/tables/orbit_credential.sql writes it.
ALTER TABLE orbit_credential
  MODIFY scopes SET('queues:manage','tasks:submit','tasks:read','workers:connect','workers:consume','metrics:read') NOT NULL COMMENT 'granted scopes';

-- last_seen_at's new comment, exactly as templates/tables/orbit_session.sql writes it.
ALTER TABLE orbit_session
  MODIFY last_seen_at DATETIME(6) NOT NULL COMMENT 'UTC time the worker was last heard from (hello, lease.renew at most once per lease); orbit_session_sweep closes an open session silent for too long';

-- The two session indexes and the purge's task index. MySQL has no `ADD INDEX IF NOT EXISTS`, so a procedure that lives
-- only for this migration adds each one that information_schema does not list yet: running the
-- migration again after a stop adds what is missing and nothing twice.
-- orbit_queue.retention_seconds, exactly as templates/tables/orbit_queue.sql writes it. MySQL has
-- no `ADD COLUMN IF NOT EXISTS`, so a procedure that lives only for this migration adds it when
-- information_schema does not list it yet. The DEFAULT gives every existing queue the default.
DROP PROCEDURE IF EXISTS orbit_upgrade_000002_columns;
DELIMITER $$
CREATE PROCEDURE orbit_upgrade_000002_columns()
BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_queue'
                    AND COLUMN_NAME = 'retention_seconds') THEN
    ALTER TABLE orbit_queue
      ADD COLUMN retention_seconds INT UNSIGNED NOT NULL DEFAULT {{ c.retention_default_seconds }} COMMENT 'seconds a finished task (SUCCEEDED, FAILED, CANCELLED, EXPIRED) is kept after finished_at; then orbit_task_purge deletes it with its attempts, history and idempotency receipt'
      AFTER max_active_attempts;
  END IF;
END$$
DELIMITER ;
CALL orbit_upgrade_000002_columns();
DROP PROCEDURE orbit_upgrade_000002_columns;

DROP PROCEDURE IF EXISTS orbit_upgrade_000002_indexes;
DELIMITER $$
CREATE PROCEDURE orbit_upgrade_000002_indexes()
BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_session'
                    AND INDEX_NAME = 'ix_session_seen') THEN
    ALTER TABLE orbit_session ADD KEY ix_session_seen (state, last_seen_at), ALGORITHM=INPLACE, LOCK=NONE;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_session'
                    AND INDEX_NAME = 'ix_session_credential') THEN
    ALTER TABLE orbit_session ADD KEY ix_session_credential (credential_id, state), ALGORITHM=INPLACE, LOCK=NONE;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_task'
                    AND INDEX_NAME = 'ix_task_finished') THEN
    ALTER TABLE orbit_task ADD KEY ix_task_finished (queue_id, finished_at), ALGORITHM=INPLACE, LOCK=NONE;
  END IF;
END$$
DELIMITER ;
CALL orbit_upgrade_000002_indexes();
DROP PROCEDURE orbit_upgrade_000002_indexes;
