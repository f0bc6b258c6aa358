-- 000002: orbit 0.2 (extension 2), upgrading orbit 0.1.0 (extension 1).
--
-- Data rewritten: the key permits. Each row of orbit_key_permit (one per key held now, so at most
-- the active attempts) is copied into its key's new orbit_resource.holder_attempt_id column, then
-- orbit_key_permit and orbit_queue_permit are dropped: a key permit is now a column of the key's
-- resource row, which every grant and release updates anyway, and a queue permit is its attempt
-- (SPEC §4 allows either), which saves a grant and a release two row inserts and two row
-- deletes. Queue permits need no copy: an attempt holds its queue permit exactly while its
-- released_at is NULL, which every 0.1 release already wrote. Every task, attempt, session, plan,
-- idempotency receipt and credential keeps its row; the orbit_extension catalog rows of the
-- changed objects are rewritten (by the migration's catalog section, which gen writes).
--
-- Tables added (CREATE TABLE IF NOT EXISTS, written by gen): orbit_key_policy, the key policies
-- of issue 25 (how many may hold a key, how often it may be granted, and what a submit does when
-- it is busy), orbit_key_slot, the permits of keys that more than one attempt may hold, beyond
-- the first, and orbit_key_rate_log, the recent grant times of keys with a rate. All start empty, so every key keeps 0.1's behaviour (one holder, no rate,
-- 'queue') until a policy is set.
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
-- - orbit_task_event.event: the column comment's examples (see below); a comment change only.
-- - orbit_attempt: two indexes on (released_at, queue_id) and (released_at, lease_expires_at),
--   which count a queue's permits for its limit and list the live leases for recovery, as the
--   permit tables' indexes did. Built online; on a table of 1,000,000 attempts they take seconds
--   (docs/upgrading.md), during which writes continue.
-- - orbit_resource: a column holder_attempt_id, the key permit (0 = free), after version. Not a
--   unique column of orbit_attempt: a unique secondary index's duplicate check takes gap locks
--   at any isolation level, and two grants inserting beside one released entry deadlocked there.
--   orbit_resource holds one row per key; MySQL 8.0.29+ and MariaDB 10.3.2+ add the column
--   instantly, older MySQL 8.0 rebuilds the table.
-- - orbit_resource: three columns, last in the table (instant on MariaDB 10.3.2+ and MySQL
--   8.0.12+): holders (how many hold the key: 1 where the copy above found a permit, else 0),
--   holder_limit (1, 0.1's only limit) and rate_wake_at (NULL: no key waits for a rate); and an
--   index on rate_wake_at, by which orbit_task_promote_due finds keys whose rate allows a grant
--   again (all NULL at first; built online).
-- - orbit_attempt.key_slot: the key permit's slot an attempt holds, last in the table (instant);
--   0 for every existing attempt, the only slot 0.1 had. orbit_attempt.handoff_task_id after it
--   (instant): the key's next task a result's release leaves for the grant in its own
--   transaction, which takes it without readying it first; 0 for every existing attempt (read
--   only in the transaction that writes it).
-- - orbit_queue_permit, orbit_key_permit: dropped after the copy above. A queue permit row of an
--   attempt that had already ended (0.1 could leave one behind a resumed attempt) was held by
--   nothing and goes with its table.
-- - orbit_plan, orbit_plan_version, orbit_plan_fire: cron plans in a time zone, catch_up and
--   on_busy (issue 26). orbit_plan.next_fire_at may be NULL (a cron plan whose next fire time
--   the server computes) and gains schedule_after; orbit_plan_version gains timezone, catch_up and
--   on_busy; orbit_plan_fire gains outcome. The new columns' defaults keep every existing plan
--   what it was: an interval plan ('' time zone) with catch_up 'one' (the oldest missed slot
--   fires, the others are skipped) and on_busy 'queue' (a task is queued whatever its key), and
--   every recorded fire 'created'. Plan tables hold one row per plan, version or fired slot;
--   making next_fire_at nullable rebuilds orbit_plan, which takes moments.
-- - orbit_queue.retention_seconds: a new column, how long the queue's finished tasks are kept
--   before orbit_task_purge deletes them. Every existing queue gets the column default, 7 days
--   ({{ c.retention_default_seconds }} seconds): after the upgrade, the first purges delete the tasks that finished
--   more than 7 days ago, in batches (docs/operations.md, "Retention"). To keep them longer, set
--   the retention between `migrate up` and starting the 0.2 servers (`UPDATE orbit_queue SET
--   retention_seconds = ...`; later, `orbit queue set-retention`). orbit_queue holds one row per
--   queue, so the column is added in moments.
-- - orbit_task: two columns, debounce_seconds and debounce_until (issue 26: a debounced submit
--   replaces its key's waiting debounced task). Added last in the table, so MariaDB 10.3.2+ and
--   MySQL 8.0.12+ add them instantly, without copying a row, however many tasks there are; their
--   defaults (0, NULL) say every existing task was not debounced. No row is rewritten.
-- - orbit_task: an index, ix_task_finished (queue_id, finished_at), by which the purge finds a
--   queue's finished tasks oldest first. Built online (ALGORITHM=INPLACE, LOCK=NONE): claims and
--   submits go on while it builds; on a large table it takes a while (about as long as copying
--   the table's (queue_id, finished_at, id) columns) and needs that much free space.
-- - orbit_task: an index, ix_task_handler (queue_id, lane, handler, priority, id), the ready lane
--   per handler: a claim from the front of a queue's ready lane starts at the first ready task of
--   a handler its session runs, instead of reading every ready task of other handlers in front of
--   it (a queue shared by two fleets, one of them down, had every claim of the other read the
--   first fleet's whole backlog). Built online like ix_task_finished, and takes about as long.
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
--   only;
-- - orbit_task_submit takes four more parameters after the definition (p_run_at,
--   p_delay_seconds, p_debounce_seconds, p_debounce_max_seconds; issue 26), and
--   orbit_task_submit_many reads the same four members of each task. An Idempotency-Key accepted
--   by 0.1 still replays: a request without them hashes as before. Both may now signal KEY_BUSY
--   (a key policy that rejects a busy key), and orbit_task_create has two more outputs;
-- - orbit_plan_create and orbit_plan_version_create take a schedule (p_interval_seconds or p_cron,
--   p_timezone, p_catch_up, p_on_busy), every plan-returning procedure returns four more columns
--   (schedule_after, timezone, catch_up, on_busy), and orbit_plan_fire_due leaves a fired cron
--   plan for the server to schedule (orbit_plan_schedule_due and orbit_plan_schedule_set are new).
-- Behaviour that changes without a shape change: a closed session's start, renewal and result are
-- refused, and orbit_credential_revoke closes the credential's sessions; another tenant's or
-- session's id gets the answer of a missing one (task, plan and attempt procedures); the scope
-- lists accept metrics:read; a grant no longer writes the session's last_seen_at; a submit, a
-- grant and a start write no history row (orbit_task_event: the task and attempt rows record
-- them; two to three fewer rows written per task). The other
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

-- The event column's new comment, exactly as templates/tables/orbit_task_event.sql writes it: the
-- history no longer has a row for a submit, a grant or a start (the task and attempt rows record
-- them), so its examples change. A comment change only: no row is copied and nothing waits on it.
-- History rows 0.1 wrote for those events stay as they are.
ALTER TABLE orbit_task_event
  MODIFY event VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'what happened, e.g. attempt_succeeded, attempt_expired, cancelled, resolved, deadline_expired';

-- last_seen_at's new comment, exactly as templates/tables/orbit_session.sql writes it.
ALTER TABLE orbit_session
  MODIFY last_seen_at DATETIME(6) NOT NULL COMMENT 'UTC time the worker was last heard from (hello, lease.renew at most once per lease); orbit_session_sweep closes an open session silent for too long';

-- next_fire_at may be NULL, and the comments of the plan columns whose meaning grew, exactly as
-- templates/tables/orbit_plan*.sql write them.
ALTER TABLE orbit_plan
  MODIFY next_fire_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time of the next scheduled slot; NULL = a cron plan whose next slot the server has yet to compute (after schedule_after)';
ALTER TABLE orbit_plan_version
  MODIFY schedule_spec VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'interval seconds, or a cron expression (5 or 6 fields) read in timezone';
ALTER TABLE orbit_plan_fire
  MODIFY task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id created (created) or kept (kept); 0 = none (skipped)';

-- The new plan columns, each where the table templates put it. MySQL has no `ADD COLUMN IF NOT
-- EXISTS`, so a procedure that lives only for this migration adds each one that
-- information_schema does not list yet (running the migration again adds nothing twice). Their
-- defaults are the behaviour of 0.1 plans.
DROP PROCEDURE IF EXISTS orbit_upgrade_000002_plans;
DELIMITER $$
CREATE PROCEDURE orbit_upgrade_000002_plans()
BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_plan'
                    AND COLUMN_NAME = 'schedule_after') THEN
    ALTER TABLE orbit_plan
      ADD COLUMN schedule_after DATETIME(6) NULL DEFAULT NULL COMMENT 'cron plans: the next slot is the first fire time after this UTC time (the fired slot, or when it was created, resumed or got a new version); NULL for interval plans' AFTER updated_at;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_plan_version'
                    AND COLUMN_NAME = 'timezone') THEN
    ALTER TABLE orbit_plan_version
      ADD COLUMN timezone VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT 'cron plans: IANA time zone of the expression; empty for interval plans' AFTER schedule_spec;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_plan_version'
                    AND COLUMN_NAME = 'catch_up') THEN
    ALTER TABLE orbit_plan_version
      ADD COLUMN catch_up ENUM('none','one','all') NOT NULL DEFAULT 'one' COMMENT 'missed slots: none fired, one fired (the oldest), or all fired (at most 100)' AFTER timezone;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_plan_version'
                    AND COLUMN_NAME = 'on_busy') THEN
    ALTER TABLE orbit_plan_version
      ADD COLUMN on_busy ENUM('queue','skip','replace_waiting') NOT NULL DEFAULT 'queue' COMMENT 'a slot while concurrency_key is busy: queue a task, skip it, or keep the plan''s waiting task' AFTER catch_up;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_plan_fire'
                    AND COLUMN_NAME = 'outcome') THEN
    ALTER TABLE orbit_plan_fire
      ADD COLUMN outcome ENUM('created','skipped','kept') NOT NULL DEFAULT 'created' COMMENT 'created a task; skipped (key busy, on_busy skip); kept the plan''s waiting task (on_busy replace_waiting)' AFTER task_id;
  END IF;
END$$
DELIMITER ;
CALL orbit_upgrade_000002_plans();
DROP PROCEDURE orbit_upgrade_000002_plans;

-- orbit_queue.retention_seconds, orbit_task's two debounce columns, orbit_resource's three
-- permit and rate columns and orbit_attempt's key_slot and handoff_task_id, exactly as
-- templates/tables/ write them. MySQL has no `ADD COLUMN IF NOT
-- EXISTS`, so a procedure that lives only for this migration adds each when information_schema
-- does not list it yet. The DEFAULTs give every existing queue the default retention and every
-- existing task "not debounced".
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
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_task'
                    AND COLUMN_NAME = 'debounce_seconds') THEN
    ALTER TABLE orbit_task
      ADD COLUMN debounce_seconds INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'debounced submit: run_at was acceptance + this, and a later debounced submit for the key and queue replaces the task while it waits; 0 = not debounced';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_resource'
                    AND COLUMN_NAME = 'holders') THEN
    ALTER TABLE orbit_resource
      ADD COLUMN holders SMALLINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'attempts holding the key now (slot 0 and the held orbit_key_slot rows)';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_resource'
                    AND COLUMN_NAME = 'holder_limit') THEN
    ALTER TABLE orbit_resource
      ADD COLUMN holder_limit SMALLINT UNSIGNED NOT NULL DEFAULT 1 COMMENT 'the key''s holder limit as its last grant or submit read it from orbit_key_policy';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_resource'
                    AND COLUMN_NAME = 'rate_wake_at') THEN
    ALTER TABLE orbit_resource
      ADD COLUMN rate_wake_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time the key''s rate allows its next grant, while a grant waits for it; NULL = none';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_attempt'
                    AND COLUMN_NAME = 'key_slot') THEN
    ALTER TABLE orbit_attempt
      ADD COLUMN key_slot SMALLINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the key permit''s slot it holds (0 to its key''s holder_limit - 1; orbit_key_slot for 1 and up); 0 for a task without a key';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_attempt'
                    AND COLUMN_NAME = 'handoff_task_id') THEN
    ALTER TABLE orbit_attempt
      ADD COLUMN handoff_task_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_task.id of the key''s next task its release left blocked for the releasing transaction''s grant to take (orbit_key_release, a result that grants); 0 = none';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_task'
                    AND COLUMN_NAME = 'debounce_until') THEN
    ALTER TABLE orbit_task
      ADD COLUMN debounce_until DATETIME(6) NULL DEFAULT NULL COMMENT 'debounced submit: the latest run_at its burst of replacements may reach (first submit + debounce_max_seconds); NULL = no bound';
  END IF;
END$$
DELIMITER ;
CALL orbit_upgrade_000002_columns();
DROP PROCEDURE orbit_upgrade_000002_columns;

-- The two session indexes, the purge's and the claim's task indexes, the attempt's indexes,
-- orbit_resource.holder_attempt_id and the copy of the key permits into it. MySQL has no
-- `ADD COLUMN IF NOT EXISTS` or `ADD INDEX IF NOT EXISTS`, so a
-- procedure that lives only for this migration adds each one that information_schema does not
-- list yet: running the migration again after a stop adds what is missing and nothing twice. The
-- copy runs while orbit_key_permit exists (it is dropped only after), and skips keys already
-- copied.
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
  IF NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_task'
                    AND INDEX_NAME = 'ix_task_handler') THEN
    ALTER TABLE orbit_task ADD KEY ix_task_handler (queue_id, lane, handler, priority, id), ALGORITHM=INPLACE, LOCK=NONE;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_resource'
                    AND COLUMN_NAME = 'holder_attempt_id') THEN
    ALTER TABLE orbit_resource
      ADD COLUMN holder_attempt_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the key permit of slot 0: orbit_attempt.id of the attempt holding it (LEASED or RUNNING); 0 = free'
      AFTER version;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_attempt'
                    AND INDEX_NAME = 'ix_attempt_active_queue') THEN
    ALTER TABLE orbit_attempt ADD KEY ix_attempt_active_queue (released_at, queue_id), ALGORITHM=INPLACE, LOCK=NONE;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_attempt'
                    AND INDEX_NAME = 'ix_attempt_active_lease') THEN
    ALTER TABLE orbit_attempt ADD KEY ix_attempt_active_lease (released_at, lease_expires_at), ALGORITHM=INPLACE, LOCK=NONE;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS
                  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_resource'
                    AND INDEX_NAME = 'ix_resource_wake') THEN
    ALTER TABLE orbit_resource ADD KEY ix_resource_wake (rate_wake_at), ALGORITHM=INPLACE, LOCK=NONE;
  END IF;
  IF EXISTS (SELECT 1 FROM information_schema.TABLES
              WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orbit_key_permit') THEN
    UPDATE orbit_resource r
      JOIN orbit_key_permit k ON k.resource_id = r.id
       SET r.holder_attempt_id = k.attempt_id
     WHERE r.holder_attempt_id = 0;
  END IF;
  -- Each copied permit is its key's one holder.
  UPDATE orbit_resource r SET r.holders = 1 WHERE r.holder_attempt_id <> 0 AND r.holders = 0;
END$$
DELIMITER ;
CALL orbit_upgrade_000002_indexes();
DROP PROCEDURE orbit_upgrade_000002_indexes;

-- The permit tables, now columns: the key permits were copied into orbit_resource above; a queue
-- permit is an attempt whose released_at is NULL.
DROP TABLE IF EXISTS orbit_key_permit;
DROP TABLE IF EXISTS orbit_queue_permit;
