-- GENERATED FILE: do not edit. Rendered by `orbit gen` from every template under templates/ (the full install of this version).
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

SET NAMES utf8mb4;
SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

-- ---- orbit_application (from templates/tables/orbit_application.sql) ----
-- orbit_application: Tenants: the top of application -> environment -> namespace -> queue.
CREATE TABLE IF NOT EXISTS orbit_application (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'unique application name',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  PRIMARY KEY (id),
  UNIQUE KEY ux_application_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Applications (tenants)';

-- ---- orbit_application_quota (from templates/tables/orbit_application_quota.sql) ----
-- orbit_application_quota: Per-application limits and live counters, in 16 slot rows per application.
-- Slots 0..15 are all created with the application (orbit_admin_bootstrap); concurrent
-- transactions of one application update different slot rows instead of queueing on one. The active-attempt
-- counter covers LEASED and RUNNING attempts (a keyed attempt counts once although it holds two
-- permits); the incomplete-task counter covers every accepted task that has not reached a terminal
-- state (NEEDS_REVIEW included). An application's usage is the SUM of its slots' counters.
-- Limits are exact. Every slot row holds the application's whole limit L (change a limit by
-- updating all of an application's rows, e.g. UPDATE ... WHERE application_id = ?). Slot s owns
-- the share L DIV N + (s < L MOD N); the shares add up to L.
--   One-slot charge (the common case): a transaction charges one slot (an incomplete task: the
--   slot CONNECTION_ID() MOD N; an attempt: its session's slot, session id MOD N), and only while
--   that slot stays within its share and the row's checked_ limit equals its limit.
--   Every-slot charge (otherwise): lock all N rows of the application in ascending slot order
--   (one locking read), admit only if the SUM of the counters stays within L (the smallest L the
--   rows hold). An active attempt is charged to the lowest slots below their share (one exists
--   whenever the total is below L). An incomplete task's charge respreads the counters: with the
--   new total T <= L, slot s is set to T DIV N + (s < T MOD N), which is within its share; then,
--   if every slot is within its share, set checked_ = the limit on every row.
-- So while checked_ equals the limit, every slot is within its share and one-slot charges keep it
-- so, and the total never exceeds L; a limit change (which leaves checked_ behind) sends charges
-- through the exact every-slot path until the slots fit their shares again. Refusals happen only
-- when the total is at L.
-- Releases: an attempt row records the slot it charged (orbit_attempt.quota_slot) and its release
-- decrements that slot, so the active counter never goes below zero. The incomplete counter is
-- signed and only its SUM has a meaning: a task is charged where it is accepted (the submitting
-- connection's slot) and given back where it ends: by a worker's result on the attempt's slot,
-- which the same transaction already holds (so a result locks one slot row, its session's, not
-- the slots of the connections that accepted its tasks, which every result would otherwise
-- queue on); by cancel, review, expiry on the slot the task records (orbit_task.quota_slot); by a grant
-- that finds the task's deadline passed, on the granting session's slot, which it locks. A
-- slot may so go below zero; it never goes above its share, which is what keeps the total exact.
-- A submitting connection's slot that fills is respread by its next every-slot charge.
-- Lock order: locked last in every transaction that changes a counter, so lock order stays
-- acyclic. A transaction holds either one slot row, or several slot rows taken in ascending slot
-- order by one statement (every-slot charges, attempt ends that release two slots); never one
-- slot and then a lower one (a one-slot update that does not match releases its row: READ
-- COMMITTED).
CREATE TABLE IF NOT EXISTS orbit_application_quota (
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  slot TINYINT UNSIGNED NOT NULL COMMENT 'quota slot, 0..15; the counters below count the charges made to this slot',
  max_active_attempts INT UNSIGNED NOT NULL DEFAULT 10000 COMMENT 'application limit on LEASED + RUNNING attempts (same in every slot row)',
  checked_max_active_attempts INT UNSIGNED NOT NULL DEFAULT 10000 COMMENT 'the max_active_attempts every slot was last seen within its share of; one-slot charges only while equal',
  active_attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'LEASED + RUNNING attempts charged to this slot',
  max_incomplete_tasks BIGINT UNSIGNED NOT NULL DEFAULT 10000000 COMMENT 'application limit on accepted, non-terminal tasks (same in every slot row)',
  checked_max_incomplete_tasks BIGINT UNSIGNED NOT NULL DEFAULT 10000000 COMMENT 'the max_incomplete_tasks every slot was last seen within its share of; one-slot charges only while equal',
  incomplete_tasks BIGINT NOT NULL DEFAULT 0 COMMENT 'accepted, non-terminal tasks charged to this slot less those given back to it (signed: only the sum counts)',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last counter change',
  PRIMARY KEY (application_id, slot)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Application quotas and their counters, in slots';

-- ---- orbit_attempt (from templates/tables/orbit_attempt.sql) ----
-- orbit_attempt: Attempts: one per grant of a task to a session, with its lease, token and permits.
-- An attempt holds its permits from granted_at until released_at (NULL while it holds them, that
-- is while it is LEASED or RUNNING). The permits are columns of the attempt, not rows of their own
-- (SPEC §4): the queue permit is the attempt itself while released_at is NULL
-- (ix_attempt_active_queue counts a queue's, ix_attempt_active_lease lists them by lease expiry
-- for recovery), and the key permit is its key's orbit_resource.holder_attempt_id (slot 0) or an
-- orbit_key_slot row (key_slot 1 and up, for keys that more than one attempt may hold).
-- concurrency_token is the key's token granted with this attempt (0 for a task without a key).
-- grant_version and release_version are the key's resource-row versions written by the grant and
-- the release: both happen under that row's lock, so they order all holders of one key exactly
-- (a checker proves no overlap with release_version(n) < grant_version(n+1), no clocks involved).
CREATE TABLE IF NOT EXISTS orbit_attempt (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'attempt id',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id',
  attempt_no INT UNSIGNED NOT NULL COMMENT '1 for the first attempt of the task',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id',
  resource_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_resource.id whose permit it holds; 0 = no key',
  concurrency_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'fencing token granted with the key permit; 0 = no key',
  grant_version BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_resource.version written by the grant; 0 = no key',
  release_version BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_resource.version written by the release; 0 = not released or no key',
  session_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_session.id it was granted to',
  worker_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the worker identity of that session',
  claim_seq BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the session claim batch that granted it; 0 once resumed by another session',
  quota_slot TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_application_quota.slot whose active_attempts it charged; its release decrements that slot',
  state ENUM('LEASED','RUNNING','SUCCEEDED','FAILED','CANCELLED','EXPIRED','UNKNOWN') NOT NULL COMMENT 'attempt state',
  granted_at DATETIME(6) NOT NULL COMMENT 'UTC time the permits were granted',
  lease_expires_at DATETIME(6) NOT NULL COMMENT 'UTC lease expiry; renew moves it',
  started_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time Start confirmed the execution right',
  released_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time the permits were released; NULL = still held',
  outcome ENUM('','succeeded','failed','unknown','expired','cancelled') NOT NULL DEFAULT '' COMMENT 'how it ended; empty while active',
  retryable TINYINT(1) NOT NULL DEFAULT 0 COMMENT 'the worker reported a retryable failure',
  output MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL COMMENT 'JSON output reported by the worker',
  error MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL COMMENT 'JSON error reported by the worker or recovery',
  late_result VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT 'outcome reported after the attempt had already ended; recorded, never acted on',
  key_slot SMALLINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the key permit''s slot it holds (0 to its key''s holder_limit - 1; orbit_key_slot for 1 and up); 0 for a task without a key',
  handoff_task_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_task.id of the key''s next task its release left blocked for the releasing transaction''s grant to take (orbit_key_release, a result that grants); 0 = none',
  PRIMARY KEY (id),
  UNIQUE KEY ux_attempt_task (task_id, attempt_no),
  KEY ix_attempt_session (session_id, claim_seq),
  KEY ix_attempt_resource (resource_id, id),
  KEY ix_attempt_active_queue (released_at, queue_id),
  KEY ix_attempt_active_lease (released_at, lease_expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Task attempts';

-- ---- orbit_credential (from templates/tables/orbit_credential.sql) ----
-- orbit_credential: Bearer credentials: stored only as a SHA-256 hash, with scopes.
-- The token itself is shown once at creation and never stored. A credential belongs to one
-- application and environment; which namespaces and queues it reaches is in orbit_credential_scope.
CREATE TABLE IF NOT EXISTS orbit_credential (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  environment_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_environment.id',
  label VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'free-form description for operators',
  token_hash BINARY(32) NOT NULL COMMENT 'SHA-256 of the bearer token',
  token_hint CHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'first characters of the token, to recognise it',
  scopes SET('queues:manage','tasks:submit','tasks:read','workers:connect','workers:consume','metrics:read') NOT NULL COMMENT 'granted scopes',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  revoked_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC revocation time; NULL = active',
  PRIMARY KEY (id),
  UNIQUE KEY ux_credential_token (token_hash),
  KEY ix_credential_application (application_id, environment_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Bearer credentials (hashed)';

-- ---- orbit_credential_scope (from templates/tables/orbit_credential_scope.sql) ----
-- orbit_credential_scope: The namespaces and queues a credential reaches.
-- queue_id = '' grants every queue of the namespace, present and future.
CREATE TABLE IF NOT EXISTS orbit_credential_scope (
  credential_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_credential.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT 'orbit_queue.id, or empty for all queues of the namespace',
  PRIMARY KEY (credential_id, namespace_id, queue_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Namespace and queue scope of credentials';

-- ---- orbit_environment (from templates/tables/orbit_environment.sql) ----
-- orbit_environment: Environments of an application (e.g. production, test).
CREATE TABLE IF NOT EXISTS orbit_environment (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'name, unique within the application',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  PRIMARY KEY (id),
  UNIQUE KEY ux_environment_name (application_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Environments of applications';

-- ---- orbit_extension (from templates/tables/orbit_extension.sql) ----
-- orbit_extension: The extension catalog: the installed version and a checksum per migration and per object.
-- One row per installed thing. `kind` = 'extension' (name 'orbit': the installed version),
-- 'migration' (one per applied migration file, checksum of its body), 'table' or 'procedure'
-- (checksum of the object's file under generated-sql/). An upgrade rewrites the rows of the
-- objects it adds or changes (their `version` becomes its own), deletes those of the objects it
-- drops and leaves the others as they were. Written last by every migration, so a script that
-- fails part-way never claims its version.
CREATE TABLE IF NOT EXISTS orbit_extension (
  kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'extension, migration, table or procedure',
  name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'object, migration or extension name',
  version INT UNSIGNED NOT NULL COMMENT 'extension version that last created or changed the object (migration: its own version)',
  checksum CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'lowercase hex SHA-256 of the file (objects) or migration body',
  installed_at DATETIME(6) NOT NULL COMMENT 'UTC time the row was last written',
  PRIMARY KEY (kind, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Orbit extension catalog: installed version and per-object checksums';

-- ---- orbit_idempotency (from templates/tables/orbit_idempotency.sql) ----
-- orbit_idempotency: One row per accepted submit command: (application, Idempotency-Key) -> task.
-- request_hash covers every field of the request (concurrency_key included), so the same key with
-- any other body is an IDEMPOTENCY_CONFLICT rather than a replay.
CREATE TABLE IF NOT EXISTS orbit_idempotency (
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  idempotency_key VARBINARY(255) NOT NULL COMMENT 'the Idempotency-Key header, exact bytes',
  request_hash BINARY(32) NOT NULL COMMENT 'SHA-256 of the canonical request',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id created by the first acceptance',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC acceptance time',
  PRIMARY KEY (application_id, idempotency_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Submit idempotency records';

-- ---- orbit_key_policy (from templates/tables/orbit_key_policy.sql) ----
-- orbit_key_policy: How many may hold a concurrency key, how often it may be granted, and what a
-- submit does when the key is busy, set per key or per key prefix within a namespace (the scope
-- of its keys).
-- on_busy: see the column; 'cancel_running' ends the key's oldest holder at once
-- (orbit_task_create). holder_limit and the rate are read by every grant of the key
-- (orbit_attempt_grant), so a change applies from the key's next grant: a lowered limit never ends a
-- held permit, it only holds back grants until fewer hold the key. on_busy is read by a submit.
-- A policy matches one key exactly (match_kind 'exact') or every key that starts with its
-- key_pattern ('prefix', e.g. 'customer/'). For a key, the longest matching pattern wins, and an
-- exact match wins over a prefix of the same length; a key that no policy matches behaves as
-- 'queue' with one holder and no rate. orbit_task_create reads the policy under the key's
-- orbit_resource row lock when it accepts a submitted task, so an on_busy change applies from the
-- next submit on: it never touches a held permit or a task already accepted. A plan's tasks
-- follow their plan's own on_busy instead (and the key's limit and rate like every task).
-- At most 1000 policies per namespace (orbit_key_policy_set): the match reads
-- them all, by ux_key_policy.
CREATE TABLE IF NOT EXISTS orbit_key_policy (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'policy id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  match_kind ENUM('exact','prefix') NOT NULL COMMENT 'exact: the key itself; prefix: every key that starts with key_pattern',
  key_pattern VARBINARY(764) NOT NULL COMMENT 'the key, or the prefix, as exact UTF-8 bytes',
  on_busy ENUM('queue','reject','replace_waiting','cancel_running') NOT NULL DEFAULT 'queue' COMMENT 'a submit whose key is held or has waiting tasks: queue = waits; reject = refused (KEY_BUSY), nothing written; replace_waiting = the key''s waiting tasks in its queue end CANCELLED (REPLACED) and it waits; cancel_running = as replace_waiting, and the holder''s attempt ends CANCELLED at once',
  holder_limit SMALLINT UNSIGNED NOT NULL DEFAULT 1 COMMENT 'attempts that may hold the key at once, 1-1000; read at grant time',
  rate_grants SMALLINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'at most this many grants of the key in any rate_per_seconds, 1-1000; 0 = no rate; read at grant time',
  rate_per_seconds INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the rate''s window in seconds, 1-86400; 0 = no rate',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last change',
  PRIMARY KEY (id),
  UNIQUE KEY ux_key_policy (namespace_id, match_kind, key_pattern)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Per-key and per-prefix holder limits, rates and busy-key policies';

-- ---- orbit_key_rate_log (from templates/tables/orbit_key_rate_log.sql) ----
-- orbit_key_rate_log: The recent grant times of a key with a rate, a ring of rate_grants rows per key.
-- A key whose policy allows at most G grants in any T seconds (orbit_key_policy.rate_grants,
-- rate_per_seconds) records grant number k (its token) at position k mod G, overwriting grant
-- k - G: so when grant k is decided, its position holds the time of grant k - G, which must be at
-- least T ago, and position (k - 1) mod G the previous grant's time, which it may not precede (so
-- grant times never go back). A fixed cost per grant, two primary-key reads and one write,
-- whatever G is. Rows are kept for reuse (at most G per key); a row whose token is not the one
-- expected (the rate changed, or was just set) is not used: the grant reads the time of grant
-- k - G from the key's attempts instead (ix_attempt_resource, G index entries). Every change
-- happens under the key's orbit_resource row lock, after it (templates/lock_order.md).
CREATE TABLE IF NOT EXISTS orbit_key_rate_log (
  resource_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_resource.id',
  position SMALLINT UNSIGNED NOT NULL COMMENT 'token mod the rate''s grants',
  token BIGINT UNSIGNED NOT NULL COMMENT 'the grant recorded here (its concurrency_token)',
  granted_at DATETIME(6) NOT NULL COMMENT 'UTC time of that grant (its attempt''s granted_at)',
  PRIMARY KEY (resource_id, position)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Recent grant times of rate-limited keys';

-- ---- orbit_key_slot (from templates/tables/orbit_key_slot.sql) ----
-- orbit_key_slot: The permits of slots 1 and up of a key that more than one attempt may hold.
-- A key's slot 0 is its orbit_resource.holder_attempt_id; a key whose policy allows N holders
-- (orbit_key_policy.holder_limit) gets a row here for each further slot the first time a grant
-- needs it, and keeps it (never deleted: at most holder_limit - 1 rows per key). Every change
-- happens under the key's orbit_resource row lock, after it (templates/lock_order.md), so the rows
-- are read without locks of their own and a slot is never granted twice. A grant takes the lowest
-- free slot; the attempt records it (orbit_attempt.key_slot) and its release frees it.
CREATE TABLE IF NOT EXISTS orbit_key_slot (
  resource_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_resource.id',
  slot SMALLINT UNSIGNED NOT NULL COMMENT 'the slot, 1 to holder_limit - 1 (slot 0 is orbit_resource.holder_attempt_id)',
  attempt_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_attempt.id of the attempt holding the slot (LEASED or RUNNING); 0 = free',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last grant or release of the slot',
  PRIMARY KEY (resource_id, slot)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Key permits beyond the first, for keys with a holder limit above 1';

-- ---- orbit_namespace (from templates/tables/orbit_namespace.sql) ----
-- orbit_namespace: Namespaces: the scope of a concurrency_key (one permit per namespace and key).
CREATE TABLE IF NOT EXISTS orbit_namespace (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id (denormalised for scope checks)',
  environment_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_environment.id',
  name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'name, unique within the environment',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  PRIMARY KEY (id),
  UNIQUE KEY ux_namespace_name (environment_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Namespaces of environments';

-- ---- orbit_plan (from templates/tables/orbit_plan.sql) ----
-- orbit_plan: Plans: named schedules that fire tasks into a queue from their current version.
-- An interval plan's next slot is computed in SQL. A cron plan's is computed by the server
-- (src/schedule.rs: the expression in its time zone): firing sets next_fire_at NULL and
-- schedule_after to the slot, and orbit_plan_schedule_set stores the next one.
CREATE TABLE IF NOT EXISTS orbit_plan (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'plan id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id the tasks go to',
  name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'name, unique within the namespace',
  current_version INT UNSIGNED NOT NULL COMMENT 'orbit_plan_version.version that fires',
  paused TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1 = does not fire',
  next_fire_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time of the next scheduled slot; NULL = a cron plan whose next slot the server has yet to compute (after schedule_after)',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last change',
  schedule_after DATETIME(6) NULL DEFAULT NULL COMMENT 'cron plans: the next slot is the first fire time after this UTC time (the fired slot, or when it was created, resumed or got a new version); NULL for interval plans',
  PRIMARY KEY (id),
  UNIQUE KEY ux_plan_name (namespace_id, name),
  KEY ix_plan_due (paused, next_fire_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Plans (schedules)';

-- ---- orbit_plan_fire (from templates/tables/orbit_plan_fire.sql) ----
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

-- ---- orbit_plan_version (from templates/tables/orbit_plan_version.sql) ----
-- orbit_plan_version: Immutable plan versions: the schedule and the task definition they fire.
-- Tasks fired from a version inherit its concurrency_key verbatim (no interpolation).
CREATE TABLE IF NOT EXISTS orbit_plan_version (
  plan_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_plan.id',
  version INT UNSIGNED NOT NULL COMMENT '1, 2, ... per plan',
  schedule_kind ENUM('interval','cron') NOT NULL COMMENT 'how schedule_spec is read',
  schedule_spec VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'interval seconds, or a cron expression (5 or 6 fields) read in timezone',
  timezone VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT 'cron plans: IANA time zone of the expression; empty for interval plans',
  catch_up ENUM('none','one','all') NOT NULL DEFAULT 'one' COMMENT 'missed slots: none fired, one fired (the oldest), or all fired (at most 100)',
  on_busy ENUM('queue','skip','replace_waiting') NOT NULL DEFAULT 'queue' COMMENT 'a slot while concurrency_key is busy: queue a task, skip it, or keep the plan''s waiting task',
  handler VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'task handler',
  handler_version VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'task handler version',
  payload_version VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'task payload version',
  payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'task payload JSON',
  business_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'task business_key; empty = none',
  concurrency_key VARBINARY(764) NOT NULL DEFAULT '' COMMENT 'task concurrency_key, exact bytes; empty = none',
  priority TINYINT UNSIGNED NOT NULL DEFAULT 5 COMMENT 'task priority',
  max_attempts INT UNSIGNED NOT NULL DEFAULT 3 COMMENT 'task max_attempts',
  retry_base_ms INT UNSIGNED NOT NULL DEFAULT 1000 COMMENT 'task first retry delay',
  retry_max_ms INT UNSIGNED NOT NULL DEFAULT 300000 COMMENT 'task largest retry delay',
  retry_unknown TINYINT(1) NOT NULL DEFAULT 0 COMMENT 'task safe to retry after an unknown outcome',
  deadline_seconds INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'task total deadline from firing; 0 = none',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  PRIMARY KEY (plan_id, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Immutable plan versions';

-- ---- orbit_queue (from templates/tables/orbit_queue.sql) ----
-- orbit_queue: Queues of a namespace, with their pause switch and queue-permit limit.
-- A queue permit is held by every LEASED or RUNNING attempt (orbit_attempt.released_at NULL); when
-- max_active_attempts > 0 the claim counts the queue's permits under this row's lock.
-- retention_seconds bounds how long its finished tasks are kept (orbit_task_purge); a queue
-- created without one gets the column default, the same for every server.
CREATE TABLE IF NOT EXISTS orbit_queue (
  id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT '32 lowercase hex digits, random',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  environment_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_environment.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'name, unique within the namespace',
  paused TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1 = no new claims from this queue; in-flight attempts continue',
  max_active_attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'queue permits available; 0 = unlimited',
  retention_seconds INT UNSIGNED NOT NULL DEFAULT 604800 COMMENT 'seconds a finished task (SUCCEEDED, FAILED, CANCELLED, EXPIRED) is kept after finished_at; then orbit_task_purge deletes it with its attempts, history and idempotency receipt',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last change',
  PRIMARY KEY (id),
  UNIQUE KEY ux_queue_name (namespace_id, name),
  KEY ix_queue_application (application_id, environment_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Queues';

-- ---- orbit_resource (from templates/tables/orbit_resource.sql) ----
-- orbit_resource: One row per (namespace, concurrency_key): the highest token ever granted, and
-- the key permits. Never deleted or reset, or tokens would stop being monotonic. Every claim and
-- release of the key locks this row FOR UPDATE and advances version; a grant sets highest_token
-- + 1 (refused at 2^64 - 1 rather than wrapping) and takes the lowest free slot, a release frees
-- it. The permits are columns of this row, which every grant and release writes anyway, rather
-- than rows or a unique index of their own: a unique secondary index's duplicate check takes gap
-- locks at any isolation level, and two grants inserting beside one released entry deadlocked
-- there. Slot 0's holder is holder_attempt_id; a key whose policy allows more than one holder
-- (orbit_key_policy.holder_limit) keeps slots 1 and up in orbit_key_slot; holders counts them
-- all, and a grant needs holders < the limit. holder_limit is the limit as of the key's last
-- grant or submit (both read the policy), for the steps that read no policy (a promotion). A key
-- with a rate (orbit_key_policy.rate_grants per rate_per_seconds) records its grants in
-- orbit_key_rate_log; a grant that would exceed the rate leaves its task blocked and sets
-- rate_wake_at, when orbit_task_promote_due promotes the key's tasks again (ix_resource_wake).
CREATE TABLE IF NOT EXISTS orbit_resource (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id referenced by tasks, attempts and permits',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  concurrency_key VARBINARY(764) NOT NULL COMMENT 'the key as exact UTF-8 bytes (no collation, no padding)',
  highest_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'largest token granted; 0 = never granted',
  version BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'advanced by every claim and release',
  holder_attempt_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the key permit of slot 0: orbit_attempt.id of the attempt holding it (LEASED or RUNNING); 0 = free',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last grant or release',
  holders SMALLINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'attempts holding the key now (slot 0 and the held orbit_key_slot rows)',
  holder_limit SMALLINT UNSIGNED NOT NULL DEFAULT 1 COMMENT 'the key''s holder limit as its last grant or submit read it from orbit_key_policy',
  rate_wake_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time the key''s rate allows its next grant, while a grant waits for it; NULL = none',
  PRIMARY KEY (id),
  UNIQUE KEY ux_resource_key (namespace_id, concurrency_key),
  KEY ix_resource_wake (rate_wake_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Resource keys and their token high-water marks';

-- ---- orbit_session (from templates/tables/orbit_session.sql) ----
-- orbit_session: WebSocket sessions of workers: what they consume and how much.
-- ix_session_seen serves the sweep of silent sessions (orbit_session_sweep); ix_session_credential
-- lets a revocation close the credential's sessions (orbit_credential_revoke).
CREATE TABLE IF NOT EXISTS orbit_session (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'session id',
  worker_row_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_worker.id',
  worker_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the worker identity (copied for history)',
  credential_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_credential.id that opened it',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  node VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'the serve process holding the socket',
  capacity INT UNSIGNED NOT NULL COMMENT 'attempts the session runs at once',
  concurrency_keys TINYINT(1) NOT NULL COMMENT '1 = receives keyed tasks (the worker registration)',
  start_on_assign TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1 = grants start at once (RUNNING), no task.start round trip',
  handlers TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'JSON array of handler names it runs; [] = any',
  state ENUM('active','draining','closed') NOT NULL COMMENT 'draining = no new assignments',
  claim_seq BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'claim batches so far; tags the attempts of each',
  scan_position INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_session_queue.position of the queue that scan_priority and scan_task_id describe',
  scan_priority TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'with scan_task_id: the last candidate the last scan of that queue took out of its ready lane (see orbit_task_grant)',
  scan_task_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the id of that candidate; 0 = none',
  connected_at DATETIME(6) NOT NULL COMMENT 'UTC hello time',
  last_seen_at DATETIME(6) NOT NULL COMMENT 'UTC time the worker was last heard from (hello, lease.renew at most once per lease); orbit_session_sweep closes an open session silent for too long',
  closed_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC close time; NULL = open',
  PRIMARY KEY (id),
  KEY ix_session_worker (worker_row_id, state),
  KEY ix_session_seen (state, last_seen_at),
  KEY ix_session_credential (credential_id, state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Worker sessions';

-- ---- orbit_session_queue (from templates/tables/orbit_session_queue.sql) ----
-- orbit_session_queue: The queues a session consumes from (from hello.queue_ids).
CREATE TABLE IF NOT EXISTS orbit_session_queue (
  session_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_session.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id',
  position INT UNSIGNED NOT NULL COMMENT 'order in hello, 0 to n-1 without gaps (a repeated queue id takes none); the claim starts at a rotating position',
  PRIMARY KEY (session_id, queue_id),
  UNIQUE KEY ux_session_queue_position (session_id, position)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Queues of worker sessions';

-- ---- orbit_task (from templates/tables/orbit_task.sql) ----
-- orbit_task: Accepted tasks: their frozen submission, state, and dispatch lane.
-- `lane` keeps the claim cheap (SPEC §4 "Claim query"): only 'ready' tasks sit in the range the
-- claim scans (ix_task_dispatch). A keyed task whose key is held waits in 'blocked' and is not in
-- that range, so a million blocked tasks cost the claim nothing; releasing a key promotes one
-- blocked task per queue of that key (ix_task_key). Retries, delayed and debounced tasks wait in
-- 'scheduled' until run_at.
-- States: WAITING (lanes ready, blocked, scheduled), LEASED, RUNNING, RETRY_WAIT (scheduled),
-- NEEDS_REVIEW, and the terminal SUCCEEDED, FAILED, CANCELLED, EXPIRED (lane none).
-- finished_at is set only in a terminal state, so ix_task_finished holds the purge's candidates
-- (orbit_task_purge: a queue's finished tasks, oldest first) without a scan of unfinished ones.
-- ix_task_handler holds the ready lane per handler: a claim from the front of a lane starts at the
-- first ready task of a handler the session runs, so it never reads the ready tasks of other
-- handlers that wait in front of it.
CREATE TABLE IF NOT EXISTS orbit_task (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'task id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id: the scope of concurrency_key',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id',
  handler VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'handler name workers dispatch on',
  handler_version VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'handler version',
  payload_version VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'payload schema version',
  payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'payload JSON exactly as submitted',
  business_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'tracking key: no dedupe, no concurrency effect; empty = none',
  concurrency_key VARBINARY(764) NOT NULL DEFAULT '' COMMENT 'resource key as exact UTF-8 bytes, frozen at acceptance; empty = none',
  resource_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_resource.id of (namespace_id, concurrency_key); 0 = no key',
  state ENUM('WAITING','LEASED','RUNNING','RETRY_WAIT','SUCCEEDED','FAILED','CANCELLED','NEEDS_REVIEW','EXPIRED') NOT NULL COMMENT 'task state',
  lane ENUM('none','ready','blocked','scheduled') NOT NULL COMMENT 'dispatch lane: ready = claimable now, blocked = key held, scheduled = waits for run_at',
  priority TINYINT UNSIGNED NOT NULL DEFAULT 5 COMMENT '0 (runs first) to 9',
  max_attempts INT UNSIGNED NOT NULL DEFAULT 3 COMMENT 'attempts allowed before the task fails',
  attempt_count INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'attempts granted so far',
  quota_slot TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_application_quota.slot whose incomplete_tasks it charged; reaching a terminal state decrements that slot',
  retry_base_ms INT UNSIGNED NOT NULL DEFAULT 1000 COMMENT 'first retry delay; doubles per attempt',
  retry_max_ms INT UNSIGNED NOT NULL DEFAULT 300000 COMMENT 'largest retry delay',
  retry_unknown TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1 = safe to retry after an unknown outcome (RETRY_WAIT instead of NEEDS_REVIEW)',
  run_at DATETIME(6) NOT NULL COMMENT 'UTC time the task may next be claimed',
  deadline_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC total deadline; NULL = none',
  current_attempt_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_attempt.id of the latest attempt; 0 = none',
  blocked_reason VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'why a waiting task cannot be granted (e.g. TOKEN_EXHAUSTED); empty = none',
  output MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL COMMENT 'JSON output of the successful attempt',
  error MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL COMMENT 'JSON error of the last failed or unknown attempt',
  idempotency_key VARBINARY(255) NOT NULL DEFAULT '' COMMENT 'Idempotency-Key it was accepted under; empty for plan-fired tasks',
  plan_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_plan.id that fired it; 0 = submitted',
  plan_version INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_plan_version.version that fired it; 0 = submitted',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC acceptance time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last change',
  finished_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC time it reached a terminal state',
  debounce_seconds INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'debounced submit: run_at was acceptance + this, and a later debounced submit for the key and queue replaces the task while it waits; 0 = not debounced',
  debounce_until DATETIME(6) NULL DEFAULT NULL COMMENT 'debounced submit: the latest run_at its burst of replacements may reach (first submit + debounce_max_seconds); NULL = no bound',
  PRIMARY KEY (id),
  KEY ix_task_dispatch (queue_id, lane, priority, id),
  KEY ix_task_handler (queue_id, lane, handler, priority, id),
  KEY ix_task_key (resource_id, lane, queue_id, priority, id),
  KEY ix_task_due (lane, run_at),
  KEY ix_task_deadline (lane, deadline_at),
  KEY ix_task_list (queue_id, state, id),
  KEY ix_task_business (namespace_id, business_key, id),
  KEY ix_task_finished (queue_id, finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Tasks';

-- ---- orbit_task_event (from templates/tables/orbit_task_event.sql) ----
-- orbit_task_event: Task history: a row per attempt end and per change no other row records.
-- An attempt end (result, lease expiry, cancel of an active attempt) and a change of a task that
-- has no active attempt (cancel, resolve, deadline expiry, a refused grant) write one row each.
-- What other rows already record is not repeated here: a task's creation is its row's created_at
-- (plan_id and plan_version for a plan's task), a grant and a start are the attempt's granted_at
-- and started_at, with its session, worker and token. A task's full history is therefore its row,
-- its attempts (orbit_attempt, in attempt_no order) and these rows.
CREATE TABLE IF NOT EXISTS orbit_task_event (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'event id (commit order per task)',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id',
  attempt_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_attempt.id involved; 0 = none',
  event VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'what happened, e.g. attempt_succeeded, attempt_expired, cancelled, resolved, deadline_expired',
  from_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT 'task state before',
  to_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT 'task state after',
  concurrency_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'token involved; 0 = none',
  detail VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'human-readable detail',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC time',
  PRIMARY KEY (id),
  KEY ix_task_event_task (task_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Task history';

-- ---- orbit_worker (from templates/tables/orbit_worker.sql) ----
-- orbit_worker: Worker process identities, with the fixed concurrency_keys registration.
-- The flag is set by the first hello of a worker_id and never changes: a later hello with another
-- value is a STATE_CONFLICT (an upgraded process must use a new identity).
CREATE TABLE IF NOT EXISTS orbit_worker (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  environment_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_environment.id',
  worker_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the stable process identity from hello',
  concurrency_keys TINYINT(1) NOT NULL COMMENT '1 = may receive keyed tasks; fixed at registration',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC registration time',
  last_seen_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last hello',
  PRIMARY KEY (id),
  UNIQUE KEY ux_worker_identity (application_id, environment_id, worker_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Worker identities';

-- ---- orbit_admin_bootstrap (from templates/procedures/orbit_admin_bootstrap.sql) ----
-- orbit_admin_bootstrap: Create what is missing of application, environment, namespace and queue, plus a credential.
--
-- Operator entry point (`orbit admin bootstrap`), not reachable over HTTP: it takes no token.
-- Idempotent for the four objects (found by name); every call adds one new credential whose
-- hash the caller computed from a fresh random token. The credential reaches every queue of the
-- namespace (present and future).
-- Parameters: p_application, p_environment, p_namespace, p_queue: names, 1-191 characters;
--   p_new_queue_id: the id to give the queue if it is created (32 lowercase hex digits; NULL =
--   derive one); p_token_hash BINARY(32); p_token_hint (first 8 characters of the token);
--   p_scopes: comma-separated subset of queues:manage,tasks:submit,tasks:read,workers:connect,
--   workers:consume,metrics:read; p_label: free text.
-- Result (one row): application_id, environment_id, namespace_id, queue_id, credential_id.
-- Signals: INVALID_ARGUMENT.
-- Locks: the four objects' rows (insert or update), the new credential rows.
DROP PROCEDURE IF EXISTS orbit_admin_bootstrap;
DELIMITER $$
CREATE PROCEDURE orbit_admin_bootstrap(
  IN p_application TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_environment TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_namespace TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_queue TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_new_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_token_hash BINARY(32),
  IN p_token_hint TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_scopes TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_label TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF CHAR_LENGTH(COALESCE(p_application, '')) NOT BETWEEN 1 AND 191
     OR CHAR_LENGTH(COALESCE(p_environment, '')) NOT BETWEEN 1 AND 191
     OR CHAR_LENGTH(COALESCE(p_namespace, '')) NOT BETWEEN 1 AND 191
     OR CHAR_LENGTH(COALESCE(p_queue, '')) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: application, environment, namespace and queue names must be 1-191 characters';
  END IF;
  IF p_new_queue_id IS NOT NULL AND p_new_queue_id NOT REGEXP '^[0-9a-f]{32}$' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: queue id must be 32 lowercase hex digits';
  END IF;
  IF p_token_hash IS NULL OR LENGTH(p_token_hash) <> 32 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: token_hash must be a 32-byte SHA-256';
  END IF;
  IF p_scopes IS NULL OR p_scopes = '' OR p_scopes NOT REGEXP
     '^((queues:manage|tasks:submit|tasks:read|workers:connect|workers:consume|metrics:read)(,|$))+$' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: scopes must be a comma-separated list of known scopes';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO orbit_application (name, created_at) VALUES (p_application, v_now)
  ON DUPLICATE KEY UPDATE name = name;
  SELECT a.id INTO v_application_id FROM orbit_application a WHERE a.name = p_application;
  -- Every quota slot of the application (0..15), with the default limits.
  INSERT INTO orbit_application_quota (application_id, slot, updated_at)
  SELECT v_application_id, s.n, v_now
    FROM (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) s
  ON DUPLICATE KEY UPDATE application_id = application_id;
  INSERT INTO orbit_environment (application_id, name, created_at) VALUES (v_application_id, p_environment, v_now)
  ON DUPLICATE KEY UPDATE name = name;
  SELECT e.id INTO v_environment_id FROM orbit_environment e
   WHERE e.application_id = v_application_id AND e.name = p_environment;
  INSERT INTO orbit_namespace (application_id, environment_id, name, created_at)
  VALUES (v_application_id, v_environment_id, p_namespace, v_now)
  ON DUPLICATE KEY UPDATE name = name;
  SELECT n.id INTO v_namespace_id FROM orbit_namespace n
   WHERE n.environment_id = v_environment_id AND n.name = p_namespace;
  INSERT INTO orbit_queue (id, application_id, environment_id, namespace_id, name, created_at, updated_at)
  VALUES (COALESCE(p_new_queue_id, CONVERT(LEFT(SHA2(CONCAT(UUID(), RAND(), v_namespace_id, p_queue), 256), 32) USING ascii)),
          v_application_id, v_environment_id, v_namespace_id, p_queue, v_now, v_now)
  ON DUPLICATE KEY UPDATE name = name;
  SELECT q.id INTO v_queue_id FROM orbit_queue q WHERE q.namespace_id = v_namespace_id AND q.name = p_queue;
  INSERT INTO orbit_credential (application_id, environment_id, label, token_hash, token_hint, scopes, created_at)
  VALUES (v_application_id, v_environment_id, COALESCE(p_label, ''), p_token_hash, LEFT(COALESCE(p_token_hint, ''), 8),
          p_scopes, v_now);
  SET v_credential_id = LAST_INSERT_ID();
  INSERT INTO orbit_credential_scope (credential_id, namespace_id, queue_id) VALUES (v_credential_id, v_namespace_id, '');
  COMMIT;
  SELECT v_application_id AS application_id, v_environment_id AS environment_id, v_namespace_id AS namespace_id,
         v_queue_id AS queue_id, v_credential_id AS credential_id;
END$$
DELIMITER ;

-- ---- orbit_attempt_charge (from templates/procedures/orbit_attempt_charge.sql) ----
-- orbit_attempt_charge: Internal: charge a grant's new attempts to the active-attempt quota under a lock on every slot, in the caller's transaction.
--
-- The exact charge of a grant (see orbit_application_quota), when the granting session's slot
-- cannot take it alone: after a limit change, with deadline-expired tasks to give back, or when
-- the caller gives back charges on other slots (orbit_task_grant's p_every_slot). It locks every
-- slot of the application and admits the grant only while the total stays within the limit,
-- counting the p_credit charges the caller gives back on the session's slot after the grant as
-- room. The attempts go to the session's slot when it takes them all within its share (with that
-- credit), else all to the lowest slot that does, else each to the lowest slot below its share
-- (one exists while the total is below the limit); each attempt records its slot, where its
-- release gives the charge back. Once every slot is within its share of the current limit,
-- one-slot charges resume (checked_max_active_attempts). The p_expired tasks a grant found past
-- their deadline give back their incomplete-task charges on the session's slot, under the same
-- lock (only that counter's sum has a meaning).
-- Parameters: p_application_id; p_session_id and p_seq (the grant's attempts: the session's, of
--   claim_seq p_seq); p_slot (the session's quota slot); p_granted (how many attempts, 0 or
--   more); p_expired (how many tasks expired); p_credit; p_now.
-- Out: o_charged (1 = charged; 0 = the quota is full, nothing was charged: the caller rolls the
--   grant back).
-- Result: none. Signals: none.
-- Locks: orbit_application_quota slot rows: every slot of the application in ascending slot
--   order (one locking read). The grant's attempts are the caller's new orbit_attempt rows.
DROP PROCEDURE IF EXISTS orbit_attempt_charge;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_charge(
  IN p_application_id BIGINT UNSIGNED,
  IN p_session_id BIGINT UNSIGNED,
  IN p_seq BIGINT UNSIGNED,
  IN p_slot TINYINT UNSIGNED,
  IN p_granted INT,
  IN p_expired INT,
  IN p_credit INT,
  IN p_now DATETIME(6),
  OUT o_charged TINYINT)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_limit BIGINT UNSIGNED;
  DECLARE v_total BIGINT UNSIGNED;
  DECLARE v_checked TINYINT;
  DECLARE v_over INT;
  DECLARE v_charged INT DEFAULT 0;
  DECLARE v_charge_slot TINYINT UNSIGNED;
  DECLARE v_attempt_id BIGINT UNSIGNED DEFAULT 0;
  SET o_charged = 0;
  SELECT MIN(q.max_active_attempts), SUM(q.active_attempts),
         MIN(q.checked_max_active_attempts = q.max_active_attempts)
    INTO v_limit, v_total, v_checked
    FROM orbit_application_quota q
   WHERE q.application_id = p_application_id
     FOR UPDATE;
  IF v_total IS NULL OR (p_granted > 0 AND v_total + p_granted > v_limit + p_credit) THEN
    LEAVE body;
  END IF;
  SET o_charged = 1;
  IF p_expired > 0 THEN
    UPDATE orbit_application_quota q
       SET q.incomplete_tasks = q.incomplete_tasks - p_expired, q.updated_at = p_now
     WHERE q.application_id = p_application_id AND q.slot = p_slot;
  END IF;
  IF p_granted > 0 THEN
    -- The session's slot, else the lowest slot that takes them all: charges kept on the
    -- session's slot go back there, and the session's next grants take one slot's row.
    SELECT q.slot INTO v_charge_slot
      FROM orbit_application_quota q
     WHERE q.application_id = p_application_id
       AND q.active_attempts + p_granted <= (q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16)) + IF(q.slot = p_slot, p_credit, 0)
     ORDER BY q.slot <> p_slot, q.slot
     LIMIT 1;
    IF v_charge_slot IS NOT NULL THEN
      UPDATE orbit_application_quota q
         SET q.active_attempts = q.active_attempts + p_granted, q.updated_at = p_now
       WHERE q.application_id = p_application_id AND q.slot = v_charge_slot;
      IF v_charge_slot <> p_slot THEN
        UPDATE orbit_attempt a SET a.quota_slot = v_charge_slot
         WHERE a.session_id = p_session_id AND a.claim_seq = p_seq;
      END IF;
      SET v_charged = p_granted;
    END IF;
  END IF;
  -- Otherwise each attempt to the lowest slot below its share, recorded on the attempt.
  charge: WHILE v_charged < p_granted DO
    SELECT a.id INTO v_attempt_id
      FROM orbit_attempt a
     WHERE a.session_id = p_session_id AND a.claim_seq = p_seq AND a.id > v_attempt_id
     ORDER BY a.id
     LIMIT 1;
    SELECT q.slot INTO v_charge_slot
      FROM orbit_application_quota q
     WHERE q.application_id = p_application_id
       AND q.active_attempts < (q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16))
     ORDER BY q.slot
     LIMIT 1;
    UPDATE orbit_application_quota q
       SET q.active_attempts = q.active_attempts + 1, q.updated_at = p_now
     WHERE q.application_id = p_application_id AND q.slot = v_charge_slot;
    UPDATE orbit_attempt a SET a.quota_slot = v_charge_slot WHERE a.id = v_attempt_id;
    SET v_charged = v_charged + 1;
  END WHILE charge;
  IF v_checked = 0 THEN
    SELECT COUNT(*) INTO v_over
      FROM orbit_application_quota q
     WHERE q.application_id = p_application_id
       AND q.active_attempts > (q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16));
    IF v_over = 0 THEN
      -- Every slot is within its share of the current limit: one-slot charges may resume.
      UPDATE orbit_application_quota q
         SET q.checked_max_active_attempts = q.max_active_attempts
       WHERE q.application_id = p_application_id;
    END IF;
  END IF;
END$$
DELIMITER ;

-- ---- orbit_attempt_end (from templates/procedures/orbit_attempt_end.sql) ----
-- orbit_attempt_end: Internal: end a set of active attempts, release their permits and move their tasks on.
--
-- The one place that decides what an ending means (SPEC §4), and the one path every ending takes:
-- a worker's results (one or a group: orbit_attempt_finish), a cancel (orbit_task_cancel, a key
-- policy's cancel in orbit_task_create) and lease recovery (orbit_lease_recover), each a set of
-- one or more results. Every result's attempt row is locked first, in input order, in one read
-- (a caller that checked an attempt under its own lock reads it again); then the results are
-- taken in input order, one at a time: each ends its attempt only while it is LEASED or RUNNING
-- and, with p_session_id, that session's. In the same
-- transaction an ending records the outcome and releases the queue permit (released_at),
-- releases the key permit (orbit_key_release, which hands the key to the next blocked task) and
-- moves the task. A result that ends nothing changes nothing, except that a result of the
-- session's for an attempt already ended with another outcome (by recovery or a cancel, or by an
-- earlier result) is kept as the attempt's late_result, acting on nothing. A result for no
-- attempt of the session, or a repeated one, changes nothing.
-- The caller then does, once for all the attempts it ended, from the rows this wrote: their
-- history rows (m::attempt_end_events, before anything else moves their tasks) and the quota
-- charges they free (the attempt's active attempt; the task's incomplete task when the task
-- ended; m::quota_give_back_ended): a session's group of results locks its slot row once.
-- Why one result at a time and not one UPDATE per table for the whole set: MariaDB updates only
-- the first table of a multi-table UPDATE's join in place (here the results' JSON_TABLE) and
-- buffers the others' new values in a temporary table, on disk for the TEXT output; and each
-- keyed ending records what its key's release wrote (BENCHMARKS.md, "What bounds").
--   succeeded           -> attempt SUCCEEDED, task SUCCEEDED
--   failed, retryable   -> attempt FAILED, task RETRY_WAIT after backoff (FAILED when no attempts are left)
--   failed              -> attempt FAILED, task FAILED
--   unknown             -> attempt UNKNOWN, task NEEDS_REVIEW (RETRY_WAIT if retry_unknown and attempts left)
--   expired (lease ran out) -> LEASED: attempt EXPIRED, task WAITING; RUNNING: as unknown
--   cancelled           -> attempt CANCELLED, task CANCELLED
-- Parameters: p_session_id (the session whose results these are; 0 = any: a cancel, recovery or
--   a policy's cancel); p_results (checked by the caller): a JSON array of results
--   {"attempt_id": N, "outcome": one of the above, "retryable": true/false (default false),
--   "output": JSON or null, "error": JSON or null}; p_now; p_hand_off: 1 when the caller grants
--   in the same transaction (see orbit_key_release; the key's next task it returns is recorded
--   as the attempt's handoff_task_id, for that grant).
-- Out: o_ended, how many attempts were ended.
-- Result: none. Signals: none (callers validate).
-- Locks, in order: every result's orbit_attempt row, in input order (one read, c_results); then
--   per result in input order: its orbit_task row (read FOR UPDATE for an outcome that needs its
--   retry settings, otherwise by its update, which comes before the key's release either way),
--   orbit_resource row and orbit_key_slot row (via orbit_key_release), promoted task rows (SKIP
--   LOCKED); no quota row (the caller's).
DROP PROCEDURE IF EXISTS orbit_attempt_end;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_end(
  IN p_session_id BIGINT UNSIGNED,
  IN p_results MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_now DATETIME(6),
  IN p_hand_off TINYINT,
  OUT o_ended INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_i INT DEFAULT 0;
  -- The result's position in p_results, from 1 (c_results' ord; v_i counts the results read).
  DECLARE v_ord INT;
  -- Result v_i (from 0), read out of p_results once (each JSON_EXTRACT parses the document up
  -- to the member), and its members.
  DECLARE v_result MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_outcome_in VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_retryable TINYINT;
  DECLARE v_output MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_error MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  -- Its attempt, as locked.
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_session_id BIGINT UNSIGNED;
  DECLARE v_attempt_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_key_slot SMALLINT UNSIGNED;
  -- Its task's retry settings (a failure or an unknown outcome only).
  DECLARE v_attempt_count INT UNSIGNED;
  DECLARE v_max_attempts INT UNSIGNED;
  DECLARE v_retry_base_ms INT UNSIGNED;
  DECLARE v_retry_max_ms INT UNSIGNED;
  DECLARE v_retry_unknown TINYINT;
  -- What the ending decides and what the key's release wrote.
  DECLARE v_outcome VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_attempts_left TINYINT;
  DECLARE v_delay_ms BIGINT UNSIGNED;
  DECLARE v_attempt_state_new VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_task_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_terminal TINYINT;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_handoff_task_id BIGINT UNSIGNED;
  DECLARE v_release_version BIGINT UNSIGNED;
  DECLARE v_done TINYINT DEFAULT 0;
  -- 1 while this result ends its attempt.
  DECLARE v_ends TINYINT;
  -- Every result with its attempt, each attempt locked as it is read: one statement for the
  -- call's attempts instead of one per result. Its values are as the rows were before this call
  -- ended any of them: a result that repeats an attempt is caught by its task's update (below).
  -- In input order without an ORDER BY, which costs a sort of the cursor's temporary table on
  -- every call: JSON_TABLE is the outer table of the join, read in document order, and its
  -- attempts are primary-key probes (no join buffer); the loop checks the order. (Fixed-width
  -- columns only: a cursor is materialised, and a TEXT column would put its temporary table on
  -- disk. retryable, output and error are read per result from p_results.) JSON_TABLE in a
  -- derived table: MySQL refuses FOR UPDATE over a join with a table function (error 3569, "Table
  -- r appears in multiple locking clauses"), and MariaDB has no FOR UPDATE OF.
  DECLARE c_results CURSOR FOR
    SELECT r.ord, r.attempt_id, r.outcome, a.task_id, a.state, a.resource_id, a.key_slot, a.session_id
      FROM (SELECT j.ord, j.attempt_id, j.outcome
              FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY, attempt_id BIGINT UNSIGNED PATH '$.attempt_id',
                              outcome VARCHAR(16) PATH '$.outcome')) j) r
      LEFT JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = r.attempt_id
       FOR UPDATE;

  SET o_ended = 0;
  OPEN c_results;
  results: LOOP
    fetch_result: BEGIN
      DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
      SET v_attempt_state = NULL, v_session_id = NULL;
      FETCH c_results INTO v_ord, v_attempt_id, v_outcome_in, v_task_id, v_attempt_state, v_resource_id, v_key_slot,
                           v_session_id;
    END fetch_result;
    IF v_done THEN
      LEAVE results;
    END IF;
    IF v_ord <> v_i + 1 THEN
      -- Which of repeated results ends their attempt depends on the order (see c_results).
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INTERNAL: orbit_attempt_end read its results out of order';
    END IF;
    SET v_result = JSON_EXTRACT(p_results, CONCAT('$[', v_i, ']')), v_i = v_i + 1,
        v_ends = COALESCE(v_attempt_state IN ('LEASED', 'RUNNING') AND p_session_id IN (0, v_session_id), 0);
    IF v_ends THEN
      SET v_retryable = COALESCE(JSON_UNQUOTE(JSON_EXTRACT(v_result, '$.retryable')) = 'true', 0),
          v_output = NULLIF(JSON_EXTRACT(v_result, '$.output'), 'null'),
          v_error = NULLIF(JSON_EXTRACT(v_result, '$.error'), 'null'),
          -- A RUNNING attempt whose lease ran out may have had effects: an unknown outcome.
          v_outcome = IF(v_outcome_in = 'expired' AND v_attempt_state = 'RUNNING', 'unknown', v_outcome_in),
          v_delay_ms = 0;
      -- Only a failure or an unknown outcome reads the task, for its retry settings. (An active
      -- attempt's task is in the attempt's state.)
      IF v_outcome IN ('failed', 'unknown') THEN
        SELECT t.attempt_count, t.max_attempts, t.retry_base_ms, t.retry_max_ms, t.retry_unknown
          INTO v_attempt_count, v_max_attempts, v_retry_base_ms, v_retry_max_ms, v_retry_unknown
          FROM orbit_task t
         WHERE t.id = v_task_id
           FOR UPDATE;
        SET v_attempts_left = v_attempt_count < v_max_attempts,
            v_delay_ms = LEAST(v_retry_max_ms, v_retry_base_ms * POW(2, LEAST(v_attempt_count, 40) - 1));
      END IF;
      CASE v_outcome
        WHEN 'succeeded' THEN
          SET v_attempt_state_new = 'SUCCEEDED', v_task_state = 'SUCCEEDED';
        WHEN 'failed' THEN
          SET v_attempt_state_new = 'FAILED',
              v_task_state = IF(v_retryable AND v_attempts_left, 'RETRY_WAIT', 'FAILED');
        WHEN 'unknown' THEN
          SET v_attempt_state_new = 'UNKNOWN',
              v_task_state = IF(v_retry_unknown AND v_attempts_left, 'RETRY_WAIT', 'NEEDS_REVIEW');
        WHEN 'expired' THEN
          SET v_attempt_state_new = 'EXPIRED', v_task_state = 'WAITING';
        ELSE
          SET v_attempt_state_new = 'CANCELLED', v_task_state = 'CANCELLED';
      END CASE;
      SET v_terminal = v_task_state IN ('SUCCEEDED', 'FAILED', 'CANCELLED');
      -- The task before the key (the lock order above); placed in a lane only after the release,
      -- so a retried task sees its key free. Its new state, a retry's run_at, a success's output, a
      -- failure's error, finished_at when terminal.
      UPDATE orbit_task t
         SET t.state = v_task_state, t.lane = 'none',
             t.run_at = IF(v_task_state IN ('WAITING', 'RETRY_WAIT'), DATE_ADD(p_now, INTERVAL v_delay_ms * 1000 MICROSECOND), t.run_at),
             t.output = IF(v_outcome = 'succeeded', v_output, t.output),
             t.error = IF(v_outcome IN ('failed', 'unknown'), v_error, t.error),
             t.finished_at = IF(v_terminal, p_now, NULL), t.updated_at = p_now
       WHERE t.id = v_task_id AND t.state IN ('LEASED', 'RUNNING');
      -- None when an earlier result of this call ended the attempt (the cursor read it before).
      SET v_ends = ROW_COUNT();
    END IF;
    IF NOT v_ends THEN
      -- Not ended by this result: another session's attempt, or none; a repeated result; or one
      -- ended another way first, whose different outcome is kept as its late result.
      UPDATE orbit_attempt a
         SET a.late_result = v_outcome_in
       WHERE a.id = v_attempt_id AND a.session_id = p_session_id AND a.state NOT IN ('LEASED', 'RUNNING')
         AND a.outcome <> v_outcome_in AND a.late_result = '';
      ITERATE results;
    END IF;
    -- The key next: the attempt's update records the version its release wrote.
    SET v_handoff_task_id = 0, v_release_version = 0;
    IF v_resource_id <> 0 THEN
      CALL orbit_key_release(v_resource_id, v_attempt_id, v_key_slot, p_now, p_hand_off, v_handoff_task_id,
                             v_release_version);
    END IF;
    IF v_task_state IN ('WAITING', 'RETRY_WAIT') THEN
      CALL orbit_task_place(v_task_id, p_now, v_task_state, v_lane);
    END IF;
    -- The attempt last: its state and outcome, the result as reported, and released_at, which
    -- releases its queue permit.
    UPDATE orbit_attempt a
       SET a.state = v_attempt_state_new, a.outcome = v_outcome, a.retryable = v_retryable,
           a.output = v_output, a.error = v_error, a.released_at = p_now,
           a.release_version = IF(v_release_version > 0, v_release_version, a.release_version),
           a.handoff_task_id = v_handoff_task_id
     WHERE a.id = v_attempt_id;
    SET o_ended = o_ended + 1;
  END LOOP results;
  CLOSE c_results;
END$$
DELIMITER ;

-- ---- orbit_attempt_finish (from templates/procedures/orbit_attempt_finish.sql) ----
-- orbit_attempt_finish: Record a session's results for its attempts, each once, in one transaction; release their permits; grant the next tasks.
--
-- A worker's results that arrive together are confirmed together: one CALL, one commit, one
-- grant for the capacity they free (SPEC §10: fewer than two durable commits per task). Each
-- attempt is still confirmed on its own, in the order given: the first result ends the attempt
-- (see orbit_attempt_end for what each outcome does to the task and the permits); a repeated
-- result gets the same answer with duplicate = 1 and releases nothing again. A result arriving
-- after the attempt already ended another way (lease expiry recovery, cancel) is recorded in
-- late_result and changes no permit and no other attempt. A result for an attempt that does not
-- exist or belongs to another session changes nothing and is answered NOT_FOUND (one answer for
-- both); the other results of the call still count. A closed session's results are refused.
-- With p_claim_max > 0 the same transaction then grants the session up to p_claim_max tasks
-- (orbit_task_grant, as orbit_task_claim would): a key a result released goes to its next task
-- with this one commit, and the worker gets the assignment with the acknowledgement instead of
-- after a claim of its own (the hand-off the SPEC's hot-key target asks for). Such a release
-- readies nothing: it leaves the key's next task, the best head over its queues (priority, then
-- age), blocked for the grant to take (orbit_key_release with p_hand_off = 1, orbit_task_grant's
-- hand-off); a key the grant did not take is then readied in every queue with blocked tasks of
-- it, as any other release leaves it (orbit_key_promote_all).
-- Parameters: p_session_id; p_results: a JSON array of 1-1000 results
--   {"attempt_id": N, "outcome": "succeeded" | "failed" | "unknown", "retryable": true/false
--   (failed only; default false), "output": JSON or null, "error": JSON or null}; p_claim_max
--   0-1000 (the session's free capacity after these results; 0 = grant nothing); p_lease_ms
--   1000-3600000 (the grants' lease; ignored when p_claim_max = 0).
-- Result (one row per grant, or one row when nothing was granted): acks, a JSON array with one
--   object per result in input order {"attempt_id", "task_id", "task_state", "attempt_state",
--   "duplicate" (0/1), "code" ("" or NOT_FOUND; then nothing else is set)};
--   wake_queues, a JSON array of the queue ids where these results may have made work
--   claimable for other sessions that the grant did not take (unpaused queues with a ready task;
--   the caller wakes the sessions that serve them, and no other), the same in every row;
--   claim_again, 1 when the grant was left to a claim of the session's own (the session's quota
--   slot refused the charge: see orbit_task_grant's p_deferred), the same in every row;
--   then the grant as
--   orbit_task_claim returns it, all NULL in the row of no grant: attempt_id, attempt_no,
--   lease_expires_at, concurrency_token, key_slot, then the task columns.
-- Signals: INVALID_ARGUMENT (p_results, an outcome, p_claim_max, p_lease_ms), UNAUTHENTICATED (no
--   such session, or it is closed: its socket went away, the sweep closed it, or its credential
--   was revoked).
-- Session state: raises the connection's group_concat_max_len to 1 MB when it is lower (MySQL's
--   default is 1,024 bytes), for the acknowledgements; nothing else is left set.
-- Locks, in order: orbit_session row (when granting: the claim's first lock, taken first so that
--   finishing and claiming sessions lock in one order), then as orbit_attempt_end (every result's
--   orbit_attempt row, then per result its task, resource, promoted tasks); then as orbit_task_grant,
--   whose charge is the quota work it does; then, for each handed-off key the grant did not take,
--   the key's blocked head task per queue (orbit_key_promote_all, SKIP LOCKED); last, the
--   orbit_application_quota slot rows the ended attempts charged (their active attempts and their
--   tasks' incomplete charges go back, in one statement, each row by its primary key). The grant
--   counts the charges given back on the session's slot as room (p_credit), so the capacity
--   the results free is granted in the same transaction although it goes back after.
DROP PROCEDURE IF EXISTS orbit_attempt_finish;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_finish(
  IN p_session_id BIGINT UNSIGNED,
  IN p_results MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_claim_max INT,
  IN p_lease_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_count INT DEFAULT 0;
  -- The first result's fault (1 attempt_id, 2 outcome, 3 retryable), NULL when none.
  DECLARE v_fault TINYINT;
  DECLARE v_resource_id BIGINT UNSIGNED;
  -- The acknowledgements (the result's acks array), read from the rows once every result is
  -- recorded (see there).
  DECLARE v_acks MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  -- What the results ended: how many attempts (orbit_attempt_end); read with the
  -- acknowledgements, the highest of them (the one, for the history of a call that ended one),
  -- how many of their keys went to a next task; then how many of those the grant took.
  DECLARE v_ended_count INT DEFAULT 0;
  DECLARE v_ended_id BIGINT UNSIGNED;
  DECLARE v_handed_off INT DEFAULT 0;
  DECLARE v_handoffs_taken INT DEFAULT 0;
  DECLARE v_wake TINYINT DEFAULT 0;
  DECLARE v_wake_queues TEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT '[]';
  DECLARE v_session_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_seq BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_granted INT DEFAULT 0;
  -- The application's room for more active attempts after the grant (from orbit_task_grant).
  DECLARE v_room BIGINT;
  -- The session's quota slot, which its grants charge (orbit_task_grant); how many of the ended
  -- attempts were charged to it, and how many of those ended their task (its incomplete-task
  -- charge goes back too); whether the grant was left to a claim of the session's own
  -- (orbit_task_grant's p_deferred).
  DECLARE v_session_slot TINYINT UNSIGNED DEFAULT (p_session_id % 16);
  DECLARE v_credit INT DEFAULT 0;
  DECLARE v_credit_terminal INT DEFAULT 0;
  DECLARE v_deferred TINYINT DEFAULT 0;
  DECLARE v_queue_limited TINYINT DEFAULT 1;
  -- The granted attempt when v_granted = 1 (from orbit_task_grant).
  DECLARE v_granted_id BIGINT UNSIGNED;
  -- What the releases may have left for other sessions (see the wake check at the end): a task
  -- back in the WAITING or RETRY_WAIT state; a released key the grant did not take, with a ready
  -- task.
  DECLARE v_requeued TINYINT DEFAULT 0;
  DECLARE v_key_left TINYINT DEFAULT 0;
  -- The ended attempts' application.
  DECLARE v_back_application_id BIGINT UNSIGNED DEFAULT NULL;
  -- 1 when no two results are for one attempt.
  DECLARE v_unique TINYINT DEFAULT 1;
  DECLARE v_done TINYINT;
  -- The keys this call handed off that still have room after the grant: the grant did not take
  -- their next task (opened after the grant; the results' attempts ended now, and plain reads of
  -- the resource rows, exact: we hold them).
  DECLARE c_released_keys CURSOR FOR
    SELECT DISTINCT e.resource_id
      FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) j
      STRAIGHT_JOIN orbit_attempt e FORCE INDEX (PRIMARY) ON e.id = j.attempt_id
      STRAIGHT_JOIN orbit_resource r FORCE INDEX (PRIMARY) ON r.id = e.resource_id
     WHERE e.session_id = p_session_id AND e.released_at = v_now AND e.handoff_task_id <> 0
       AND NOT (r.holders >= r.holder_limit OR COALESCE(r.rate_wake_at > v_now, 0));
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_results IS NULL OR NOT JSON_VALID(p_results) OR JSON_TYPE(p_results) <> 'ARRAY'
     OR JSON_LENGTH(p_results) NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: results must be a JSON array of 1-1000 results';
  END IF;
  SET v_count = JSON_LENGTH(p_results);
  -- Every result is checked before anything is written, in one read of p_results: the first
  -- fault in input order is raised (within a result: attempt_id, then outcome, then retryable).
  SELECT MIN(r.ord * 4 + CASE
               WHEN COALESCE(JSON_TYPE(r.attempt_id), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR r.attempt_id < 1 THEN 1
               WHEN COALESCE(JSON_UNQUOTE(r.outcome), '') NOT IN ('succeeded', 'failed', 'unknown') THEN 2
               WHEN COALESCE(JSON_TYPE(r.retryable), 'BOOLEAN') NOT IN ('BOOLEAN', 'NULL') THEN 3
             END) % 4
    INTO v_fault
    FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY, attempt_id JSON PATH '$.attempt_id',
                    outcome JSON PATH '$.outcome', retryable JSON PATH '$.retryable')) r;
  IF v_fault = 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: attempt_id must be a positive integer';
  ELSEIF v_fault = 2 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: outcome must be succeeded, failed or unknown';
  ELSEIF v_fault = 3 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: retryable must be true or false';
  END IF;
  IF p_claim_max IS NULL OR p_claim_max NOT BETWEEN 0 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: claim_max must be between 0 and 1000';
  END IF;
  IF p_claim_max > 0 AND (p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 3600000) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: lease_ms must be between 1000 and 3600000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  -- The session, checked where it is read: locked when granting (the claim's first lock).
  IF p_claim_max > 0 THEN
    SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id FOR UPDATE;
  ELSE
    SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id;
  END IF;
  IF v_session_state IS NULL OR v_session_state = 'closed' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: the session is closed';
  END IF;
  -- Every result is ended, or kept as a late result, where its attempt is locked.
  CALL orbit_attempt_end(p_session_id, p_results, v_now, p_claim_max > 0 /* p_hand_off */, v_ended_count);
  IF v_count > 1 THEN
    SELECT COUNT(DISTINCT r.attempt_id) = v_count
      INTO v_unique
      FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r;
  END IF;
  -- Every result is recorded: the acknowledgements, in input order, and what the call ended, in
  -- one read of the rows (locked above). A result ended its attempt when it is the first for the
  -- attempt in p_results and the attempt was released now; any other result for one of the
  -- session's attempts is a duplicate; a result for no attempt of the session is NOT_FOUND. The
  -- task states are read before the grant moves any task. (GROUP_CONCAT, the ordered aggregate
  -- both servers have, stops at group_concat_max_len: 1,024 bytes by default on MySQL, and 1,000
  -- acknowledgements take at most about 190 KB.)
  IF @@SESSION.group_concat_max_len < 1048576 THEN
    SET SESSION group_concat_max_len = 1048576;
  END IF;
  IF v_unique THEN
    SELECT CONCAT('[', GROUP_CONCAT(JSON_OBJECT('attempt_id', r.attempt_id, 'task_id', a.task_id, 'task_state', t.state,
                                              'attempt_state', a.state,
                                              'duplicate', CAST(a.id IS NOT NULL AND NOT (r.first AND a.released_at = v_now) AS UNSIGNED),
                                              'code', IF(a.id IS NULL, 'NOT_FOUND', ''))
                                  ORDER BY r.ord SEPARATOR ','), ']'),
         MAX(IF(r.first AND a.released_at = v_now, a.id, NULL)),
         COALESCE(SUM(r.first AND a.released_at = v_now AND a.handoff_task_id <> 0), 0),
         COALESCE(MAX(r.first AND a.released_at = v_now AND t.state IN ('WAITING', 'RETRY_WAIT')), 0),
         COALESCE(SUM(r.first AND a.released_at = v_now AND a.quota_slot = v_session_slot), 0),
         COALESCE(SUM(r.first AND a.released_at = v_now AND a.quota_slot = v_session_slot
                      AND t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')), 0),
         -- A session's attempts all belong to its application.
         MAX(IF(r.first AND a.released_at = v_now, a.application_id, NULL))
    INTO v_acks, v_ended_id, v_handed_off, v_requeued, v_credit, v_credit_terminal, v_back_application_id
    FROM (SELECT j.ord, j.attempt_id, 1 AS first
            FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY, attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) j) r
    LEFT JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = r.attempt_id AND a.session_id = p_session_id
    LEFT JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id;
  ELSE
    -- Each attempt's first result, by a second read of p_results (no window function: MariaDB
    -- counts its row updates as Handler_update, the figure BENCHMARKS.md publishes as row writes).
    SELECT CONCAT('[', GROUP_CONCAT(JSON_OBJECT('attempt_id', r.attempt_id, 'task_id', a.task_id, 'task_state', t.state,
                                              'attempt_state', a.state,
                                              'duplicate', CAST(a.id IS NOT NULL AND NOT (r.first AND a.released_at = v_now) AS UNSIGNED),
                                              'code', IF(a.id IS NULL, 'NOT_FOUND', ''))
                                  ORDER BY r.ord SEPARATOR ','), ']'),
         MAX(IF(r.first AND a.released_at = v_now, a.id, NULL)),
         COALESCE(SUM(r.first AND a.released_at = v_now AND a.handoff_task_id <> 0), 0),
         COALESCE(MAX(r.first AND a.released_at = v_now AND t.state IN ('WAITING', 'RETRY_WAIT')), 0),
         COALESCE(SUM(r.first AND a.released_at = v_now AND a.quota_slot = v_session_slot), 0),
         COALESCE(SUM(r.first AND a.released_at = v_now AND a.quota_slot = v_session_slot
                      AND t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')), 0),
         -- A session's attempts all belong to its application.
         MAX(IF(r.first AND a.released_at = v_now, a.application_id, NULL))
    INTO v_acks, v_ended_id, v_handed_off, v_requeued, v_credit, v_credit_terminal, v_back_application_id
    FROM (SELECT j.ord, j.attempt_id, j.ord = f.first_ord AS first
            FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY, attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) j
            STRAIGHT_JOIN (SELECT k.attempt_id, MIN(k.ord) AS first_ord
                             FROM JSON_TABLE(p_results, '$[*]' COLUMNS (ord FOR ORDINALITY,
                                             attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) k
                            GROUP BY k.attempt_id
                            ORDER BY NULL) f ON f.attempt_id = j.attempt_id) r
    LEFT JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = r.attempt_id AND a.session_id = p_session_id
    LEFT JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id;
  END IF;
  -- The history of every attempt ended above, in one insert (one per attempt would each wait on
  -- the AUTO-INC lock of the grants' bulk inserts), before the grant moves any of their tasks.
  -- One attempt (every hand-off of a hot key) by its id, without reading p_results again.
  IF v_ended_count = 1 THEN
    INSERT INTO orbit_task_event (task_id, attempt_id, event, from_state, to_state, concurrency_token, detail, created_at)
    SELECT a.task_id, a.id, CONCAT('attempt_', a.outcome), IF(a.started_at IS NULL, 'LEASED', 'RUNNING'), t.state,
           a.concurrency_token, CONCAT('attempt ', a.state, '; permits released'), v_now
      FROM (SELECT v_ended_id AS id) e
      STRAIGHT_JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = e.id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id
     ORDER BY a.id;
  ELSEIF v_ended_count > 0 THEN
    INSERT INTO orbit_task_event (task_id, attempt_id, event, from_state, to_state, concurrency_token, detail, created_at)
    SELECT a.task_id, a.id, CONCAT('attempt_', a.outcome), IF(a.started_at IS NULL, 'LEASED', 'RUNNING'), t.state,
           a.concurrency_token, CONCAT('attempt ', a.state, '; permits released'), v_now
      FROM (SELECT DISTINCT x.id, x.task_id, x.queue_id, x.quota_slot
             FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r
             STRAIGHT_JOIN orbit_attempt x FORCE INDEX (PRIMARY) ON x.id = r.attempt_id
            WHERE x.session_id = p_session_id AND x.released_at = v_now) e
      STRAIGHT_JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = e.id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id
     ORDER BY a.id;
  END IF;
  IF p_claim_max > 0 THEN
    -- The grant takes the keys these results handed off first (p_results, when there are any:
    -- their next tasks are still blocked). Its scans start where the session's last one stopped
    -- unless these results readied tasks (a retry), which may sit behind that point. The charges given back below
    -- (quota rows last, after the grant's rows) count as room for it: v_credit of them on the
    -- session's slot. An ended attempt charged to another slot (a grant that took every slot's
    -- row spread its charges) makes the grant lock every slot, so the give-back below waits for
    -- no quota row out of slot order.
    CALL orbit_task_grant(p_session_id, p_claim_max, p_lease_ms, v_now,
                          IF(v_handed_off > 0, p_results, NULL) /* p_results */, NOT v_requeued /* p_hinted */,
                          v_credit /* p_credit */, v_credit < v_ended_count /* p_every_slot */, v_deferred, v_seq,
                          v_granted, v_handoffs_taken /* p_handoffs */, v_room, v_queue_limited,
                          v_granted_id /* p_attempt_id */);
    -- The keys handed off above readied nothing (orbit_key_release). One whose next task the
    -- grant did not take still has room: it gets a ready task in each queue with blocked tasks
    -- of it, as any other release leaves it, for other sessions (v_key_left, for the wake
    -- below). Nothing to look for when the grant took every hand-off.
    IF v_handed_off > v_handoffs_taken THEN
      SET v_done = 0;
      OPEN c_released_keys;
      released_keys: LOOP
        fetch_key: BEGIN
          DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
          FETCH c_released_keys INTO v_resource_id;
        END fetch_key;
        IF v_done THEN
          LEAVE released_keys;
        END IF;
        SET v_key_left = 1;
        CALL orbit_key_promote_all(v_resource_id, v_now);
      END LOOP released_keys;
      CLOSE c_released_keys;
    END IF;
  END IF;
  -- The charges of the ended attempts go back last: quota rows after every other row. Usually
  -- every ended attempt charged the session's slot: that row alone, by the counts kept above.
  -- Otherwise each slot's, from the ended attempts' rows.
  IF v_ended_count > 0 AND v_credit = v_ended_count THEN
    UPDATE orbit_application_quota q
       SET q.active_attempts = q.active_attempts - v_credit,
           q.incomplete_tasks = q.incomplete_tasks - v_credit_terminal, q.updated_at = v_now
     WHERE q.application_id = v_back_application_id AND q.slot = v_session_slot;
  ELSEIF v_ended_count > 0 THEN
    UPDATE (SELECT a.quota_slot AS slot, COUNT(*) AS active,
                 CAST(SUM(t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) AS SIGNED) AS incomplete
            FROM (SELECT DISTINCT x.id, x.task_id, x.queue_id, x.quota_slot
             FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r
             STRAIGHT_JOIN orbit_attempt x FORCE INDEX (PRIMARY) ON x.id = r.attempt_id
            WHERE x.session_id = p_session_id AND x.released_at = v_now) a
            JOIN orbit_task t ON t.id = a.task_id
           GROUP BY a.quota_slot) g
    STRAIGHT_JOIN orbit_application_quota q ON q.application_id = v_back_application_id AND q.slot = g.slot
     SET q.active_attempts = q.active_attempts - g.active,
         q.incomplete_tasks = q.incomplete_tasks - g.incomplete,
         q.updated_at = v_now;
  END IF;
  -- Other sessions need waking only for what these releases made claimable and the grant above
  -- left: a ready task of a released key (known above when granting: a key handed off and not
  -- taken; a key of several holders or with a rate readied its tasks itself and is not looked at
  -- here: the server's periodic dispatch probe, orbit_task_ready_queues, finds them), room under
  -- an application quota that was full (conservatively: at most one attempt below its limit, as
  -- the grant read it), a task itself back in the ready lane (a retry without backoff), or room
  -- under a queue's permit limit. The last two concern only the ended attempts' queues, and need
  -- a statement, run only when a task went back to waiting or the session has a queue with a
  -- limit: most results end their task, and most queues have no limit.
  -- Which sessions to wake: those serving a queue of the application (a key, the quota) or of an
  -- ended attempt that now has a ready task; never another application's (wake_queues).
  IF v_ended_count > 0 AND (p_claim_max = 0 OR v_key_left OR COALESCE(v_room, 0) <= 1) THEN
    SET v_wake = 1;
    SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO v_wake_queues
      FROM orbit_queue q FORCE INDEX (ix_queue_application)
     WHERE q.application_id = v_back_application_id AND q.paused = 0
       AND (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = q.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL;
  ELSEIF v_ended_count > 0 AND (v_requeued OR v_queue_limited) THEN
    -- One statement over the ended attempts, each lookup an index probe: they are joined first
    -- (STRAIGHT_JOIN) into a forced index, because an EXISTS over `lane = 'ready'` is otherwise
    -- materialised through ix_task_due, reading every ready task on every result. (SELECT ...
    -- INTO: a subquery in SET or IF would be a locking read.)
    SELECT EXISTS (SELECT 1
                     FROM (SELECT DISTINCT x.id, x.task_id, x.queue_id, x.quota_slot
             FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r
             STRAIGHT_JOIN orbit_attempt x FORCE INDEX (PRIMARY) ON x.id = r.attempt_id
            WHERE x.session_id = p_session_id AND x.released_at = v_now) e
                     STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = e.task_id
                    WHERE t.lane = 'ready')
        OR EXISTS (SELECT 1
                     FROM (SELECT DISTINCT x.id, x.task_id, x.queue_id, x.quota_slot
             FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r
             STRAIGHT_JOIN orbit_attempt x FORCE INDEX (PRIMARY) ON x.id = r.attempt_id
            WHERE x.session_id = p_session_id AND x.released_at = v_now) e
                     STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = e.queue_id
                    WHERE q.max_active_attempts > 0)
      INTO v_wake;
    IF v_wake THEN
      SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO v_wake_queues
      FROM (SELECT DISTINCT e.queue_id FROM (SELECT DISTINCT x.id, x.task_id, x.queue_id, x.quota_slot
             FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r
             STRAIGHT_JOIN orbit_attempt x FORCE INDEX (PRIMARY) ON x.id = r.attempt_id
            WHERE x.session_id = p_session_id AND x.released_at = v_now) e) w
      STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = w.queue_id
     WHERE q.paused = 0
       AND (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = q.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL;
    END IF;
  END IF;
  COMMIT;
  -- The acks on every row, the grants (v_granted, from orbit_task_grant) one per row in attempt
  -- order, or one row of NULL grant columns. Not one LEFT JOIN from a one-row table: its ORDER BY
  -- needed a temporary table, on disk because the task columns are TEXT (MariaDB's in-memory
  -- temporary tables hold no BLOB/TEXT), on every result.
  IF v_granted = 1 THEN
    SELECT v_acks AS acks, v_wake_queues AS wake_queues, v_deferred AS claim_again, a.id AS attempt_id, a.attempt_no, a.lease_expires_at, a.concurrency_token,
         a.key_slot, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at
      FROM orbit_attempt a
      JOIN orbit_task t ON t.id = a.task_id
     WHERE a.id = v_granted_id;
  ELSEIF v_granted > 1 THEN
    SELECT v_acks AS acks, v_wake_queues AS wake_queues, v_deferred AS claim_again, a.id AS attempt_id, a.attempt_no, a.lease_expires_at, a.concurrency_token,
         a.key_slot, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at
      FROM orbit_attempt a
      JOIN orbit_task t ON t.id = a.task_id
     WHERE a.session_id = p_session_id AND a.claim_seq = v_seq
     ORDER BY a.id;
  ELSE
    SELECT v_acks AS acks, v_wake_queues AS wake_queues, v_deferred AS claim_again,
           a.id AS attempt_id, a.attempt_no, a.lease_expires_at, a.concurrency_token,
         a.key_slot, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at
      FROM (SELECT 1 AS one) AS ack
      -- No row has id 0: a primary-key probe that finds nothing (ON FALSE is a full scan).
      LEFT JOIN orbit_attempt a ON a.id = 0
      LEFT JOIN orbit_task t ON t.id = 0;
  END IF;
END$$
DELIMITER ;

-- ---- orbit_attempt_get (from templates/procedures/orbit_attempt_get.sql) ----
-- orbit_attempt_get: Read one attempt, as its credential may see it.
--
-- History only: the concurrency_token shows what the resource saw; it grants nothing. An attempt
-- whose queue is outside the credential's reach is NOT_FOUND.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the attempt's queue); p_attempt_id.
-- Result (one row): the attempt columns:
--   attempt_id, task_id, attempt_no, queue_id, state VARCHAR, worker_id, session_id,
--   concurrency_token BIGINT UNSIGNED (0 = the task has no key), granted_at, lease_expires_at,
--   started_at (NULL = never started), released_at (NULL = still holds its permits), outcome
--   ('' while active), retryable, output (JSON or NULL), error (JSON or NULL), late_result
--   ('' = none); all times UTC.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND (no such attempt, or out
--   of reach).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_attempt_get;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_get(IN p_token_hash BINARY(32), IN p_attempt_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  SELECT a.queue_id INTO v_queue_id FROM orbit_attempt a WHERE a.id = p_attempt_id;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: attempt not found';
  END IF;
  SELECT a.id AS attempt_id, a.task_id, a.attempt_no, a.queue_id,
         a.state, a.worker_id, a.session_id, a.concurrency_token, a.granted_at,
         a.lease_expires_at, a.started_at, a.released_at, a.outcome, a.retryable,
         a.output, a.error, a.late_result FROM orbit_attempt a WHERE a.id = p_attempt_id;
END$$
DELIMITER ;

-- ---- orbit_attempt_grant (from templates/procedures/orbit_attempt_grant.sql) ----
-- orbit_attempt_grant: Internal: grant one locked task to a worker session, in the caller's transaction.
--
-- One grant of orbit_task_grant, which found the task (a ready candidate, or a hand-off's task),
-- locked it, and checked what is the session's to check: its state and credential, its queue's
-- room and the application's quota. Here, the task's own rules, one decision each, in order:
-- 1. Past its total deadline: the task expires (EXPIRED, with its event), and a keyed task's key
--    readies the queue's next task in its place.
-- 2. A keyed task: its key's permit, by the key's policy as it is now, so a change of limit or
--    rate applies from the key's next grant (p_policies = 0: the namespace had no policy when the
--    caller's visit began: one holder, no rate). The task goes back to the blocked lane when:
--    - the key is full (as many hold it as its limit allows: a head left ready when another
--      queue's task took the key's last slot, or a lowered limit); a release promotes it again;
--    - the key has granted its largest token (2^64-1), which is never wrapped: blocked_reason
--      TOKEN_EXHAUSTED and a grant_refused event, and nothing promotes it;
--    - its rate holds the grant back (orbit_key_rate_check): the key waits for rate_wake_at,
--      when orbit_task_promote_due promotes it, and nothing polls it meanwhile.
--    Otherwise it takes the key's lowest free slot (0 on the resource row, else the lowest free
--    orbit_key_slot row, else a new one after the last) and token highest_token + 1, and the
--    resource row's version advances.
-- 3. The attempt: the task's queue permit, and its key permit with the token and version
--    recorded on it; LEASED until p_expires, or RUNNING at once for a start_on_assign session (see
--    orbit_session_open). The task moves to it (its row updated once). A key with room left gets
--    its next task ready in each queue.
-- No history row: the attempt records the grant (granted_at, session, token) and a start on
-- assignment (started_at); see orbit_task_event. The quota charge is the caller's, for the
-- whole grant, last.
-- Parameters, as the caller read them: the session's (its row locked by the caller) p_session_id,
--   p_application_id, p_worker_id, p_start (start_on_assign) and p_seq (the claim_seq recorded on
--   the attempt); the task's (its row locked by the caller, after its scan or its hand-off's read)
--   p_task_id (WAITING in the ready lane, or blocked as a hand-off), p_namespace_id, p_queue_id,
--   p_resource_id (0: unkeyed), p_deadline (its total deadline, or NULL) and p_attempt_no (its
--   attempt_count + 1); p_policies: 1 when the task's namespace has a key policy; p_now;
--   p_expires: the lease's end.
-- Out: o_attempt_id: the attempt granted, NULL when the task was not granted; o_expired: 1 when
--   the task expired, and the caller gives back its incomplete-task charge with its quota work
--   (otherwise a task not granted went back to the blocked lane).
-- Result: none. Signals: none.
-- Locks: the caller holds the orbit_session and orbit_task rows. Then the task's key's
--   orbit_resource row (a hand-off's is held already, by the release that handed it off); the
--   new orbit_attempt row (or, for a task that expires or is refused, a new orbit_task_event
--   row); the key's orbit_key_slot row (a slot above 0; a new one is inserted) and
--   orbit_key_rate_log row (a key with a rate; a new one is inserted); the key's next tasks that
--   orbit_key_promote or orbit_key_promote_all readies, orbit_task rows (FOR UPDATE SKIP
--   LOCKED).
DROP PROCEDURE IF EXISTS orbit_attempt_grant;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_grant(IN p_session_id BIGINT UNSIGNED, IN p_application_id BIGINT UNSIGNED,
                                     IN p_worker_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, IN p_start TINYINT,
                                     IN p_seq BIGINT UNSIGNED,
                                     IN p_task_id BIGINT UNSIGNED, IN p_namespace_id BIGINT UNSIGNED,
                                     IN p_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin, IN p_resource_id BIGINT UNSIGNED,
                                     IN p_deadline DATETIME(6), IN p_attempt_no INT UNSIGNED,
                                     IN p_policies TINYINT, IN p_now DATETIME(6), IN p_expires DATETIME(6),
                                     OUT o_attempt_id BIGINT UNSIGNED, OUT o_expired TINYINT)
  MODIFIES SQL DATA
body: BEGIN
  -- The task's key: its holders, its policy's holder limit and rate, and the permit this grant
  -- takes (v_key_slot NULL: a new orbit_key_slot row, after v_slot_rows existing ones).
  DECLARE v_key VARBINARY(764);
  DECLARE v_highest BIGINT UNSIGNED;
  DECLARE v_version BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_holder BIGINT UNSIGNED;
  DECLARE v_holders SMALLINT UNSIGNED;
  DECLARE v_key_limit SMALLINT UNSIGNED DEFAULT 1;
  DECLARE v_rate_grants SMALLINT UNSIGNED DEFAULT 0;
  DECLARE v_rate_seconds INT UNSIGNED DEFAULT 0;
  -- A rate: when it lets this grant come, and whether this grant's position of
  -- orbit_key_rate_log has a row (orbit_key_rate_check).
  DECLARE v_allowed DATETIME(6);
  DECLARE v_logged TINYINT;
  DECLARE v_key_slot SMALLINT UNSIGNED DEFAULT 0;
  DECLARE v_slot_rows INT;
  DECLARE v_token BIGINT UNSIGNED DEFAULT 0;

  SET o_attempt_id = NULL, o_expired = 0;
  -- A keyed task's key row, locked first: its next task is readied under it when this one
  -- expires (a hand-off's is held already, by the release that handed it off).
  IF p_resource_id <> 0 THEN
    SELECT r.concurrency_key, r.highest_token, r.version, r.holder_attempt_id, r.holders
      INTO v_key, v_highest, v_version, v_holder, v_holders
      FROM orbit_resource r WHERE r.id = p_resource_id FOR UPDATE;
  END IF;

  -- 1. The deadline.
  IF p_deadline IS NOT NULL AND p_deadline <= p_now THEN
    UPDATE orbit_task t
     SET t.state = 'EXPIRED', t.lane = 'none', t.finished_at = p_now, t.updated_at = p_now
   WHERE t.id = p_task_id;
  INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
  VALUES (p_task_id, 'deadline_expired', 'WAITING', 'EXPIRED', 'total deadline passed before a grant', p_now);
    IF p_resource_id <> 0 THEN
      CALL orbit_key_promote(p_resource_id, p_queue_id, p_now);
    END IF;
    SET o_expired = 1;
    LEAVE body;
  END IF;

  -- 2. The key's permit.
  IF p_resource_id <> 0 THEN
    IF p_policies THEN
      -- A plain read of at most 1000 index entries of the namespace.
      SELECT p.holder_limit, p.rate_grants, p.rate_per_seconds INTO v_key_limit, v_rate_grants, v_rate_seconds
        FROM orbit_key_policy p
       WHERE p.namespace_id = p_namespace_id
         AND ((p.match_kind = 'exact' AND p.key_pattern = v_key)
              OR (p.match_kind = 'prefix' AND p.key_pattern = LEFT(v_key, LENGTH(p.key_pattern))))
       ORDER BY LENGTH(p.key_pattern) DESC, p.match_kind = 'exact' DESC
       LIMIT 1;
    END IF;
    IF v_holders >= v_key_limit THEN
      UPDATE orbit_task t SET t.lane = 'blocked', t.updated_at = p_now WHERE t.id = p_task_id;
      LEAVE body;
    END IF;
    IF v_highest = 18446744073709551615 THEN
      UPDATE orbit_task t
         SET t.lane = 'blocked', t.updated_at = p_now,
             t.blocked_reason = 'TOKEN_EXHAUSTED: this key has granted its largest token (2^64-1); no wrap-around'
       WHERE t.id = p_task_id;
      INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
      VALUES (p_task_id, 'grant_refused', 'WAITING', 'WAITING', 'TOKEN_EXHAUSTED', p_now);
      LEAVE body;
    END IF;
    IF v_rate_grants > 0 THEN
      CALL orbit_key_rate_check(p_resource_id, v_highest, v_rate_grants, v_rate_seconds, p_now, v_allowed, v_logged);
      IF v_allowed > p_now THEN
        UPDATE orbit_task t SET t.lane = 'blocked', t.updated_at = p_now WHERE t.id = p_task_id;
        UPDATE orbit_resource r SET r.rate_wake_at = v_allowed WHERE r.id = p_resource_id;
        LEAVE body;
      END IF;
    END IF;
    -- The lowest free slot (plain reads, exact under the resource row's lock): slot 0 while the
    -- resource row has no holder.
    IF v_holder <> 0 THEN
      SELECT MIN(IF(s.attempt_id = 0, s.slot, NULL)), COUNT(*) INTO v_key_slot, v_slot_rows
        FROM orbit_key_slot s
       WHERE s.resource_id = p_resource_id;
    END IF;
    SET v_token = v_highest + 1, v_version = v_version + 1;
  END IF;

  -- 3. The attempt, the key's permit, and the task's move.
  INSERT INTO orbit_attempt (task_id, attempt_no, application_id, namespace_id, queue_id, resource_id,
                             concurrency_token, grant_version, key_slot, session_id, worker_id, claim_seq,
                             quota_slot, state, granted_at, started_at, lease_expires_at)
  VALUES (p_task_id, p_attempt_no, p_application_id, p_namespace_id, p_queue_id, p_resource_id,
          v_token, v_version, COALESCE(v_key_slot, v_slot_rows + 1), p_session_id, p_worker_id, p_seq,
          (p_session_id % 16), IF(p_start, 'RUNNING', 'LEASED'), p_now, IF(p_start, p_now, NULL),
          p_expires);
  SET o_attempt_id = LAST_INSERT_ID();
  IF p_resource_id <> 0 THEN
    -- The key permit: slot 0 on the resource row, another slot on its orbit_key_slot row. The
    -- limit read above is kept for the steps that read no policy (m::key_full).
    UPDATE orbit_resource r
       SET r.highest_token = v_token, r.version = v_version, r.holders = r.holders + 1,
           r.holder_attempt_id = IF(v_key_slot = 0, o_attempt_id, r.holder_attempt_id),
           r.holder_limit = v_key_limit, r.rate_wake_at = NULL, r.updated_at = p_now
     WHERE r.id = p_resource_id;
    IF v_key_slot IS NULL THEN
      INSERT INTO orbit_key_slot (resource_id, slot, attempt_id, updated_at)
      VALUES (p_resource_id, v_slot_rows + 1, o_attempt_id, p_now);
    ELSEIF v_key_slot > 0 THEN
      UPDATE orbit_key_slot s
         SET s.attempt_id = o_attempt_id, s.updated_at = p_now
       WHERE s.resource_id = p_resource_id AND s.slot = v_key_slot;
    END IF;
    IF v_rate_grants > 0 THEN
      -- This grant's time, over grant k - G's.
      IF v_logged THEN
        UPDATE orbit_key_rate_log l
           SET l.token = v_token, l.granted_at = p_now
         WHERE l.resource_id = p_resource_id AND l.position = v_token % v_rate_grants;
      ELSE
        INSERT INTO orbit_key_rate_log (resource_id, position, token, granted_at)
        VALUES (p_resource_id, v_token % v_rate_grants, v_token, p_now);
      END IF;
    END IF;
  END IF;
  UPDATE orbit_task t
     SET t.state = IF(p_start, 'RUNNING', 'LEASED'), t.lane = 'none', t.attempt_count = p_attempt_no,
         t.current_attempt_id = o_attempt_id, t.blocked_reason = '', t.updated_at = p_now
   WHERE t.id = p_task_id;
  IF p_resource_id <> 0 AND v_holders + 1 < v_key_limit THEN
    -- Room for more: the key's next task in each queue becomes ready too (now that this one has
    -- left the ready lane).
    CALL orbit_key_promote_all(p_resource_id, p_now);
  END IF;
END$$
DELIMITER ;

-- ---- orbit_attempt_list (from templates/procedures/orbit_attempt_list.sql) ----
-- orbit_attempt_list: List every attempt of a task, in attempt_no order.
--
-- History only: an attempt's concurrency_token shows what the resource saw; it grants nothing.
-- A task outside the credential's reach is NOT_FOUND. A task without attempts gives no rows.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the task's queue); p_task_id.
-- Result (0..max_attempts rows, attempt_no order): the attempt columns:
--   attempt_id, task_id, attempt_no, queue_id, state VARCHAR, worker_id, session_id,
--   concurrency_token BIGINT UNSIGNED (0 = the task has no key), granted_at, lease_expires_at,
--   started_at (NULL = never started), released_at (NULL = still holds its permits), outcome
--   ('' while active), retryable, output (JSON or NULL), error (JSON or NULL), late_result
--   ('' = none); all times UTC.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND (no such task, or out of
--   reach).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_attempt_list;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_list(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: task not found';
  END IF;
  SELECT a.id AS attempt_id, a.task_id, a.attempt_no, a.queue_id,
         a.state, a.worker_id, a.session_id, a.concurrency_token, a.granted_at,
         a.lease_expires_at, a.started_at, a.released_at, a.outcome, a.retryable,
         a.output, a.error, a.late_result
    FROM orbit_attempt a
   WHERE a.task_id = p_task_id
   ORDER BY a.attempt_no;
END$$
DELIMITER ;

-- ---- orbit_attempt_renew (from templates/procedures/orbit_attempt_renew.sql) ----
-- orbit_attempt_renew: Extend active attempts' leases, and so their permits, each on its own, in one transaction.
--
-- An attempt keeps its token: renewing never grants anything new. An attempt whose lease has
-- already run out or that has ended is rejected; one that belongs to another session gets the
-- answer of one that does not exist (NOT_FOUND: ids of other sessions reveal nothing). A worker's
-- renewal message names all its attempts: one call and one commit for them all.
-- Parameters: p_session_id; p_attempt_ids: a JSON array of 1-1000 attempt ids; p_lease_ms
--   1000-3600000 (new expiry = now + lease).
-- Result (one row): answers, a JSON array with one object per id in input order {"attempt_id",
--   "renewed" (0/1), "code" ("" or LEASE_EXPIRED, NOT_FOUND, STATE_CONFLICT),
--   "lease_expires_at" (UTC, RFC 3339: the new expiry, or the old one when rejected; null when
--   not found or foreign)}.
-- Signals: INVALID_ARGUMENT (p_attempt_ids, p_lease_ms), UNAUTHENTICATED (the session is closed:
--   its socket went away, the sweep closed it, or its credential was revoked).
-- Locks, in order, per id: orbit_attempt row (its permits are its columns).
DROP PROCEDURE IF EXISTS orbit_attempt_renew;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_renew(IN p_session_id BIGINT UNSIGNED, IN p_attempt_ids TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_lease_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_count INT DEFAULT 0;
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_session_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_expires DATETIME(6);
  DECLARE v_code VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_answers MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_session_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_attempt_ids IS NULL OR NOT JSON_VALID(p_attempt_ids) OR JSON_TYPE(p_attempt_ids) <> 'ARRAY'
     OR JSON_LENGTH(p_attempt_ids) NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: attempt_ids must be a JSON array of 1-1000 ids';
  END IF;
  SET v_count = JSON_LENGTH(p_attempt_ids), v_i = 0;
  WHILE v_i < v_count DO
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']'))), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
       OR JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']')) < 1 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: attempt_ids must be positive integers';
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  SET v_session_state = NULL;
  SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id;
  IF v_session_state IS NULL OR v_session_state = 'closed' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: the session is closed';
  END IF;
  IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 3600000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: lease_ms must be between 1000 and 3600000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET v_i = 0;
  WHILE v_i < v_count DO
    SET v_attempt_id = CAST(JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']')) AS UNSIGNED),
        v_session_id = NULL, v_state = '', v_expires = NULL, v_code = '';
    SELECT a.session_id, a.state, a.lease_expires_at
      INTO v_session_id, v_state, v_expires
      FROM orbit_attempt a
     WHERE a.id = v_attempt_id
       FOR UPDATE;
    IF v_session_id IS NULL THEN
      SET v_code = 'NOT_FOUND';
    ELSEIF v_session_id <> p_session_id THEN
      SET v_code = 'NOT_FOUND', v_expires = NULL;
    ELSEIF v_state NOT IN ('LEASED', 'RUNNING') THEN
      SET v_code = 'STATE_CONFLICT';
    ELSEIF v_expires <= v_now THEN
      SET v_code = 'LEASE_EXPIRED';
    ELSE
      SET v_expires = DATE_ADD(v_now, INTERVAL p_lease_ms * 1000 MICROSECOND);
      UPDATE orbit_attempt a SET a.lease_expires_at = v_expires WHERE a.id = v_attempt_id;
    END IF;
    SET v_answers = CONCAT(v_answers, IF(v_i > 0, ',', ''),
                           JSON_OBJECT('attempt_id', CAST(v_attempt_id AS UNSIGNED), 'renewed', CAST(v_code = '' AS UNSIGNED),
                                       'code', v_code, 'lease_expires_at', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ'))),
        v_i = v_i + 1;
  END WHILE;
  COMMIT;
  SELECT CONCAT('[', v_answers, ']') AS answers;
END$$
DELIMITER ;

-- ---- orbit_attempt_start (from templates/procedures/orbit_attempt_start.sql) ----
-- orbit_attempt_start: Confirm the execution right of leased attempts: LEASED -> RUNNING, each on its own, in one transaction.
--
-- Business code may run only after its attempt is accepted. The lease is re-checked inside the
-- transaction: an attempt whose lease has run out (or that recovery already ended) is rejected,
-- so a worker that was paused past its lease never starts. Starting an attempt that is already
-- RUNNING for the same session is accepted again (a repeated start message). A worker's start
-- messages that arrive together share one call and one commit (SPEC §10); each attempt is
-- answered on its own, in the order given. No history row: the attempt's started_at records the
-- start (see orbit_task_event).
-- Parameters: p_session_id; p_attempt_ids: a JSON array of 1-1000 attempt ids.
-- Result (one row): answers, a JSON array with one object per id in input order {"attempt_id",
--   "accepted" (0/1), "code" ("" when accepted; LEASE_EXPIRED, NOT_FOUND (no such attempt, or
--   another session's: one answer) or STATE_CONFLICT (attempt ended)), "state" (the attempt's state
--   after the call; "" when not found or foreign), "lease_expires_at" (UTC, RFC 3339; null when
--   not found or foreign), "concurrency_token" (0 when not found or foreign)}.
-- Signals: INVALID_ARGUMENT (p_attempt_ids), UNAUTHENTICATED (the session is closed: its socket
--   went away, the sweep closed it, or its credential was revoked); none for the answers above.
-- Locks, in order, per id: orbit_attempt row, orbit_task row.
DROP PROCEDURE IF EXISTS orbit_attempt_start;
DELIMITER $$
CREATE PROCEDURE orbit_attempt_start(IN p_session_id BIGINT UNSIGNED, IN p_attempt_ids TEXT CHARACTER SET ascii COLLATE ascii_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_count INT DEFAULT 0;
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_session_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6);
  DECLARE v_token BIGINT UNSIGNED;
  DECLARE v_code VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_answers MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_session_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_attempt_ids IS NULL OR NOT JSON_VALID(p_attempt_ids) OR JSON_TYPE(p_attempt_ids) <> 'ARRAY'
     OR JSON_LENGTH(p_attempt_ids) NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: attempt_ids must be a JSON array of 1-1000 ids';
  END IF;
  SET v_count = JSON_LENGTH(p_attempt_ids), v_i = 0;
  WHILE v_i < v_count DO
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']'))), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
       OR JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']')) < 1 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: attempt_ids must be positive integers';
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  SET v_session_state = NULL;
  SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id;
  IF v_session_state IS NULL OR v_session_state = 'closed' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: the session is closed';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET v_i = 0;
  WHILE v_i < v_count DO
    SET v_attempt_id = CAST(JSON_EXTRACT(p_attempt_ids, CONCAT('$[', v_i, ']')) AS UNSIGNED),
        v_session_id = NULL, v_state = '', v_expires = NULL, v_token = 0, v_code = '';
    SELECT a.session_id, a.state, a.task_id, a.lease_expires_at, a.concurrency_token
      INTO v_session_id, v_state, v_task_id, v_expires, v_token
      FROM orbit_attempt a
     WHERE a.id = v_attempt_id
       FOR UPDATE;
    IF v_session_id IS NULL THEN
      SET v_code = 'NOT_FOUND';
    ELSEIF v_session_id <> p_session_id THEN
      SET v_code = 'NOT_FOUND';
    ELSEIF v_state = 'RUNNING' THEN
      SET v_code = '';
    ELSEIF v_state <> 'LEASED' THEN
      SET v_code = 'STATE_CONFLICT';
    ELSEIF v_expires <= v_now THEN
      SET v_code = 'LEASE_EXPIRED';
    ELSE
      SELECT t.id INTO v_lock FROM orbit_task t WHERE t.id = v_task_id FOR UPDATE;
      UPDATE orbit_attempt a SET a.state = 'RUNNING', a.started_at = v_now WHERE a.id = v_attempt_id;
      UPDATE orbit_task t SET t.state = 'RUNNING', t.updated_at = v_now WHERE t.id = v_task_id;
      SET v_state = 'RUNNING';
    END IF;
    IF v_code = 'NOT_FOUND' THEN
      SET v_state = '', v_expires = NULL, v_token = 0;
    END IF;
    SET v_answers = CONCAT(v_answers, IF(v_i > 0, ',', ''),
                           JSON_OBJECT('attempt_id', CAST(v_attempt_id AS UNSIGNED), 'accepted', CAST(v_code = '' AS UNSIGNED),
                                       'code', v_code, 'state', v_state, 'lease_expires_at', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ'),
                                       'concurrency_token', CAST(v_token AS UNSIGNED))),
        v_i = v_i + 1;
  END WHILE;
  COMMIT;
  SELECT CONCAT('[', v_answers, ']') AS answers;
END$$
DELIMITER ;

-- ---- orbit_auth_check (from templates/procedures/orbit_auth_check.sql) ----
-- orbit_auth_check: Internal: authenticate a token hash and require one scope.
--
-- Called first by every API procedure, so a DBA calling a procedure gets the same rules as an HTTP
-- client. Tokens are never stored: callers pass the SHA-256 of the bearer token.
-- Parameters: p_token_hash BINARY(32); p_scope: one of queues:manage, tasks:submit, tasks:read,
--   workers:connect, workers:consume, metrics:read.
-- Out: o_application_id, o_environment_id, o_credential_id of the active credential.
-- Signals: UNAUTHENTICATED (unknown or revoked token), PERMISSION_DENIED (scope not granted).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_auth_check;
DELIMITER $$
CREATE PROCEDURE orbit_auth_check(
  IN p_token_hash BINARY(32),
  IN p_scope VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  OUT o_application_id BIGINT UNSIGNED,
  OUT o_environment_id BIGINT UNSIGNED,
  OUT o_credential_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_scopes VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4;
  SET o_application_id = NULL, o_environment_id = NULL, o_credential_id = NULL;
  SELECT c.id, c.application_id, c.environment_id, c.scopes
    INTO o_credential_id, o_application_id, o_environment_id, v_scopes
    FROM orbit_credential c
   WHERE c.token_hash = p_token_hash AND c.revoked_at IS NULL;
  IF o_credential_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: unknown or revoked bearer token';
  END IF;
  IF FIND_IN_SET(p_scope, v_scopes) = 0 THEN
    SET v_message = CONCAT('PERMISSION_DENIED: the credential lacks the ', p_scope, ' scope');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END$$
DELIMITER ;

-- ---- orbit_auth_queue_check (from templates/procedures/orbit_auth_queue_check.sql) ----
-- orbit_auth_queue_check: Internal: authenticate, require a scope, and authorise one queue.
--
-- The same rules as orbit_auth_check followed by the queue's, read in one statement
-- (m::credential_queue_read; a single submit runs this on every task).
-- Parameters: p_token_hash BINARY(32); p_scope (see orbit_auth_check); p_queue_id CHAR(32).
-- Out: o_application_id, o_namespace_id, o_credential_id.
-- Signals: UNAUTHENTICATED; PERMISSION_DENIED (scope missing, or the queue is in the credential's
--   namespace but not in its queue list); NOT_FOUND (no such queue in the credential's
--   application, environment and namespaces: another tenant's queue does not leak its existence).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_auth_queue_check;
DELIMITER $$
CREATE PROCEDURE orbit_auth_queue_check(
  IN p_token_hash BINARY(32),
  IN p_scope VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  OUT o_application_id BIGINT UNSIGNED,
  OUT o_namespace_id BIGINT UNSIGNED,
  OUT o_credential_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_scopes VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_queue_granted TINYINT DEFAULT 0;
  DECLARE v_namespace_grants INT DEFAULT 0;
  SET o_application_id = NULL, o_namespace_id = NULL, o_credential_id = NULL;
  SELECT c.id, c.application_id, c.environment_id, c.scopes, q.namespace_id,
         whole.credential_id IS NOT NULL OR listed.credential_id IS NOT NULL
    INTO o_credential_id, o_application_id, v_environment_id, v_scopes, o_namespace_id, v_queue_granted
    FROM orbit_credential c
    LEFT JOIN orbit_queue q
      ON q.id = p_queue_id AND q.application_id = c.application_id AND q.environment_id = c.environment_id
    LEFT JOIN orbit_credential_scope whole
      ON whole.credential_id = c.id AND whole.namespace_id = q.namespace_id AND whole.queue_id = ''
    LEFT JOIN orbit_credential_scope listed
      ON listed.credential_id = c.id AND listed.namespace_id = q.namespace_id AND listed.queue_id = p_queue_id
   WHERE c.token_hash = p_token_hash AND c.revoked_at IS NULL;
  IF o_credential_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: unknown or revoked bearer token';
  END IF;
  IF FIND_IN_SET(p_scope, v_scopes) = 0 THEN
    SET v_message = CONCAT('PERMISSION_DENIED: the credential lacks the ', p_scope, ' scope');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  IF NOT v_queue_granted THEN
    -- Refused: NOT_FOUND unless the credential has a grant in the queue's namespace.
    IF o_namespace_id IS NOT NULL THEN
      SELECT COUNT(*) INTO v_namespace_grants
        FROM orbit_credential_scope s
       WHERE s.credential_id = o_credential_id AND s.namespace_id = o_namespace_id;
    END IF;
    IF v_namespace_grants = 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: queue not found';
    END IF;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'PERMISSION_DENIED: the queue is outside the credential queue scope';
  END IF;
END$$
DELIMITER ;

-- ---- orbit_auth_queue_visible (from templates/procedures/orbit_auth_queue_visible.sql) ----
-- orbit_auth_queue_visible: Internal: authenticate, require a scope, and tell whether a queue is visible.
--
-- For reads whose answer for anything outside the credential's reach is NOT_FOUND (queue get,
-- attempts): unlike orbit_auth_queue_check, a queue of the credential's namespace that is not in
-- its queue list is simply not visible. The caller raises its own NOT_FOUND.
-- The same rules as orbit_auth_check, with the queue read in the same statement
-- (m::credential_queue_read).
-- Parameters: p_token_hash BINARY(32); p_scope (see orbit_auth_check); p_queue_id (NULL = none).
-- Out: o_application_id, o_environment_id, o_credential_id; o_visible 1 when the queue exists in
--   the credential's application and environment and within its queue scope, else 0.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_auth_queue_visible;
DELIMITER $$
CREATE PROCEDURE orbit_auth_queue_visible(
  IN p_token_hash BINARY(32),
  IN p_scope VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  OUT o_application_id BIGINT UNSIGNED,
  OUT o_environment_id BIGINT UNSIGNED,
  OUT o_credential_id BIGINT UNSIGNED,
  OUT o_visible TINYINT)
  READS SQL DATA
BEGIN
  DECLARE v_scopes VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  SET o_application_id = NULL, o_environment_id = NULL, o_credential_id = NULL, o_visible = 0;
  SELECT c.id, c.application_id, c.environment_id, c.scopes, q.namespace_id,
         whole.credential_id IS NOT NULL OR listed.credential_id IS NOT NULL
    INTO o_credential_id, o_application_id, o_environment_id, v_scopes, v_namespace_id, o_visible
    FROM orbit_credential c
    LEFT JOIN orbit_queue q
      ON q.id = p_queue_id AND q.application_id = c.application_id AND q.environment_id = c.environment_id
    LEFT JOIN orbit_credential_scope whole
      ON whole.credential_id = c.id AND whole.namespace_id = q.namespace_id AND whole.queue_id = ''
    LEFT JOIN orbit_credential_scope listed
      ON listed.credential_id = c.id AND listed.namespace_id = q.namespace_id AND listed.queue_id = p_queue_id
   WHERE c.token_hash = p_token_hash AND c.revoked_at IS NULL;
  IF o_credential_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: unknown or revoked bearer token';
  END IF;
  IF FIND_IN_SET(p_scope, v_scopes) = 0 THEN
    SET v_message = CONCAT('PERMISSION_DENIED: the credential lacks the ', p_scope, ' scope');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END$$
DELIMITER ;

-- ---- orbit_credential_check (from templates/procedures/orbit_credential_check.sql) ----
-- orbit_credential_check: Authenticate a token and require one scope (e.g. before a WebSocket upgrade).
--
-- Parameters: p_token_hash BINARY(32); p_scope (see orbit_auth_check).
-- Result (one row): credential_id, application_id, environment_id.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED.
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_credential_check;
DELIMITER $$
CREATE PROCEDURE orbit_credential_check(IN p_token_hash BINARY(32), IN p_scope TEXT CHARACTER SET ascii COLLATE ascii_bin)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  IF p_scope IS NULL OR CHAR_LENGTH(p_scope) NOT BETWEEN 1 AND 32 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: scope must be a scope name';
  END IF;
  CALL orbit_auth_check(p_token_hash, p_scope, v_application_id, v_environment_id, v_credential_id);
  SELECT v_credential_id AS credential_id, v_application_id AS application_id, v_environment_id AS environment_id;
END$$
DELIMITER ;

-- ---- orbit_credential_create (from templates/procedures/orbit_credential_create.sql) ----
-- orbit_credential_create: Create a credential for one namespace: all of its queues, or a list.
--
-- Operator entry point (like orbit_admin_bootstrap), not reachable over HTTP: it takes no token.
-- Unlike bootstrap it creates nothing but the credential: the application, environment,
-- namespace and every listed queue must exist. The caller computes the hash from a fresh random
-- token; the token itself is never stored.
-- Parameters: p_application, p_environment, p_namespace: names; p_queue_ids_json: JSON array of
--   queue ids of that namespace ('[]' = every queue of the namespace, present and future; at most
--   1000); p_token_hash (the 32 bytes of a SHA-256; BLOB so a wrong length is refused, not
--   padded); p_token_hint (first 8 characters of the token); p_scopes:
--   comma-separated subset of queues:manage,tasks:submit,tasks:read,workers:connect,
--   workers:consume,metrics:read; p_label: free text (NULL = '').
-- Result (one row): credential_id, application_id, environment_id, namespace_id.
-- Signals: INVALID_ARGUMENT, NOT_FOUND (application, environment, namespace, or a queue not in
--   the namespace), STATE_CONFLICT (a credential with this token hash exists).
-- Locks: the new orbit_credential and orbit_credential_scope rows.
DROP PROCEDURE IF EXISTS orbit_credential_create;
DELIMITER $$
CREATE PROCEDURE orbit_credential_create(
  IN p_application TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_environment TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_namespace TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_queue_ids_json TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_token_hash BLOB,
  IN p_token_hint TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_scopes TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_label TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_found INT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_environment_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_count INT;
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_queue_ids_json IS NULL OR NOT JSON_VALID(p_queue_ids_json) OR JSON_TYPE(p_queue_ids_json) <> 'ARRAY'
     OR JSON_LENGTH(p_queue_ids_json) > 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: queue_ids must be an array of at most 1000 queue ids ([] = all)';
  END IF;
  IF p_token_hash IS NULL OR LENGTH(p_token_hash) <> 32 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: token_hash must be a 32-byte SHA-256';
  END IF;
  IF p_scopes IS NULL OR p_scopes = '' OR p_scopes NOT REGEXP
     '^((queues:manage|tasks:submit|tasks:read|workers:connect|workers:consume|metrics:read)(,|$))+$' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: scopes must be a comma-separated list of known scopes';
  END IF;
  IF CHAR_LENGTH(COALESCE(p_label, '')) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: label must be at most 191 characters';
  END IF;
  SELECT a.id INTO v_application_id FROM orbit_application a WHERE a.name = p_application;
  IF v_application_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: application not found';
  END IF;
  SELECT e.id INTO v_environment_id FROM orbit_environment e
   WHERE e.application_id = v_application_id AND e.name = p_environment;
  IF v_environment_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: environment not found in the application';
  END IF;
  SELECT n.id INTO v_namespace_id FROM orbit_namespace n
   WHERE n.environment_id = v_environment_id AND n.name = p_namespace;
  IF v_namespace_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: namespace not found in the environment';
  END IF;
  SET v_count = JSON_LENGTH(p_queue_ids_json);
  WHILE v_i < v_count DO
    SET v_queue_id = JSON_UNQUOTE(JSON_EXTRACT(p_queue_ids_json, CONCAT('$[', v_i, ']')));
    -- Queues are never deleted, so checking before the transaction is enough.
    SELECT COUNT(*) INTO v_found FROM orbit_queue q WHERE q.id = v_queue_id AND q.namespace_id = v_namespace_id;
    IF v_queue_id = '' OR v_found = 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: queue not found in the namespace';
    END IF;
    SET v_i = v_i + 1;
  END WHILE;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO orbit_credential (application_id, environment_id, label, token_hash, token_hint, scopes, created_at)
  VALUES (v_application_id, v_environment_id, COALESCE(p_label, ''), p_token_hash, LEFT(COALESCE(p_token_hint, ''), 8),
          p_scopes, v_now);
  IF v_duplicate THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: a credential with this token hash already exists';
  END IF;
  SET v_credential_id = LAST_INSERT_ID();
  IF v_count = 0 THEN
    INSERT INTO orbit_credential_scope (credential_id, namespace_id, queue_id) VALUES (v_credential_id, v_namespace_id, '');
  END IF;
  SET v_i = 0;
  WHILE v_i < v_count DO
    -- INSERT IGNORE: a queue listed twice is granted once.
    INSERT IGNORE INTO orbit_credential_scope (credential_id, namespace_id, queue_id)
    VALUES (v_credential_id, v_namespace_id, JSON_UNQUOTE(JSON_EXTRACT(p_queue_ids_json, CONCAT('$[', v_i, ']'))));
    SET v_i = v_i + 1;
  END WHILE;
  COMMIT;
  SELECT v_credential_id AS credential_id, v_application_id AS application_id, v_environment_id AS environment_id,
         v_namespace_id AS namespace_id;
END$$
DELIMITER ;

-- ---- orbit_credential_list (from templates/procedures/orbit_credential_list.sql) ----
-- orbit_credential_list: List credentials for operators, in id order, a page at a time.
--
-- Operator entry point, not reachable over HTTP: it takes no token (like orbit_credential_create).
-- Never returns a token or its hash: only the 8-character hint the token starts with. Keyset
-- pagination: pass the last credential_id of a page as p_after_id for the next one; reads the
-- primary key in order (ix_credential_application when an application is named).
-- Parameters: p_application (NULL = every application; a name that does not exist lists nothing);
--   p_include_revoked 0/1; p_limit 1-1000; p_after_id (NULL = from the first).
-- Result (0..p_limit rows): credential_id, application, environment, label, token_hint, scopes
--   (comma-separated), namespaces (comma-separated names of the namespaces it reaches), queue_ids
--   (comma-separated; '' = every queue of those namespaces), created_at, revoked_at (NULL =
--   active).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_credential_list;
DELIMITER $$
CREATE PROCEDURE orbit_credential_list(IN p_application VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, IN p_include_revoked TINYINT, IN p_limit INT, IN p_after_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;
  SELECT c.id AS credential_id, a.name AS application, e.name AS environment, c.label,
         c.token_hint, CAST(c.scopes AS CHAR) AS scopes,
         (SELECT GROUP_CONCAT(DISTINCT n.name ORDER BY n.name SEPARATOR ',')
            FROM orbit_credential_scope s JOIN orbit_namespace n ON n.id = s.namespace_id
           WHERE s.credential_id = c.id) AS namespaces,
         (SELECT COALESCE(GROUP_CONCAT(s.queue_id ORDER BY s.queue_id SEPARATOR ','), '')
            FROM orbit_credential_scope s
           WHERE s.credential_id = c.id AND s.queue_id <> '') AS queue_ids,
         c.created_at, c.revoked_at
    FROM orbit_credential c
    JOIN orbit_application a ON a.id = c.application_id
    JOIN orbit_environment e ON e.id = c.environment_id
   WHERE c.id > COALESCE(p_after_id, 0)
     AND (p_application IS NULL OR a.name = p_application)
     AND (p_include_revoked = 1 OR c.revoked_at IS NULL)
   ORDER BY c.id
   LIMIT p_limit;
END$$
DELIMITER ;

-- ---- orbit_credential_revoke (from templates/procedures/orbit_credential_revoke.sql) ----
-- orbit_credential_revoke: Revoke a credential: its token is UNAUTHENTICATED from now on.
--
-- Operator entry point, not reachable over HTTP: it takes no token. Idempotent: revoking again
-- keeps the first revoked_at. The credential's open worker sessions are closed in the same
-- transaction: their next frame (a renewal, start or result) is refused UNAUTHENTICATED and the
-- server ends the socket, so a result sent after revocation is not recorded; their attempts in
-- flight end by lease expiry (orbit_lease_recover) and their keys go to the next holder with a
-- larger token.
-- Parameters: p_credential_id.
-- Result (one row): credential_id, revoked_at DATETIME(6) (UTC).
-- Signals: NOT_FOUND.
-- Locks: the orbit_credential row, then the credential's open orbit_session rows
--   (ix_session_credential).
DROP PROCEDURE IF EXISTS orbit_credential_revoke;
DELIMITER $$
CREATE PROCEDURE orbit_credential_revoke(IN p_credential_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_revoked_at DATETIME(6) DEFAULT NULL;
  DECLARE v_found TINYINT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT 1, c.revoked_at INTO v_found, v_revoked_at FROM orbit_credential c WHERE c.id = p_credential_id FOR UPDATE;
  IF NOT v_found THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: credential not found';
  END IF;
  IF v_revoked_at IS NULL THEN
    SET v_revoked_at = v_now;
    UPDATE orbit_credential c SET c.revoked_at = v_now WHERE c.id = p_credential_id;
  END IF;
  UPDATE orbit_session s
     SET s.state = 'closed', s.closed_at = v_now
   WHERE s.credential_id = p_credential_id AND s.state IN ('active', 'draining');
  COMMIT;
  SELECT p_credential_id AS credential_id, v_revoked_at AS revoked_at;
END$$
DELIMITER ;

-- ---- orbit_extension_version (from templates/procedures/orbit_extension_version.sql) ----
-- orbit_extension_version: Report the installed extension version (what `serve` and /readyz check).
--
-- Parameters: none.
-- Result (one row): version BIGINT UNSIGNED (0 when the catalog has no extension row),
--                   checksum CHAR(64) (of the migration that installed it; '' when none).
-- Signals: none.
-- Locks: none (a plain consistent read).
DROP PROCEDURE IF EXISTS orbit_extension_version;
DELIMITER $$
CREATE PROCEDURE orbit_extension_version()
  READS SQL DATA
BEGIN
  SELECT CAST(COALESCE(MAX(e.version), 0) AS UNSIGNED) AS version,
         CAST(COALESCE(MAX(e.checksum), '') AS CHAR(64)) AS checksum
    FROM orbit_extension e
   WHERE e.kind = 'extension' AND e.name = 'orbit';
END$$
DELIMITER ;

-- ---- orbit_key_get (from templates/procedures/orbit_key_get.sql) ----
-- orbit_key_get: Inspect one concurrency key: its token, its holder, and who waits for it.
--
-- Answers "why is my task waiting, and who holds the key?" from the mariadb client:
--   CALL orbit_key_get(UNHEX(SHA2('<token>', 256)), <namespace id>, '<key>');
-- The namespace must be in the credential's scope as a whole (a namespace-wide grant): a key
-- spans every queue of its namespace. A key nobody ever submitted a task with has no row: it
-- gets NOT_FOUND, the same answer as another tenant's namespace or key (no existence oracle). A
-- known key that is free and has no waiters answers with its token, no holder and no queues.
-- Waiting tasks are those of the key in the 'blocked' lane (the key is held, or its queue already
-- has a ready task of the key) or the 'ready' lane (claimable now). Retries not yet due
-- ('scheduled') are not waiting for the key.
-- Cost: independent of the number of keys and tasks. Every read is an index probe: the resource
-- row by ux_resource_key, the oldest holder by its primary key (from the resource row and the key's orbit_key_slot rows), the queues of the key by ordered probes of
-- ix_task_key (two per queue), each queue's oldest waiter by one probe per lane and priority (20),
-- its head by one or two ordered probes, and its count reads at most 10,001 index entries (a count of 10,000 with waiting_more = 1 means "10,000 or more").
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_namespace_id; p_key (exact bytes,
--   the rules of orbit_key_validate; '' is not a key).
-- Result (one row), all times UTC:
--   namespace_id, concurrency_key (text), highest_token (0 = never granted);
--   holder_attempt_id, holder_task_id, holder_queue_id, holder_worker_id, holder_session_id,
--     holder_state (LEASED or RUNNING), holder_granted_at, holder_lease_expires_at,
--     holder_token: the key's oldest holder (the lowest attempt id of its holders), all NULL
--     when nobody holds the key;
--   waiting (tasks waiting for the key, summed over queues, each queue counted up to 10,000),
--     waiting_more (1 when some queue has more than it counted);
--   oldest_task_id, oldest_waiting_since (the waiting task accepted first and its run_at: the
--     time it became due), NULL when none waits;
--   next_task_id, next_queue_id, next_lane: the task the key goes to next: the best ready task
--     (priority, then id) if any, else the best blocked one that may be granted (blocked_reason
--     empty), as a release hands the key on; NULL when none;
--   queues: JSON array, one object per queue with waiting tasks, in queue id order:
--     {"queue_id", "waiting", "waiting_more" (1 or 0), "ready", "oldest_task_id",
--      "oldest_waiting_since" (ISO 8601), "next_task_id"};
--   recent_grants: JSON array of the key's last 10 grants, newest first (the holder's included),
--     one object per attempt: {"attempt_id", "task_id", "queue_id", "worker_id", "state",
--     "concurrency_token", "key_slot", "granted_at", "released_at" (ISO 8601; null while held), "outcome"
--     ('' while active)}: ten ordered probes of ix_attempt_resource;
--   policy_id, on_busy: the key policy a submit for this key meets now (orbit_key_policy; NULL
--     and 'queue' when none matches);
--   holders (attempts holding the key now), holder_limit, rate_grants, rate_per_seconds (the
--     policy's, which the key's next grant applies: 1, 0 and 0 when none matches), rate_wake_at
--     (when the key's rate lets a grant through again while one waits for it; NULL otherwise).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT (p_key), NOT_FOUND (no such key
--   in a namespace the credential reaches as a whole).
-- Locks: none (a consistent read in one read-only snapshot).
DROP PROCEDURE IF EXISTS orbit_key_get;
DELIMITER $$
CREATE PROCEDURE orbit_key_get(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED, IN p_key BLOB)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_policy_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT 'queue';
  DECLARE v_limit SMALLINT UNSIGNED DEFAULT 1;
  DECLARE v_rate_grants SMALLINT UNSIGNED DEFAULT 0;
  DECLARE v_rate_seconds INT UNSIGNED DEFAULT 0;
  DECLARE v_oldest_holder BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_next_ready CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_next_blocked CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_step CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_p INT;
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_ready INT;
  DECLARE v_oldest BIGINT UNSIGNED;
  DECLARE v_since DATETIME(6);
  DECLARE v_head BIGINT UNSIGNED;
  DECLARE v_head_priority INT;
  DECLARE v_head_lane VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_waiting BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_more TINYINT DEFAULT 0;
  DECLARE v_key_oldest BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_key_since DATETIME(6) DEFAULT NULL;
  DECLARE v_next BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_next_queue CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_next_lane VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_next_priority INT;
  DECLARE v_queues LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_grants LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_grant BIGINT UNSIGNED;
  DECLARE v_before BIGINT UNSIGNED DEFAULT 18446744073709551615;
  DECLARE v_g INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  CALL orbit_key_validate(p_key);
  IF p_key = '' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: concurrency_key is required';
  END IF;

  SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION READ ONLY;
  SELECT r.id INTO v_resource_id
    FROM orbit_namespace n
    JOIN orbit_resource r ON r.namespace_id = n.id AND r.concurrency_key = p_key
   WHERE n.id = p_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
     AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                  WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '');
  IF v_resource_id IS NULL THEN
    COMMIT;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: key not found';
  END IF;

  -- The queues with waiting tasks of the key, in queue id order.
  queues: LOOP
    SET v_next_ready = NULL, v_next_blocked = NULL;
    SELECT t.queue_id INTO v_next_ready FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id > v_queue_id
     ORDER BY t.queue_id LIMIT 1;
    SELECT t.queue_id INTO v_next_blocked FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id > v_queue_id
     ORDER BY t.queue_id LIMIT 1;
    SET v_step = LEAST(COALESCE(v_next_ready, v_next_blocked), COALESCE(v_next_blocked, v_next_ready));
    IF v_step IS NULL THEN
      LEAVE queues;
    END IF;
    SET v_queue_id = v_step;
    SELECT COUNT(*) INTO v_count
      FROM (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_key)
             WHERE t.resource_id = v_resource_id AND t.lane IN ('ready', 'blocked') AND t.queue_id = v_queue_id
             LIMIT 10001) x;
    SELECT COUNT(*) INTO v_ready
      FROM (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_key)
             WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id = v_queue_id
             LIMIT 10001) x;
    SET v_oldest = NULL, v_p = 0;
    WHILE v_p <= 9 DO
      SET v_id = NULL;
      SELECT t.id INTO v_id FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id = v_queue_id AND t.priority = v_p
       ORDER BY t.id LIMIT 1;
      IF v_id IS NOT NULL AND (v_oldest IS NULL OR v_id < v_oldest) THEN
        SET v_oldest = v_id;
      END IF;
      SET v_id = NULL;
      SELECT t.id INTO v_id FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id = v_queue_id AND t.priority = v_p
       ORDER BY t.id LIMIT 1;
      IF v_id IS NOT NULL AND (v_oldest IS NULL OR v_id < v_oldest) THEN
        SET v_oldest = v_id;
      END IF;
      SET v_p = v_p + 1;
    END WHILE;
    SELECT t.run_at INTO v_since FROM orbit_task t WHERE t.id = v_oldest;
    -- The queue's head: its ready task, else its best blocked task a grant may take.
    SET v_head = NULL, v_head_lane = 'ready';
    SELECT t.id, t.priority INTO v_head, v_head_priority FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id = v_queue_id
     ORDER BY t.priority, t.id LIMIT 1;
    IF v_head IS NULL THEN
      SET v_head_lane = 'blocked';
      SELECT t.id, t.priority INTO v_head, v_head_priority FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id = v_queue_id
         AND t.blocked_reason = ''
       ORDER BY t.priority, t.id LIMIT 1;
    END IF;
    IF v_head IS NOT NULL
       AND (v_next IS NULL OR (v_head_lane = 'ready' AND v_next_lane = 'blocked')
            OR (v_head_lane = v_next_lane AND (v_head_priority < v_next_priority
                                               OR (v_head_priority = v_next_priority AND v_head < v_next)))) THEN
      SET v_next = v_head, v_next_queue = v_queue_id, v_next_lane = v_head_lane, v_next_priority = v_head_priority;
    END IF;
    IF v_key_oldest IS NULL OR v_oldest < v_key_oldest THEN
      SET v_key_oldest = v_oldest, v_key_since = v_since;
    END IF;
    SET v_waiting = v_waiting + LEAST(v_count, 10000), v_more = v_more OR v_count > 10000;
    -- `+ 0` on the variables: MariaDB's JSON_OBJECT writes a bare procedure variable as a string.
    SET v_queues = JSON_ARRAY_APPEND(v_queues, '$', JSON_OBJECT(
          'queue_id', v_queue_id, 'waiting', LEAST(v_count, 10000),
          'waiting_more', IF(v_count > 10000, 1, 0),
          'ready', LEAST(v_ready, 10000), 'oldest_task_id', v_oldest + 0,
          'oldest_waiting_since', DATE_FORMAT(v_since, '%Y-%m-%dT%H:%i:%s.%fZ'), 'next_task_id', v_head + 0));
  END LOOP queues;

  -- The key's last grants, newest first: one ordered probe of ix_attempt_resource each.
  grants: WHILE v_g < 10 DO
    SET v_g = v_g + 1, v_grant = NULL;
    SELECT a.id INTO v_grant FROM orbit_attempt a FORCE INDEX (ix_attempt_resource)
     WHERE a.resource_id = v_resource_id AND a.id < v_before
     ORDER BY a.id DESC LIMIT 1;
    IF v_grant IS NULL THEN
      LEAVE grants;
    END IF;
    SET v_before = v_grant;
    SELECT JSON_ARRAY_APPEND(v_grants, '$', JSON_OBJECT(
             'attempt_id', a.id, 'task_id', a.task_id, 'queue_id', a.queue_id, 'worker_id', a.worker_id,
             'state', CAST(a.state AS CHAR), 'concurrency_token', a.concurrency_token,
             'key_slot', a.key_slot, 'granted_at', DATE_FORMAT(a.granted_at, '%Y-%m-%dT%H:%i:%s.%fZ'),
             'released_at', DATE_FORMAT(a.released_at, '%Y-%m-%dT%H:%i:%s.%fZ'), 'outcome', CAST(a.outcome AS CHAR)))
      INTO v_grants
      FROM orbit_attempt a WHERE a.id = v_grant;
  END WHILE grants;

  -- The key policy a submit for this key meets now.
  SELECT p.id, CAST(p.on_busy AS CHAR), p.holder_limit, p.rate_grants, p.rate_per_seconds
    INTO v_policy_id, v_on_busy, v_limit, v_rate_grants, v_rate_seconds
    FROM orbit_key_policy p
       WHERE p.namespace_id = p_namespace_id
         AND ((p.match_kind = 'exact' AND p.key_pattern = p_key)
              OR (p.match_kind = 'prefix' AND p.key_pattern = LEFT(p_key, LENGTH(p.key_pattern))))
       ORDER BY LENGTH(p.key_pattern) DESC, p.match_kind = 'exact' DESC
       LIMIT 1;
  -- The oldest holder: slot 0's or a slot row's.
  SELECT MIN(h.attempt_id) INTO v_oldest_holder
    FROM (SELECT r.holder_attempt_id AS attempt_id FROM orbit_resource r
           WHERE r.id = v_resource_id AND r.holder_attempt_id <> 0
          UNION ALL
          SELECT s.attempt_id FROM orbit_key_slot s
           WHERE s.resource_id = v_resource_id AND s.attempt_id <> 0) h;
  SELECT r.namespace_id, CONVERT(r.concurrency_key USING utf8mb4) AS concurrency_key, r.highest_token,
         a.id AS holder_attempt_id, a.task_id AS holder_task_id, a.queue_id AS holder_queue_id,
         a.worker_id AS holder_worker_id, a.session_id AS holder_session_id,
         CAST(a.state AS CHAR) AS holder_state, a.granted_at AS holder_granted_at,
         a.lease_expires_at AS holder_lease_expires_at, a.concurrency_token AS holder_token,
         v_waiting AS waiting, v_more AS waiting_more, v_key_oldest AS oldest_task_id,
         v_key_since AS oldest_waiting_since, v_next AS next_task_id, v_next_queue AS next_queue_id,
         v_next_lane AS next_lane, v_queues AS queues, v_grants AS recent_grants,
         v_policy_id AS policy_id, v_on_busy AS on_busy, r.holders, v_limit AS holder_limit,
         v_rate_grants AS rate_grants, v_rate_seconds AS rate_per_seconds, r.rate_wake_at
    FROM orbit_resource r
    LEFT JOIN orbit_attempt a ON a.id = v_oldest_holder
   WHERE r.id = v_resource_id;
  COMMIT;
END$$
DELIMITER ;

-- ---- orbit_key_list (from templates/procedures/orbit_key_list.sql) ----
-- orbit_key_list: List a namespace's held keys, busiest first, a page at a time.
--
-- From the mariadb client: CALL orbit_key_list(UNHEX(SHA2('<token>', 256)), <namespace id>,
-- 'waiting', 50, NULL, NULL);
-- The keys listed are the namespace's held keys (those with a permit holder): only a held key
-- makes tasks wait for it. The namespace must be in the credential's scope as a whole; another
-- tenant's namespace, or one it does not reach, lists nothing (the same answer as a namespace
-- without held keys).
-- Orders (ties broken by resource_id ascending):
--   'waiting'     -> most waiting tasks first (each key counted up to 1,000; waiting_more = 1
--                    means "1,000 or more");
--   'oldest_wait' -> the key whose oldest waiting task was accepted first comes first; keys with
--                    no waiting task come last.
-- Keyset pagination: pass the last row's sort_value and resource_id as p_after_value and
-- p_after_resource_id for the next page (both NULL = from the start). The ranking is live: a key
-- whose rank changes between two pages may appear on both or neither; a steady state is walked
-- exactly once.
-- Cost: independent of the number of keys and tasks. It reads the active attempts (a key's holders
-- are among them), and per held key of the namespace its slot rows (at most its limit), a count of at
-- most 1,001 ix_task_key entries and, per queue with waiting tasks of the key, 22 one-entry probes
-- of ix_task_key (the next queue, and the oldest per lane and priority).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_namespace_id; p_order ('waiting' or
--   'oldest_wait'); p_limit 1-1000; p_after_value, p_after_resource_id (the cursor; NULL = none).
-- Result (0..p_limit rows, in the order asked), all times UTC:
--   namespace_id, concurrency_key (text), highest_token, holder_attempt_id, holder_task_id,
--   holder_queue_id, holder_worker_id, holder_session_id, holder_state, holder_granted_at,
--   holder_lease_expires_at, holder_token, waiting (up to 1,000), waiting_more (1 or 0),
--   oldest_task_id (NULL = none waits), oldest_waiting_since (its run_at; NULL = none waits),
--   resource_id, sort_value (the cursor's value: waiting, or oldest_task_id with
--   18446744073709551615 for none), holders (attempts holding the key now). The holder_* columns
--   are the key's oldest holder's (the lowest attempt id).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT (p_order, p_limit).
-- Locks: none (a consistent read in one read-only snapshot).
DROP PROCEDURE IF EXISTS orbit_key_list;
DELIMITER $$
CREATE PROCEDURE orbit_key_list(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED,
                                IN p_order VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin, IN p_limit BIGINT,
                                IN p_after_value BIGINT UNSIGNED, IN p_after_resource_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_keys LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_stats LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_n INT;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_oldest BIGINT UNSIGNED;
  DECLARE v_holder BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_step CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_a CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_b CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_queue_oldest BIGINT UNSIGNED;
  DECLARE v_p INT;
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_order IS NULL OR p_order NOT IN ('waiting', 'oldest_wait') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: order must be waiting or oldest_wait';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;

  SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION READ ONLY;
  SELECT n.id INTO v_namespace_id
    FROM orbit_namespace n
   WHERE n.id = p_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
     AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                  WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '');
  IF v_namespace_id IS NOT NULL THEN
    -- A held key's holders are active attempts: found among those (ix_attempt_active_queue).
    SELECT COALESCE(JSON_ARRAYAGG(x.resource_id), '[]') INTO v_keys
      FROM (SELECT DISTINCT k.resource_id
              FROM orbit_attempt k FORCE INDEX (ix_attempt_active_queue)
             WHERE k.released_at IS NULL AND k.resource_id <> 0 AND k.namespace_id = v_namespace_id) x;
  END IF;
  SET v_n = JSON_LENGTH(v_keys);
  WHILE v_i < v_n DO
    -- (JSON_EXTRACT: MySQL's JSON_VALUE takes only a literal path.)
    SET v_resource_id = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
    SELECT MIN(h.attempt_id) INTO v_holder
    FROM (SELECT r.holder_attempt_id AS attempt_id FROM orbit_resource r
           WHERE r.id = v_resource_id AND r.holder_attempt_id <> 0
          UNION ALL
          SELECT s.attempt_id FROM orbit_key_slot s
           WHERE s.resource_id = v_resource_id AND s.attempt_id <> 0) h;
    SELECT COUNT(*) INTO v_count
      FROM (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_key)
             WHERE t.resource_id = v_resource_id AND t.lane IN ('ready', 'blocked')
             LIMIT 1001) x;
    -- The oldest waiter over the key's queues.
    SET v_oldest = NULL, v_queue_id = '';
    queues: LOOP
      SET v_a = NULL, v_b = NULL;
    SELECT t.queue_id INTO v_a FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id > v_queue_id
     ORDER BY t.queue_id LIMIT 1;
    SELECT t.queue_id INTO v_b FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id > v_queue_id
     ORDER BY t.queue_id LIMIT 1;
    SET v_step = LEAST(COALESCE(v_a, v_b), COALESCE(v_b, v_a));
      IF v_step IS NULL THEN
        LEAVE queues;
      END IF;
      SET v_queue_id = v_step;
      SET v_queue_oldest = NULL, v_p = 0;
    WHILE v_p <= 9 DO
      SET v_id = NULL;
      SELECT t.id INTO v_id FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'blocked' AND t.queue_id = v_queue_id AND t.priority = v_p
       ORDER BY t.id LIMIT 1;
      IF v_id IS NOT NULL AND (v_queue_oldest IS NULL OR v_id < v_queue_oldest) THEN
        SET v_queue_oldest = v_id;
      END IF;
      SET v_id = NULL;
      SELECT t.id INTO v_id FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = v_resource_id AND t.lane = 'ready' AND t.queue_id = v_queue_id AND t.priority = v_p
       ORDER BY t.id LIMIT 1;
      IF v_id IS NOT NULL AND (v_queue_oldest IS NULL OR v_id < v_queue_oldest) THEN
        SET v_queue_oldest = v_id;
      END IF;
      SET v_p = v_p + 1;
    END WHILE;
      IF v_oldest IS NULL OR v_queue_oldest < v_oldest THEN
        SET v_oldest = v_queue_oldest;
      END IF;
    END LOOP queues;
    -- `+ 0` on the variables: MariaDB's JSON_OBJECT writes a bare procedure variable as a string.
    SET v_stats = JSON_ARRAY_APPEND(v_stats, '$', JSON_OBJECT(
          'r', v_resource_id + 0, 'w', LEAST(v_count, 1000), 'm', IF(v_count > 1000, 1, 0),
          'o', v_oldest + 0, 'h', v_holder + 0));
    SET v_i = v_i + 1;
  END WHILE;

  SELECT r.namespace_id, CONVERT(r.concurrency_key USING utf8mb4) AS concurrency_key, r.highest_token,
         a.id AS holder_attempt_id, a.task_id AS holder_task_id, a.queue_id AS holder_queue_id,
         a.worker_id AS holder_worker_id, a.session_id AS holder_session_id,
         CAST(a.state AS CHAR) AS holder_state, a.granted_at AS holder_granted_at,
         a.lease_expires_at AS holder_lease_expires_at, a.concurrency_token AS holder_token,
         j.w AS waiting, j.m AS waiting_more, j.o AS oldest_task_id,
         o.run_at AS oldest_waiting_since,
         r.id AS resource_id,
         IF(p_order = 'waiting', j.w, COALESCE(j.o, 18446744073709551615)) AS sort_value, r.holders
    FROM JSON_TABLE(v_stats, '$[*]' COLUMNS (
           r BIGINT UNSIGNED PATH '$.r', w BIGINT UNSIGNED PATH '$.w', m INT PATH '$.m',
           o BIGINT UNSIGNED PATH '$.o', h BIGINT UNSIGNED PATH '$.h')) j
    JOIN orbit_resource r ON r.id = j.r
    JOIN orbit_attempt a ON a.id = j.h
    LEFT JOIN orbit_task o ON o.id = j.o
   WHERE p_after_resource_id IS NULL
      OR (p_order = 'waiting' AND (j.w < p_after_value OR (j.w = p_after_value AND r.id > p_after_resource_id)))
      OR (p_order = 'oldest_wait' AND (COALESCE(j.o, 18446744073709551615) > p_after_value
                                       OR (COALESCE(j.o, 18446744073709551615) = p_after_value AND r.id > p_after_resource_id)))
   ORDER BY IF(p_order = 'waiting', 18446744073709551615 - j.w, COALESCE(j.o, 18446744073709551615)), r.id
   LIMIT p_limit;
  COMMIT;
END$$
DELIMITER ;

-- ---- orbit_key_metrics (from templates/procedures/orbit_key_metrics.sql) ----
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

-- ---- orbit_key_policy_delete (from templates/procedures/orbit_key_policy_delete.sql) ----
-- orbit_key_policy_delete: Delete a key policy: its keys behave as 'queue' again (or as the next
-- longest policy that matches them) from the next submit on.
--
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the policy's whole namespace);
--   p_policy_id.
-- Result (one row): the deleted policy's columns (see orbit_key_policy_set).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (no such policy, or another tenant's:
--   one answer).
-- Locks: the orbit_key_policy row.
DROP PROCEDURE IF EXISTS orbit_key_policy_delete;
DELIMITER $$
CREATE PROCEDURE orbit_key_policy_delete(IN p_token_hash BINARY(32), IN p_policy_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_whole TINYINT DEFAULT 0;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'queues:manage', v_application_id, v_environment_id, v_credential_id);
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT p.namespace_id INTO v_namespace_id FROM orbit_key_policy p WHERE p.id = p_policy_id FOR UPDATE;
  SELECT EXISTS (SELECT 1 FROM orbit_namespace n
                 WHERE n.id = v_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
                   AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '')) INTO v_whole;
  IF NOT v_whole THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: key policy not found';
  END IF;
  SELECT p.id AS policy_id, p.namespace_id, p.match_kind, p.key_pattern,
         p.on_busy, p.holder_limit, p.rate_grants, p.rate_per_seconds,
         p.created_at, p.updated_at FROM orbit_key_policy p WHERE p.id = p_policy_id;
  DELETE FROM orbit_key_policy WHERE id = p_policy_id;
  COMMIT;
END$$
DELIMITER ;

-- ---- orbit_key_policy_list (from templates/procedures/orbit_key_policy_list.sql) ----
-- orbit_key_policy_list: The key policies of a namespace.
--
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the whole namespace); p_namespace_id.
-- Result (0..1000 rows, exact policies first, then prefixes, each by pattern):
--   the policy columns (see orbit_key_policy_set).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (a namespace the credential does not
--   reach as a whole).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_key_policy_list;
DELIMITER $$
CREATE PROCEDURE orbit_key_policy_list(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_whole TINYINT DEFAULT 0;
  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  SELECT EXISTS (SELECT 1 FROM orbit_namespace n
                 WHERE n.id = p_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
                   AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '')) INTO v_whole;
  IF NOT v_whole THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: namespace not found';
  END IF;
  SELECT p.id AS policy_id, p.namespace_id, p.match_kind, p.key_pattern,
         p.on_busy, p.holder_limit, p.rate_grants, p.rate_per_seconds,
         p.created_at, p.updated_at
    FROM orbit_key_policy p
   WHERE p.namespace_id = p_namespace_id
   ORDER BY p.match_kind, p.key_pattern;
END$$
DELIMITER ;

-- ---- orbit_key_policy_set (from templates/procedures/orbit_key_policy_set.sql) ----
-- orbit_key_policy_set: Create or change the policy for a key, or for a key prefix, of a namespace.
--
-- One policy per (namespace, match_kind, key_pattern): setting it again changes its fields. An
-- on_busy change applies to submits accepted after it, a limit or rate change from each key's
-- next grant (see orbit_key_policy); tasks already accepted and held permits are not touched.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the whole namespace);
--   p_namespace_id; p_match_kind 'exact' | 'prefix'; p_key_pattern (exact bytes, the rules of a
--   concurrency_key: m::key_error); p_on_busy 'queue' | 'reject' | 'replace_waiting' |
--   'cancel_running'; p_holder_limit 1-1000; p_rate_grants 0-1000 and
--   p_rate_per_seconds 0-86400, both 0 (no rate) or both above 0.
-- Result (one row): created TINYINT (1 = new, 0 = changed), then the policy columns: policy_id,
--   namespace_id, match_kind, key_pattern, on_busy, holder_limit, rate_grants, rate_per_seconds,
--   created_at, updated_at.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (a namespace the credential does not
--   reach as a whole: one answer for another tenant's), INVALID_ARGUMENT (naming the field),
--   QUOTA_EXCEEDED (the namespace already has 1000 policies).
-- Locks: the orbit_key_policy row (insert, or the existing one by ux_key_policy).
DROP PROCEDURE IF EXISTS orbit_key_policy_set;
DELIMITER $$
CREATE PROCEDURE orbit_key_policy_set(IN p_token_hash BINARY(32), IN p_namespace_id BIGINT UNSIGNED,
                                      IN p_match_kind TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_key_pattern BLOB,
                                      IN p_on_busy TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_holder_limit BIGINT,
                                      IN p_rate_grants BIGINT, IN p_rate_per_seconds BIGINT)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_whole TINYINT DEFAULT 0;
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_policy_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_created TINYINT DEFAULT 0;
  DECLARE v_count INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'queues:manage', v_application_id, v_environment_id, v_credential_id);
  SELECT EXISTS (SELECT 1 FROM orbit_namespace n
                 WHERE n.id = p_namespace_id AND n.application_id = v_application_id AND n.environment_id = v_environment_id
                   AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '')) INTO v_whole;
  IF NOT v_whole THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: namespace not found';
  END IF;
  IF p_match_kind IS NULL OR p_match_kind NOT IN ('exact', 'prefix') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: match must be exact or prefix';
  END IF;
  SET v_message = REPLACE(CASE WHEN p_key_pattern IS NULL THEN 'concurrency_key must be a string or omitted, not null'
       WHEN p_key_pattern = '' THEN NULL
       WHEN NOT HEX(p_key_pattern) REGEXP '^([0-7][0-9A-F]|C[2-9A-F][89AB][0-9A-F]|D[0-9A-F][89AB][0-9A-F]|E0[AB][0-9A-F][89AB][0-9A-F]|E[1-9A-CEF][89AB][0-9A-F][89AB][0-9A-F]|ED[89][0-9A-F][89AB][0-9A-F]|F0[9AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F[1-3][89AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F48[0-9A-F][89AB][0-9A-F][89AB][0-9A-F])*$'
         THEN 'concurrency_key must be valid UTF-8'
       WHEN CHAR_LENGTH(CONVERT(p_key_pattern USING utf8mb4)) > 191
         THEN 'concurrency_key must be at most 191 characters'
       WHEN HEX(p_key_pattern) REGEXP '^(..)*(0[0-9A-F]|1[0-9A-F]|7F|C2[89][0-9A-F])'
         THEN 'concurrency_key must not contain control characters'
       WHEN HEX(p_key_pattern) REGEXP '^(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)'
            OR HEX(p_key_pattern) REGEXP '(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)$'
         THEN 'concurrency_key must not start or end with whitespace'
  END, 'concurrency_key', 'key');
  IF p_key_pattern = '' THEN
    SET v_message = 'key must be 1-191 characters';
  END IF;
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  IF p_on_busy IS NULL OR p_on_busy NOT IN ('queue', 'reject', 'replace_waiting', 'cancel_running') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: on_busy must be queue, reject, replace_waiting or cancel_running';
  END IF;
  IF p_holder_limit IS NULL OR p_holder_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;
  IF p_rate_grants IS NULL OR p_rate_grants NOT BETWEEN 0 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: rate.grants must be between 1 and 1000';
  END IF;
  IF p_rate_per_seconds IS NULL OR p_rate_per_seconds NOT BETWEEN 0 AND 86400 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: rate.per_seconds must be between 1 and 86400';
  END IF;
  IF (p_rate_grants = 0) <> (p_rate_per_seconds = 0) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: rate needs both grants and per_seconds';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT p.id INTO v_policy_id
    FROM orbit_key_policy p
   WHERE p.namespace_id = p_namespace_id AND p.match_kind = p_match_kind AND p.key_pattern = p_key_pattern
     FOR UPDATE;
  IF v_policy_id IS NULL THEN
    -- The bound of the match's read (orbit_task_create reads every policy of the namespace).
    SELECT COUNT(*) INTO v_count FROM orbit_key_policy p WHERE p.namespace_id = p_namespace_id;
    IF v_count >= 1000 THEN
      ROLLBACK;
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'QUOTA_EXCEEDED: the namespace already has 1000 key policies';
    END IF;
    INSERT INTO orbit_key_policy (namespace_id, match_kind, key_pattern, on_busy, holder_limit, rate_grants,
                                  rate_per_seconds, created_at, updated_at)
    VALUES (p_namespace_id, p_match_kind, p_key_pattern, p_on_busy, p_holder_limit, p_rate_grants,
            p_rate_per_seconds, v_now, v_now);
    SET v_policy_id = LAST_INSERT_ID(), v_created = 1;
  ELSE
    UPDATE orbit_key_policy p
       SET p.on_busy = p_on_busy, p.holder_limit = p_holder_limit, p.rate_grants = p_rate_grants,
           p.rate_per_seconds = p_rate_per_seconds, p.updated_at = v_now
     WHERE p.id = v_policy_id;
  END IF;
  COMMIT;
  SELECT v_created AS created, p.id AS policy_id, p.namespace_id, p.match_kind, p.key_pattern,
         p.on_busy, p.holder_limit, p.rate_grants, p.rate_per_seconds,
         p.created_at, p.updated_at
    FROM orbit_key_policy p
   WHERE p.id = v_policy_id;
END$$
DELIMITER ;

-- ---- orbit_key_promote (from templates/procedures/orbit_key_promote.sql) ----
-- orbit_key_promote: Internal: make the best blocked task of one key and queue ready, if the key has room.
--
-- The caller holds the resource row lock. Promotes nothing when the key has no room for another
-- holder (its holder limit is reached, or its rate holds grants back: m::key_full) or the queue
-- already has a ready task of the key. Blocked tasks locked by someone else (being
-- cancelled or expired) are skipped, never waited for.
-- Parameters: p_resource_id; p_queue_id; p_now.
-- Result: none. Signals: none.
-- Locks: the promoted orbit_task row (FOR UPDATE SKIP LOCKED).
DROP PROCEDURE IF EXISTS orbit_key_promote;
DELIMITER $$
CREATE PROCEDURE orbit_key_promote(IN p_resource_id BIGINT UNSIGNED, IN p_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin, IN p_now DATETIME(6))
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_next BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_taken TINYINT DEFAULT 0;
  -- A plain read (SELECT ... INTO; IF EXISTS (...) would take shared locks): exact, because every
  -- change to the key's permits and ready tasks commits under the resource row lock we hold.
  SELECT EXISTS (SELECT 1 FROM orbit_resource k WHERE k.id = p_resource_id AND (k.holders >= k.holder_limit OR COALESCE(k.rate_wake_at > p_now, 0)))
      OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                  WHERE h.resource_id = p_resource_id AND h.lane = 'ready' AND h.queue_id = p_queue_id)
    INTO v_taken;
  IF v_taken THEN
    LEAVE body;
  END IF;
  SELECT t.id INTO v_next
    FROM orbit_task t FORCE INDEX (ix_task_key)
   WHERE t.resource_id = p_resource_id AND t.lane = 'blocked' AND t.queue_id = p_queue_id
     AND t.blocked_reason = ''
   ORDER BY t.priority, t.id
   LIMIT 1
   FOR UPDATE SKIP LOCKED;
  IF v_next IS NOT NULL THEN
    UPDATE orbit_task t SET t.lane = 'ready', t.updated_at = p_now WHERE t.id = v_next;
  END IF;
END$$
DELIMITER ;

-- ---- orbit_key_promote_all (from templates/procedures/orbit_key_promote_all.sql) ----
-- orbit_key_promote_all: Internal: make a key's best blocked task ready in every queue that has blocked tasks of it, where the key has room.
--
-- The caller holds the resource row lock. Walks the queues that have blocked tasks of the key, in
-- queue id order, and calls orbit_key_promote for each (which promotes nothing while the key has
-- no room for another holder or the queue already has a ready task of the key). Cost: one index probe per
-- such queue, independent of how many tasks are blocked.
-- Parameters: p_resource_id; p_now.
-- Result: none. Signals: none.
-- Locks: the promoted orbit_task rows (SKIP LOCKED, via orbit_key_promote).
DROP PROCEDURE IF EXISTS orbit_key_promote_all;
DELIMITER $$
CREATE PROCEDURE orbit_key_promote_all(IN p_resource_id BIGINT UNSIGNED, IN p_now DATETIME(6))
  MODIFIES SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  queues: LOOP
    SELECT MIN(t.queue_id) INTO v_queue_id
      FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = p_resource_id AND t.lane = 'blocked' AND t.queue_id > v_queue_id;
    IF v_queue_id IS NULL THEN
      LEAVE queues;
    END IF;
    CALL orbit_key_promote(p_resource_id, v_queue_id, p_now);
  END LOOP queues;
END$$
DELIMITER ;

-- ---- orbit_key_rate_check (from templates/procedures/orbit_key_rate_check.sql) ----
-- orbit_key_rate_check: Internal: when a key's rate lets its next grant come, in the caller's transaction.
--
-- A key policy's rate: at most p_rate_grants (G) grants of the key in any p_rate_seconds. Grant
-- k = p_highest + 1 may come when grant k - G is that long ago, and not before grant k - 1 (so
-- grant times never go back). Both times come from orbit_key_rate_log, one row per position
-- token mod G; grant k - G from the key's attempts when the log does not hold it (the rate
-- changed or was just set). Plain reads, exact under the caller's lock on the key's resource row,
-- under which every grant of the key and every log row is written. orbit_attempt_grant calls this
-- for a key with a rate: a grant that would come before o_allowed goes back to the blocked lane
-- and the key waits for rate_wake_at (orbit_task_promote_due); one that may come writes its
-- time at its position of the log (updated when o_logged, inserted otherwise).
-- Parameters: p_resource_id; p_highest (the key's highest token granted so far); p_rate_grants
--   (G, 1 or more); p_rate_seconds; p_now.
-- Out: o_allowed (the earliest time grant k may come: p_now when it may come now);
--   o_logged (1 when grant k's position of orbit_key_rate_log has a row).
-- Result: none. Signals: none.
-- Locks: none (the caller holds the orbit_resource row).
DROP PROCEDURE IF EXISTS orbit_key_rate_check;
DELIMITER $$
CREATE PROCEDURE orbit_key_rate_check(
  IN p_resource_id BIGINT UNSIGNED,
  IN p_highest BIGINT UNSIGNED,
  IN p_rate_grants SMALLINT UNSIGNED,
  IN p_rate_seconds INT UNSIGNED,
  IN p_now DATETIME(6),
  OUT o_allowed DATETIME(6),
  OUT o_logged TINYINT)
  READS SQL DATA
BEGIN
  -- The times of grants k - G and k - 1.
  DECLARE v_then DATETIME(6);
  DECLARE v_last DATETIME(6);
  DECLARE v_back INT;
  SELECT MAX(IF(l.token + p_rate_grants = p_highest + 1, l.granted_at, NULL)),
         MAX(IF(l.token = p_highest, l.granted_at, NULL)),
         MAX(l.position = (p_highest + 1) % p_rate_grants)
    INTO v_then, v_last, o_logged
    FROM orbit_key_rate_log l
   WHERE l.resource_id = p_resource_id
     AND l.position IN ((p_highest + 1) % p_rate_grants, p_highest % p_rate_grants);
  IF v_then IS NULL AND p_highest >= p_rate_grants THEN
    SET v_back = p_rate_grants - 1;
    SELECT a.granted_at INTO v_then
      FROM orbit_attempt a FORCE INDEX (ix_attempt_resource)
     WHERE a.resource_id = p_resource_id
     ORDER BY a.id DESC
     LIMIT v_back, 1;
  END IF;
  SET o_allowed = GREATEST(COALESCE(DATE_ADD(v_then, INTERVAL p_rate_seconds SECOND), p_now),
                           COALESCE(v_last, p_now));
END$$
DELIMITER ;

-- ---- orbit_key_release (from templates/procedures/orbit_key_release.sql) ----
-- orbit_key_release: Internal: release an attempt's key permit and hand the key on.
--
-- Frees the permit's slot (slot 0: the resource row's holder_attempt_id; 1 and up: its
-- orbit_key_slot row), only if this attempt holds it: a late or duplicate release changes
-- nothing. Counts the key's holders down and advances its version (the caller records it as the
-- attempt's release_version, in the update that ends the attempt), and makes the key's blocked
-- tasks claimable, all in the caller's transaction:
--   p_hand_off = 0, or a key that may have more than one holder or waits for its rate: one blocked
--     task per queue that has blocked tasks of the key, where the key has room
--     (orbit_key_promote_all);
--   p_hand_off = 1 and a key of one holder that its holder frees: none. The key's next task,
--     the best queue head (priority, then age) over those queues, is returned (p_head) for the
--     caller's grant in the same transaction (orbit_attempt_finish, through the attempt's
--     handoff_task_id), which takes it straight from the blocked lane: readying it first would
--     cost a write of the task row and a scan of the ready lane to find it again. The caller
--     must call orbit_key_promote_all after its grant if the key still has room.
-- Cost: one index probe per queue with blocked tasks of the key, independent of how many tasks
-- are blocked.
-- Parameters: p_resource_id; p_attempt_id; p_slot (the attempt's key_slot); p_now; p_hand_off
--   (0 or 1); OUT p_head: with the hand-off of one holder's key, the key's next task (left in the
--   blocked lane, unlocked), otherwise, or when this attempt held no permit, 0; OUT p_release_version: the resource row's
--   version this release wrote, for the caller to record as the attempt's release_version (0
--   when this attempt held no permit: nothing written).
-- Result: none. Signals: none.
-- Locks: (the caller holds the attempt's row already) the orbit_resource row (updated), the
--   orbit_key_slot row (slots 1 and up), then the promoted task rows (SKIP LOCKED).
DROP PROCEDURE IF EXISTS orbit_key_release;
DELIMITER $$
CREATE PROCEDURE orbit_key_release(IN p_resource_id BIGINT UNSIGNED, IN p_attempt_id BIGINT UNSIGNED,
                                   IN p_slot SMALLINT UNSIGNED, IN p_now DATETIME(6),
                                   IN p_hand_off TINYINT, OUT p_head BIGINT UNSIGNED,
                                   OUT p_release_version BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_priority INT;
  DECLARE v_head BIGINT UNSIGNED;
  DECLARE v_last_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_best_priority INT;
  DECLARE v_best BIGINT UNSIGNED;
  SET p_head = 0, p_release_version = 0;
  -- The common case in one update: a key of one holder, not waiting for its rate, freed by its
  -- holder (slot 0). It writes nothing otherwise. The version written is read back without a
  -- statement: LAST_INSERT_ID(expr) returns expr and keeps it for LAST_INSERT_ID() (the
  -- documented counter idiom of MariaDB and MySQL).
  UPDATE orbit_resource r
     SET r.holder_attempt_id = 0, r.holders = r.holders - 1, r.version = LAST_INSERT_ID(r.version + 1),
         r.updated_at = p_now
   WHERE r.id = p_resource_id AND r.holder_attempt_id = p_attempt_id AND p_slot = 0
     AND r.holder_limit = 1 AND r.rate_wake_at IS NULL;
  IF ROW_COUNT() = 0 THEN
    -- Otherwise the attempt's slot, if the attempt still holds it: slot 0 (a key of several
    -- holders, or one that waits for its rate) in one update of the row as above; another slot
    -- in its orbit_key_slot row, under the resource row's lock, then the count on the row.
    IF p_slot = 0 THEN
      UPDATE orbit_resource r
         SET r.holder_attempt_id = 0, r.holders = r.holders - 1, r.version = LAST_INSERT_ID(r.version + 1),
             r.updated_at = p_now
       WHERE r.id = p_resource_id AND r.holder_attempt_id = p_attempt_id;
      IF ROW_COUNT() = 0 THEN
        LEAVE body;
      END IF;
    ELSE
      SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = p_resource_id FOR UPDATE;
      UPDATE orbit_key_slot s
         SET s.attempt_id = 0, s.updated_at = p_now
       WHERE s.resource_id = p_resource_id AND s.slot = p_slot AND s.attempt_id = p_attempt_id;
      IF ROW_COUNT() = 0 THEN
        LEAVE body;
      END IF;
      UPDATE orbit_resource r
         SET r.holders = r.holders - 1, r.version = LAST_INSERT_ID(r.version + 1), r.updated_at = p_now
       WHERE r.id = p_resource_id;
    END IF;
    SET p_release_version = LAST_INSERT_ID();
    -- Several may hold the key, or it waits for its rate: each queue's head, where it has room.
    CALL orbit_key_promote_all(p_resource_id, p_now);
    LEAVE body;
  END IF;
  SET p_release_version = LAST_INSERT_ID();
  IF NOT p_hand_off THEN
    CALL orbit_key_promote_all(p_resource_id, p_now);
    LEAVE body;
  END IF;
  -- Each queue's head, in queue id order: ix_task_key's order, so each probe reads one entry
  -- past the previous queue (the tasks a grant may not take, blocked_reason set, are passed over).
  -- Plain reads (the caller's grant locks the head it takes): locking reads here would also lock
  -- and pass over the entries the key's last hand-offs moved out of the lane and purge has not
  -- removed yet (BENCHMARKS.md, hotkey). FORCE INDEX, as in every probe
  -- of ix_task_key: without it the optimizer estimates the range in each index that starts with
  -- queue_id or lane as well (five of them, two B-tree dives each), which costs more than the
  -- probe.
  -- The first probe also reads the last queue with blocked tasks of the key (one entry, from the
  -- range's end; COALESCE evaluates it only while v_last_queue_id is NULL), so the walk stops at
  -- it without a probe that finds nothing: most keys have blocked tasks in one queue.
  heads: LOOP
    SET v_head = NULL;
    SELECT t.queue_id, t.priority, t.id,
           COALESCE(v_last_queue_id,
                    (SELECT MAX(l.queue_id) FROM orbit_task l FORCE INDEX (ix_task_key)
                      WHERE l.resource_id = p_resource_id AND l.lane = 'blocked'))
      INTO v_queue_id, v_priority, v_head, v_last_queue_id
      FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = p_resource_id AND t.lane = 'blocked' AND t.queue_id > v_queue_id
       AND t.blocked_reason = ''
     ORDER BY t.queue_id, t.priority, t.id
     LIMIT 1;
    IF v_head IS NULL THEN
      LEAVE heads;
    END IF;
    IF v_best IS NULL OR v_priority < v_best_priority OR (v_priority = v_best_priority AND v_head < v_best) THEN
      SET v_best_priority = v_priority, v_best = v_head;
    END IF;
    IF v_queue_id >= v_last_queue_id THEN
      LEAVE heads;
    END IF;
  END LOOP heads;
  SET p_head = COALESCE(v_best, 0);
END$$
DELIMITER ;

-- ---- orbit_key_validate (from templates/procedures/orbit_key_validate.sql) ----
-- orbit_key_validate: Internal: enforce the concurrency_key rules of SPEC §3 (SIGNALs if invalid).
--
-- '' means "no key". The rules are m::key_error's: valid UTF-8, 1-191
-- characters, no control characters, no leading or trailing Unicode White_Space, all checked on
-- the exact bytes.
-- Parameters: p_key BLOB (exact bytes; NULL is invalid: JSON null is not "omitted").
-- Signals: INVALID_ARGUMENT naming concurrency_key.
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_key_validate;
DELIMITER $$
CREATE PROCEDURE orbit_key_validate(IN p_key BLOB)
  DETERMINISTIC NO SQL
BEGIN
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT CASE WHEN p_key IS NULL THEN 'concurrency_key must be a string or omitted, not null'
       WHEN p_key = '' THEN NULL
       WHEN NOT HEX(p_key) REGEXP '^([0-7][0-9A-F]|C[2-9A-F][89AB][0-9A-F]|D[0-9A-F][89AB][0-9A-F]|E0[AB][0-9A-F][89AB][0-9A-F]|E[1-9A-CEF][89AB][0-9A-F][89AB][0-9A-F]|ED[89][0-9A-F][89AB][0-9A-F]|F0[9AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F[1-3][89AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F48[0-9A-F][89AB][0-9A-F][89AB][0-9A-F])*$'
         THEN 'concurrency_key must be valid UTF-8'
       WHEN CHAR_LENGTH(CONVERT(p_key USING utf8mb4)) > 191
         THEN 'concurrency_key must be at most 191 characters'
       WHEN HEX(p_key) REGEXP '^(..)*(0[0-9A-F]|1[0-9A-F]|7F|C2[89][0-9A-F])'
         THEN 'concurrency_key must not contain control characters'
       WHEN HEX(p_key) REGEXP '^(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)'
            OR HEX(p_key) REGEXP '(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)$'
         THEN 'concurrency_key must not start or end with whitespace'
  END;
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END$$
DELIMITER ;

-- ---- orbit_lease_recover (from templates/procedures/orbit_lease_recover.sql) ----
-- orbit_lease_recover: End attempts whose lease ran out, releasing their permits.
--
-- An expired LEASED attempt (never started) ends EXPIRED and its task returns to WAITING; an
-- expired RUNNING attempt ends UNKNOWN and its task goes to NEEDS_REVIEW (RETRY_WAIT if the task
-- declared retry_unknown and has attempts left). Either way the key's next grant gets a larger
-- token. Each attempt is recovered in its own short transaction, re-checked under its row lock, so
-- a renew or result that wins the race is respected. There is no manual unlock. The live leases
-- are the attempts that hold their permits (released_at NULL), by lease expiry
-- (ix_attempt_active_lease).
-- Parameters: p_limit 1-10000 (attempts to recover in this call).
-- Result (one row): recovered INT (attempts ended), next_expiry_at DATETIME(6) (earliest lease
--   still running, NULL when none: when to call again).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per attempt in order: orbit_attempt row, then as orbit_attempt_end, then the quota slot
--   row the attempt charged, where its task's incomplete charge goes back too
--   (m::quota_give_back_ended).
DROP PROCEDURE IF EXISTS orbit_lease_recover;
DELIMITER $$
CREATE PROCEDURE orbit_lease_recover(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6);
  DECLARE v_ended INT;
  DECLARE v_recovered INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  expired: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_attempt_id = NULL, v_state = NULL;
    SELECT a.id INTO v_attempt_id
      FROM orbit_attempt a FORCE INDEX (ix_attempt_active_lease)
     WHERE a.released_at IS NULL AND a.lease_expires_at <= v_now
     ORDER BY a.lease_expires_at
     LIMIT 1;
    IF v_attempt_id IS NULL THEN
      LEAVE expired;
    END IF;
    SET v_seen = v_seen + 1;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
    SELECT a.state, a.lease_expires_at, a.application_id
      INTO v_state, v_expires, v_application_id
      FROM orbit_attempt a
     WHERE a.id = v_attempt_id
       FOR UPDATE;
    IF v_state IN ('LEASED', 'RUNNING') AND v_expires <= v_now THEN
      CALL orbit_attempt_end(0 /* p_session_id */,
                             JSON_ARRAY(JSON_OBJECT('attempt_id', v_attempt_id, 'outcome', 'expired',
                                                    'error', JSON_OBJECT('code', 'LEASE_EXPIRED',
                                                                         'message', 'the lease ran out before a result'))) /* p_results */,
                             v_now, 0 /* p_hand_off */, v_ended);
      INSERT INTO orbit_task_event (task_id, attempt_id, event, from_state, to_state, concurrency_token, detail, created_at)
    SELECT a.task_id, a.id, CONCAT('attempt_', a.outcome), IF(a.started_at IS NULL, 'LEASED', 'RUNNING'), t.state,
           a.concurrency_token, CONCAT('attempt ', a.state, '; permits released'), v_now
      FROM (SELECT v_attempt_id AS id) e
      STRAIGHT_JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = e.id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id
     ORDER BY a.id;
      UPDATE (SELECT a.quota_slot AS slot, COUNT(*) AS active,
                 CAST(SUM(t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) AS SIGNED) AS incomplete
            FROM (SELECT x.quota_slot, x.task_id FROM orbit_attempt x WHERE x.id = v_attempt_id) a
            JOIN orbit_task t ON t.id = a.task_id
           GROUP BY a.quota_slot) g
    STRAIGHT_JOIN orbit_application_quota q ON q.application_id = v_application_id AND q.slot = g.slot
     SET q.active_attempts = q.active_attempts - g.active,
         q.incomplete_tasks = q.incomplete_tasks - g.incomplete,
         q.updated_at = v_now;
      SET v_recovered = v_recovered + v_ended;
    END IF;
    COMMIT;
  END WHILE expired;
  SELECT v_recovered AS recovered,
         (SELECT MIN(a.lease_expires_at) FROM orbit_attempt a FORCE INDEX (ix_attempt_active_lease)
           WHERE a.released_at IS NULL) AS next_expiry_at;
END$$
DELIMITER ;

-- ---- orbit_metrics_snapshot (from templates/procedures/orbit_metrics_snapshot.sql) ----
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

-- ---- orbit_plan_create (from templates/procedures/orbit_plan_create.sql) ----
-- orbit_plan_create: Create a plan: a named interval or cron schedule that fires tasks into a queue.
--
-- Version 1 holds the schedule and the task definition, validated by the same rules as a submit
-- (orbit_task_validate); versions are immutable. Tasks fired from a version inherit its
-- concurrency_key verbatim (no interpolation). An interval plan's first slot is now + interval.
-- A cron plan starts with next_fire_at NULL and schedule_after = now: the scheduler computes its
-- first fire time after now (orbit_plan_schedule_due, orbit_plan_schedule_set).
-- Parameters (NULL = default where one is given):
--   p_token_hash BINARY(32)   SHA-256 of the bearer token (scope queues:manage on the queue)
--   p_queue_id                CHAR(32): where fired tasks go
--   p_name                    1-191 characters, unique within the queue's namespace
--   p_interval_seconds        1-31536000 for an interval plan; NULL for a cron plan
--   p_cron                    a cron plan's expression, 1-191 ASCII characters, parsed and checked by
--                             the server (src/schedule.rs), which computes its fire times; NULL for
--                             an interval plan. Exactly one of p_interval_seconds, p_cron is given.
--   p_timezone                a cron plan's IANA time zone, 1-64 characters; NULL = 'UTC'. Must be
--                             NULL or '' for an interval plan.
--   p_catch_up                'none' | 'one' | 'all' (NULL = 'one'): missed slots after a stop
--   p_on_busy                 'queue' | 'skip' | 'replace_waiting' (NULL = 'queue'): a slot while
--                             the key is busy; other than 'queue' needs a concurrency_key
--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none
-- Result (one row): the plan columns:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (queue), INVALID_ARGUMENT (naming the
--   field), STATE_CONFLICT (a plan of that name exists in the namespace).
-- Locks: the new orbit_plan and orbit_plan_version rows.
DROP PROCEDURE IF EXISTS orbit_plan_create;
DELIMITER $$
CREATE PROCEDURE orbit_plan_create(
  IN p_token_hash BINARY(32),
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_name TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_interval_seconds BIGINT,
  IN p_cron TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_timezone TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_catch_up TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_on_busy TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_plan_id BIGINT UNSIGNED;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE v_kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_spec VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_timezone VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_catch_up VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_queue_check(p_token_hash, 'queues:manage', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: name must be 1-191 characters';
  END IF;
  CALL orbit_task_validate(p_handler, p_handler_version, p_payload_version, p_payload, p_business_key,
                           p_concurrency_key, p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms,
                           p_retry_unknown, p_deadline_seconds);
  IF (p_interval_seconds IS NULL) = (p_cron IS NULL) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: schedule needs exactly one of interval_seconds and cron';
  END IF;
  IF p_interval_seconds IS NOT NULL THEN
    IF p_interval_seconds NOT BETWEEN 1 AND 31536000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: interval_seconds must be between 1 and 31536000';
    END IF;
    IF p_timezone IS NOT NULL AND p_timezone <> '' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: timezone is for cron schedules only';
    END IF;
    SET v_kind = 'interval', v_spec = CAST(p_interval_seconds AS CHAR), v_timezone = '';
  ELSE
    IF CHAR_LENGTH(p_cron) NOT BETWEEN 1 AND 191 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: cron must be 1-191 characters';
    END IF;
    IF p_timezone IS NOT NULL AND CHAR_LENGTH(p_timezone) NOT BETWEEN 1 AND 64 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: timezone must be 1-64 characters';
    END IF;
    SET v_kind = 'cron', v_spec = p_cron, v_timezone = COALESCE(p_timezone, 'UTC');
  END IF;
  SET v_catch_up = COALESCE(p_catch_up, 'one'), v_on_busy = COALESCE(p_on_busy, 'queue');
  IF v_catch_up NOT IN ('none', 'one', 'all') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: catch_up must be none, one or all';
  END IF;
  IF v_on_busy NOT IN ('queue', 'skip', 'replace_waiting') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: on_busy must be queue, skip or replace_waiting';
  END IF;
  IF v_on_busy <> 'queue' AND p_concurrency_key = '' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: on_busy skip and replace_waiting need a concurrency_key';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO orbit_plan (application_id, namespace_id, queue_id, name, current_version, paused, next_fire_at,
                          created_at, updated_at, schedule_after)
  VALUES (v_application_id, v_namespace_id, p_queue_id, p_name, 1, 0,
          IF(v_kind = 'interval', DATE_ADD(v_now, INTERVAL p_interval_seconds SECOND), NULL), v_now, v_now,
          IF(v_kind = 'cron', v_now, NULL));
  IF v_duplicate THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: a plan with this name already exists in the namespace';
  END IF;
  SET v_plan_id = LAST_INSERT_ID();
  INSERT INTO orbit_plan_version (plan_id, version, schedule_kind, schedule_spec, timezone, catch_up, on_busy,
                                  handler, handler_version,
                                  payload_version, payload, business_key, concurrency_key, priority, max_attempts,
                                  retry_base_ms, retry_max_ms, retry_unknown, deadline_seconds, created_at)
  VALUES (v_plan_id, 1, v_kind, v_spec, v_timezone, v_catch_up, v_on_busy, p_handler, p_handler_version,
          p_payload_version, p_payload, p_business_key, p_concurrency_key, p_priority, p_max_attempts,
          p_retry_base_ms, p_retry_max_ms, p_retry_unknown, p_deadline_seconds, v_now);
  COMMIT;
  SELECT p.id AS plan_id, p.queue_id, p.namespace_id, p.name,
         p.current_version, p.paused, p.next_fire_at, p.created_at, p.updated_at,
         v.schedule_kind, v.schedule_spec, v.handler, v.handler_version,
         v.payload_version, v.payload, v.business_key, v.concurrency_key,
         v.priority, v.max_attempts, v.retry_base_ms, v.retry_max_ms,
         v.retry_unknown, v.deadline_seconds, p.schedule_after, v.timezone, v.catch_up,
         v.on_busy
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = v_plan_id;
END$$
DELIMITER ;

-- ---- orbit_plan_fire_due (from templates/procedures/orbit_plan_fire_due.sql) ----
-- orbit_plan_fire_due: Fire due plans: one task per plan from its current version.
--
-- Called by the scheduler loop of every serve node. Due plans (not paused, next_fire_at <= now)
-- are fired earliest first, in short transactions. Each plan's row is locked FOR UPDATE SKIP
-- LOCKED, so two nodes never fire the same plan at once (the other node skips it, and after the
-- commit the plan is no longer due); the orbit_plan_fire row (primary key plan_id,
-- scheduled_for) makes a slot fire at most once even if next_fire_at is set back.
-- A slot fires unless the version's catch_up is 'none' and the slot is more than
-- 60 s late (missed: nothing is created or recorded). Firing records the
-- orbit_plan_fire row with its outcome, by the version's on_busy:
-- - 'queue': the task is created like a submit (orbit_task_create) with the version's
--   definition, concurrency_key verbatim, plan_id and plan_version set, and no Idempotency-Key
--   row (outcome 'created');
-- - 'skip': when as many hold the key as its limit allows or any task of the key waits (lanes ready, blocked,
--   scheduled), no task is created (outcome 'skipped', task_id 0); otherwise as 'queue';
-- - 'replace_waiting': when a task this plan fired still waits for the key (state WAITING), it is
--   kept and no task is created (outcome 'kept', task_id that task); otherwise as 'queue'.
-- Both checks run under the key's orbit_resource row lock, which every grant and release takes.
-- When the application's incomplete-task quota is full, the slot is skipped (nothing recorded)
-- and the plan still advances; the call goes on with the next plan.
-- Then the plan advances. An interval plan's next_fire_at moves by whole intervals: catch_up
-- 'one' and 'none' to the first slot after now (missed slots are skipped, not fired in a burst);
-- 'all' to the next slot, but no earlier than 100 intervals before the
-- first slot after now (one per visit; after a long stop the slot that was due and the
-- 100 most recent fire, those between are skipped). A cron
-- plan's next_fire_at becomes NULL and schedule_after the slot ('all') or the later of the slot
-- and now ('one', 'none'): the server computes the next fire time after it (src/schedule.rs) and
-- stores it with orbit_plan_schedule_set. A crash in between leaves the plan NULL, which any
-- server's next round completes; the slot already fired is behind schedule_after, so it never
-- fires twice.
-- Batches: the due plans whose version has no concurrency_key and whose slot is not missed, up
-- to 100 per transaction, fire set-based: one statement locks them (SKIP
-- LOCKED) and inserts their fire rows, one inserts their tasks (the rows orbit_task_create
-- writes for an unkeyed task due now; a test compares them), one charges each application of the
-- batch once on the connection's quota slot (as orbit_task_submit_many charges a batch; when
-- the slot cannot take them, on the exact total over every slot, as orbit_task_charge), and one
-- sets the fire rows' task ids and advances the plans. A quota that cannot take a whole batch
-- rolls it back, and its plans fire one at a time, each task charged on its own
-- (orbit_task_charge): a full quota skips exactly the slots that do not fit, as above. A slot
-- already recorded (next_fire_at set back to it) fails the batch's first statement on the
-- primary key, which writes nothing of it: the rest of the call fires one plan at a time.
-- One at a time: every other due plan. A keyed one fires alone in its transaction (its task
-- locks the key's orbit_resource row: alone, it takes its locks in the order a single fire always
-- did); others (a missed or already recorded slot, the plans of a refused batch) up to
-- 100 per transaction. After each batch the earliest due plans that cannot join
-- one fire this way, until the earliest can again.
-- Parameters: p_limit 1-10000 (plans visited per call).
-- Result (one row): fired INT (slots fired: tasks created, skipped or kept), next_fire_at
--   DATETIME(6) (earliest slot of an active plan, NULL when none).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per transaction in order: orbit_plan rows (FOR UPDATE SKIP LOCKED: a batch's, or one
--   plan's), with the new orbit_plan_fire rows and the new orbit_task rows (a batch's inserted by
--   one statement, which holds the AUTO-INC lock of orbit_task for it). One plan at a time then
--   takes the orbit_resource row (keyed: on_busy other than 'queue', and through
--   orbit_task_create) and, through orbit_task_charge, orbit_application_quota slot rows. A batch
--   instead takes the connection's orbit_application_quota slot row of each of its applications
--   in ascending application id (or, when that slot cannot take the batch's tasks, every slot of
--   the application in ascending slot order), and last reads its own rows again to update them:
--   its orbit_task rows (FOR UPDATE SKIP LOCKED), orbit_plan rows (FOR UPDATE SKIP LOCKED),
--   orbit_plan_fire rows (FOR UPDATE SKIP LOCKED) and their orbit_plan_version rows (FOR UPDATE
--   SKIP LOCKED; nothing else locks a version row). A transaction holds its plans' rows, their
--   fire rows and the quota slot rows its tasks charged until its commit.
DROP PROCEDURE IF EXISTS orbit_plan_fire_due;
DELIMITER $$
CREATE PROCEDURE orbit_plan_fire_due(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_plan_id BIGINT UNSIGNED;
  DECLARE v_slot DATETIME(6);
  DECLARE v_version INT UNSIGNED;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_interval BIGINT;
  DECLARE v_kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_catch_up VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_resource_id BIGINT UNSIGNED;
  -- A keyed plan's key: as many hold it as its limit allows (on_busy skip).
  DECLARE v_full TINYINT DEFAULT 0;
  DECLARE v_outcome VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_batched INT DEFAULT 0;
  DECLARE v_keyed TINYINT DEFAULT 0;
  DECLARE v_handler VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_handler_version VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_payload_version VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_business_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_concurrency_key VARBINARY(764);
  DECLARE v_priority INT;
  DECLARE v_max_attempts INT;
  DECLARE v_retry_base_ms BIGINT;
  DECLARE v_retry_max_ms BIGINT;
  DECLARE v_retry_unknown TINYINT;
  DECLARE v_deadline_seconds BIGINT;
  DECLARE v_task_id BIGINT UNSIGNED;
  -- orbit_task_create's o_replaced and o_cancelled (always 0: a plan's task is never debounced,
  -- and follows its plan's on_busy, not a key policy) and o_refusal (QUOTA_EXCEEDED when
  -- v_task_id is 0).
  DECLARE v_replaced BIGINT UNSIGNED;
  DECLARE v_refusal VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_cancelled BIGINT UNSIGNED;
  DECLARE v_fired INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  -- Batches: whether the next transaction tries one; how many plans to fire one at a time first
  -- (a refused batch's); whether the plans one at a time are the earliest after a batch (then
  -- one that could join a batch starts the next batch instead).
  DECLARE v_set_based TINYINT DEFAULT 1;
  DECLARE v_one_by_one INT DEFAULT 0;
  DECLARE v_front TINYINT DEFAULT 0;
  DECLARE v_batchable TINYINT DEFAULT 0;
  -- A batch: its size limit, its plans, its first task id, how many of its tasks are charged, the
  -- tasks of one application, and whether every step added up.
  DECLARE v_batch INT;
  DECLARE v_count INT;
  DECLARE v_first BIGINT UNSIGNED;
  DECLARE v_charged INT;
  DECLARE v_n INT;
  DECLARE v_ok TINYINT;
  -- An application's quota over every slot: its limit and its total.
  DECLARE v_limit BIGINT UNSIGNED;
  DECLARE v_total BIGINT;
  DECLARE v_quota_slot TINYINT UNSIGNED DEFAULT (CONNECTION_ID() % 16);
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  due: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_plan_id = NULL, v_duplicate = 0;
    IF v_batched = 0 THEN
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
      IF v_set_based AND v_one_by_one = 0 THEN
        -- A batch: lock the earliest due plans that are unkeyed and whose slot is not missed,
        -- skipping those another transaction holds, and insert their fire rows (task 0 until the
        -- tasks exist: the mark batch_plans reads them by). ix_plan_due order, so the locking read
        -- stops at the batch's end. An already recorded slot is not looked up here: a read of the
        -- table an INSERT ... SELECT writes makes MariaDB read every due plan first. The primary
        -- key refuses it instead (below).
        SET v_batch = LEAST(100, p_limit - v_seen);
        INSERT INTO orbit_plan_fire (plan_id, scheduled_for, version, task_id, outcome, fired_at)
        SELECT p.id, p.next_fire_at, p.current_version, 0, 'created', v_now
          FROM orbit_plan p FORCE INDEX (ix_plan_due)
         WHERE p.paused = 0 AND p.next_fire_at <= v_now
           AND (SELECT v.concurrency_key = ''
                       AND (v.catch_up <> 'none'
                            OR TIMESTAMPDIFF(MICROSECOND, p.next_fire_at, v_now) <= 60 * 1000000)
                  FROM orbit_plan_version v
                 WHERE v.plan_id = p.id AND v.version = p.current_version)
         ORDER BY p.next_fire_at
         LIMIT v_batch
           FOR UPDATE SKIP LOCKED;
        SET v_count = ROW_COUNT();
        IF v_duplicate THEN
          -- A slot already recorded (next_fire_at was set back to it): the statement inserted
          -- nothing, and the rest of the call fires one plan at a time, which records nothing for
          -- that slot and moves its plan on.
          ROLLBACK;
          SET v_set_based = 0;
          ITERATE due;
        END IF;
        IF v_count = 0 THEN
          -- None (left): the due plans that are left fire one at a time, in this transaction.
          SET v_set_based = 0, v_front = 0;
        ELSE
          -- The tasks, by one insert of the rows orbit_task_create writes for an unkeyed task due
          -- now (m::task_insert_values: lane 'ready', run_at now, the connection's quota slot, no
          -- debounce, no Idempotency-Key), in slot order.
          INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                                  payload, business_key, concurrency_key, resource_id, state, lane, priority,
                                  max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
                                  deadline_at, idempotency_key, plan_id, plan_version, quota_slot, created_at, updated_at,
                                  debounce_seconds, debounce_until)
          SELECT p.application_id, p.namespace_id, p.queue_id, v.handler, v.handler_version, v.payload_version,
                 v.payload, v.business_key, '', 0, 'WAITING', 'ready', v.priority,
                 v.max_attempts, 0, v.retry_base_ms, v.retry_max_ms, v.retry_unknown, v_now,
                 IF(v.deadline_seconds > 0, DATE_ADD(v_now, INTERVAL v.deadline_seconds SECOND), NULL),
                 '', p.id, f.version, v_quota_slot, v_now, v_now,
                 0, NULL
            FROM orbit_plan p FORCE INDEX (ix_plan_due)
      STRAIGHT_JOIN orbit_plan_fire f ON f.plan_id = p.id AND f.scheduled_for = p.next_fire_at
      STRAIGHT_JOIN orbit_plan_version v ON v.plan_id = f.plan_id AND v.version = f.version
     WHERE p.paused = 0 AND p.next_fire_at <= v_now
       AND f.task_id = 0 AND f.outcome = 'created' AND f.fired_at = v_now
     ORDER BY p.next_fire_at
     LIMIT v_count;
          SET v_ok = (ROW_COUNT() = v_count), v_first = LAST_INSERT_ID(), v_charged = 0, v_application_id = 0;
          -- The incomplete-task quota, once per application of the batch (in ascending id), on
          -- the connection's slot (as orbit_task_submit_many charges a batch).
          charge: WHILE v_ok AND v_charged < v_count DO
            SET v_n = 0;
            SELECT b.application_id, COUNT(*) INTO v_application_id, v_n
              FROM (SELECT p.application_id FROM orbit_plan p FORCE INDEX (ix_plan_due)
      STRAIGHT_JOIN orbit_plan_fire f ON f.plan_id = p.id AND f.scheduled_for = p.next_fire_at
     WHERE p.paused = 0 AND p.next_fire_at <= v_now
       AND f.task_id = 0 AND f.outcome = 'created' AND f.fired_at = v_now
     ORDER BY p.next_fire_at
     LIMIT v_count) b
             WHERE b.application_id > v_application_id
             GROUP BY b.application_id
             ORDER BY b.application_id
             LIMIT 1;
            IF v_n = 0 THEN
              SET v_ok = 0;
              LEAVE charge;
            END IF;
            UPDATE orbit_application_quota q
     SET q.incomplete_tasks = q.incomplete_tasks + v_n, q.updated_at = v_now
   WHERE q.application_id = v_application_id AND q.slot = v_quota_slot
     AND q.checked_max_incomplete_tasks = q.max_incomplete_tasks
     AND q.incomplete_tasks + v_n <= (q.max_incomplete_tasks DIV 16 + (q.slot < q.max_incomplete_tasks % 16));
            IF ROW_COUNT() = 0 THEN
              -- The slot cannot take them alone (READ COMMITTED released its row): every slot in
              -- ascending order and the exact total, as orbit_task_charge charges one task. When
              -- they all fit, that is what charging them one by one would do; when not, the batch
              -- fires one plan at a time, and the slots that fit fire.
              SELECT MIN(q.max_incomplete_tasks), SUM(q.incomplete_tasks) INTO v_limit, v_total
                FROM orbit_application_quota q
               WHERE q.application_id = v_application_id
                 FOR UPDATE;
              IF v_total + v_n <= v_limit THEN
                UPDATE orbit_application_quota q
                   SET q.incomplete_tasks = (v_total + v_n) DIV 16 + (q.slot < (v_total + v_n) % 16),
                       q.checked_max_incomplete_tasks = q.max_incomplete_tasks, q.updated_at = v_now
                 WHERE q.application_id = v_application_id;
              ELSE
                SET v_ok = 0;
              END IF;
            END IF;
            SET v_charged = v_charged + v_n;
          END WHILE charge;
          IF v_ok THEN
            -- Each fire row gets its task, and each plan advances (as one plan at a time below).
            -- The batch's tasks are found by ix_task_due (lane 'ready', run_at now, from the first
            -- id on) and matched to their plans and marked fire rows. Another call's tasks there
            -- (one that fired in the same microsecond) are skipped while it runs (SKIP LOCKED) and
            -- fail the mark once it committed; no row is waited for.
            UPDATE (SELECT o.id AS task_id, o.plan_id, f.scheduled_for AS slot, v.schedule_kind AS kind,
                           IF(v.schedule_kind = 'interval', CAST(v.schedule_spec AS UNSIGNED), 0) AS every, v.catch_up
                      FROM orbit_task o
                      STRAIGHT_JOIN orbit_plan p ON p.id = o.plan_id
                      STRAIGHT_JOIN orbit_plan_fire f ON f.plan_id = p.id AND f.scheduled_for = p.next_fire_at
                      STRAIGHT_JOIN orbit_plan_version v ON v.plan_id = f.plan_id AND v.version = f.version
                     WHERE o.lane = 'ready' AND o.run_at = v_now AND o.id >= v_first AND o.plan_id <> 0
                       AND f.version = o.plan_version AND f.task_id = 0 AND f.outcome = 'created' AND f.fired_at = v_now
                     LIMIT v_count
                       FOR UPDATE SKIP LOCKED) b
              STRAIGHT_JOIN orbit_plan q ON q.id = b.plan_id
              STRAIGHT_JOIN orbit_plan_fire r ON r.plan_id = b.plan_id AND r.scheduled_for = b.slot
               SET r.task_id = b.task_id,
                   q.next_fire_at = IF(b.kind = 'interval',
                                       IF(b.catch_up = 'all',
                                          GREATEST(DATE_ADD(b.slot, INTERVAL b.every SECOND),
                                                   DATE_SUB(DATE_ADD(b.slot, INTERVAL b.every * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, b.slot, v_now) / (b.every * 1000000)) + 1, 0) SECOND),
                                                            INTERVAL b.every * 100 SECOND)),
                                          DATE_ADD(b.slot, INTERVAL b.every * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, b.slot, v_now) / (b.every * 1000000)) + 1, 0) SECOND)),
                                       NULL),
                   q.schedule_after = IF(b.kind = 'interval', q.schedule_after,
                                         IF(b.catch_up = 'all', b.slot, GREATEST(b.slot, v_now))),
                   q.updated_at = v_now;
            SET v_ok = (ROW_COUNT() = 2 * v_count);
          END IF;
          IF NOT v_ok THEN
            -- A slot refused the charge (or, never seen, a step did not add up): undo the batch
            -- and fire its plans one at a time, each task charged on its own.
            ROLLBACK;
            SET v_one_by_one = v_count;
            ITERATE due;
          END IF;
          COMMIT;
          SET v_seen = v_seen + v_count, v_fired = v_fired + v_count, v_set_based = 0, v_front = 1;
          ITERATE due;
        END IF;
      END IF;
    END IF;
    SELECT p.id, p.next_fire_at, p.current_version, p.application_id, p.namespace_id, p.queue_id
      INTO v_plan_id, v_slot, v_version, v_application_id, v_namespace_id, v_queue_id
      FROM orbit_plan p
     WHERE p.paused = 0 AND p.next_fire_at <= v_now
     ORDER BY p.next_fire_at
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    IF v_plan_id IS NULL THEN
      COMMIT;
      SET v_batched = 0;
      LEAVE due;
    END IF;
    SET v_keyed = 0, v_batchable = 0;
    IF v_batched > 0 OR (v_front AND v_one_by_one = 0) THEN
      SELECT v.concurrency_key <> '',
             v.concurrency_key = ''
               AND (v.catch_up <> 'none'
                    OR TIMESTAMPDIFF(MICROSECOND, v_slot, v_now) <= 60 * 1000000)
               AND NOT EXISTS (SELECT 1 FROM orbit_plan_fire r WHERE r.plan_id = v_plan_id AND r.scheduled_for = v_slot)
        INTO v_keyed, v_batchable
        FROM orbit_plan_version v WHERE v.plan_id = v_plan_id AND v.version = v_version;
    END IF;
    IF v_keyed AND v_batched > 0 THEN
      -- A keyed plan fires in a transaction of its own: commit the batch (which lets this plan's
      -- row go too) and start over; the next round takes the earliest due plan, this one unless
      -- another node took it meanwhile.
      COMMIT;
      SET v_batched = 0;
      ITERATE due;
    END IF;
    IF v_batchable AND v_front AND v_one_by_one = 0 THEN
      -- After a batch, the earliest due plan could join one: let it go and take the next batch.
      COMMIT;
      SET v_batched = 0, v_set_based = 1;
      ITERATE due;
    END IF;
    SET v_seen = v_seen + 1;
    SELECT v.schedule_kind, IF(v.schedule_kind = 'interval', CAST(v.schedule_spec AS UNSIGNED), 0), v.catch_up,
           v.on_busy, v.handler, v.handler_version, v.payload_version, v.payload,
           v.business_key, v.concurrency_key, v.priority, v.max_attempts, v.retry_base_ms, v.retry_max_ms,
           v.retry_unknown, v.deadline_seconds
      INTO v_kind, v_interval, v_catch_up, v_on_busy, v_handler, v_handler_version, v_payload_version, v_payload,
           v_business_key, v_concurrency_key, v_priority, v_max_attempts, v_retry_base_ms, v_retry_max_ms,
           v_retry_unknown, v_deadline_seconds
      FROM orbit_plan_version v
     WHERE v.plan_id = v_plan_id AND v.version = v_version;
    IF v_catch_up = 'none' AND TIMESTAMPDIFF(MICROSECOND, v_slot, v_now) > 60 * 1000000 THEN
      -- Missed: catch_up none fires no late slot.
      SET v_duplicate = 1;
    ELSE
      SAVEPOINT plan_fire;
      INSERT INTO orbit_plan_fire (plan_id, scheduled_for, version, task_id, outcome, fired_at)
      VALUES (v_plan_id, v_slot, v_version, 0, 'created', v_now);
    END IF;
    IF NOT v_duplicate THEN
      SET v_outcome = 'created', v_task_id = 0, v_resource_id = NULL;
      IF v_on_busy <> 'queue' AND v_concurrency_key <> '' THEN
        SELECT r.id, r.holders >= r.holder_limit INTO v_resource_id, v_full FROM orbit_resource r
         WHERE r.namespace_id = v_namespace_id AND r.concurrency_key = v_concurrency_key
           FOR UPDATE;
        IF v_resource_id IS NOT NULL AND v_on_busy = 'skip' THEN
          -- Plain reads, exact under the resource row lock.
          SELECT IF(v_full
                    OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                                WHERE h.resource_id = v_resource_id AND h.lane IN ('ready', 'blocked', 'scheduled')),
                    'skipped', 'created')
            INTO v_outcome;
        ELSEIF v_resource_id IS NOT NULL THEN
          SELECT h.id INTO v_task_id FROM orbit_task h FORCE INDEX (ix_task_key)
           WHERE h.resource_id = v_resource_id AND h.lane IN ('ready', 'blocked', 'scheduled')
             AND h.state = 'WAITING' AND h.plan_id = v_plan_id
           ORDER BY h.id
           LIMIT 1;
          SET v_outcome = IF(v_task_id <> 0, 'kept', 'created');
        END IF;
      END IF;
      IF v_outcome = 'created' THEN
        CALL orbit_task_create(v_application_id, v_namespace_id, v_queue_id, v_handler, v_handler_version,
                               v_payload_version, v_payload, v_business_key, v_concurrency_key, v_priority,
                               v_max_attempts, v_retry_base_ms, v_retry_max_ms, v_retry_unknown,
                               v_deadline_seconds, v_now /* p_run_at */, 0 /* p_debounce_seconds */,
                               0 /* p_debounce_max_seconds */, '' /* p_idempotency_key */, v_plan_id,
                               v_version /* p_plan_version */, v_now, 1 /* p_charge */, v_task_id, v_replaced,
                               v_refusal, v_cancelled);
      END IF;
      IF v_task_id = 0 AND v_outcome <> 'skipped' THEN
        -- QUOTA_EXCEEDED: skip this slot without recording it.
        ROLLBACK TO SAVEPOINT plan_fire;
      ELSE
        UPDATE orbit_plan_fire f SET f.task_id = v_task_id, f.outcome = v_outcome
         WHERE f.plan_id = v_plan_id AND f.scheduled_for = v_slot;
        SET v_fired = v_fired + 1;
      END IF;
    END IF;
    IF v_kind = 'interval' THEN
      UPDATE orbit_plan p
         SET p.next_fire_at = IF(v_catch_up = 'all',
                                 GREATEST(DATE_ADD(v_slot, INTERVAL v_interval SECOND),
                                          DATE_SUB(DATE_ADD(v_slot, INTERVAL v_interval * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, v_slot, v_now) / (v_interval * 1000000)) + 1, 0) SECOND),
                                                   INTERVAL v_interval * 100 SECOND)),
                                 DATE_ADD(v_slot, INTERVAL v_interval * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, v_slot, v_now) / (v_interval * 1000000)) + 1, 0) SECOND)),
             p.updated_at = v_now
       WHERE p.id = v_plan_id;
    ELSE
      UPDATE orbit_plan p
         SET p.next_fire_at = NULL, p.schedule_after = IF(v_catch_up = 'all', v_slot, GREATEST(v_slot, v_now)),
             p.updated_at = v_now
       WHERE p.id = v_plan_id;
    END IF;
    -- The last plan of a refused batch commits too, so the next round can take a batch again.
    SET v_batched = v_batched + 1;
    IF v_batched >= 100 OR v_concurrency_key <> '' OR v_one_by_one = 1 THEN
      COMMIT;
      SET v_batched = 0;
    END IF;
    IF v_one_by_one > 0 THEN
      SET v_one_by_one = v_one_by_one - 1;
    END IF;
  END WHILE due;
  IF v_batched > 0 THEN
    COMMIT;
  END IF;
  SELECT v_fired AS fired,
         (SELECT MIN(p.next_fire_at) FROM orbit_plan p WHERE p.paused = 0) AS next_fire_at;
END$$
DELIMITER ;

-- ---- orbit_plan_get (from templates/procedures/orbit_plan_get.sql) ----
-- orbit_plan_get: Read one plan with its current version, as its credential may see it.
--
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the plan's queue); p_plan_id.
-- Result (one row): the plan columns:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (no such plan, or another tenant's).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_plan_get;
DELIMITER $$
CREATE PROCEDURE orbit_plan_get(IN p_token_hash BINARY(32), IN p_plan_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  SELECT p.queue_id INTO v_queue_id FROM orbit_plan p WHERE p.id = p_plan_id;
  -- A missing plan and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: plan not found';
  END IF;
  SELECT p.id AS plan_id, p.queue_id, p.namespace_id, p.name,
         p.current_version, p.paused, p.next_fire_at, p.created_at, p.updated_at,
         v.schedule_kind, v.schedule_spec, v.handler, v.handler_version,
         v.payload_version, v.payload, v.business_key, v.concurrency_key,
         v.priority, v.max_attempts, v.retry_base_ms, v.retry_max_ms,
         v.retry_unknown, v.deadline_seconds, p.schedule_after, v.timezone, v.catch_up,
         v.on_busy
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = p_plan_id;
END$$
DELIMITER ;

-- ---- orbit_plan_list (from templates/procedures/orbit_plan_list.sql) ----
-- orbit_plan_list: List the plans a credential reaches, in id order, a page at a time.
--
-- Only plans of queues of the credential's application and environment within its queue scope
-- (a namespace-wide grant or the listed queues); p_queue_id narrows to one queue, which must pass
-- the queue check. Keyset pagination: pass the last plan_id of a page as p_after_id for the next
-- one. Cost: the namespaces of the credential's scope are read from ux_plan_name, so a page reads
-- at most the plans of those namespaces (never another tenant's).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_queue_id (NULL = every queue in
--   scope); p_limit 1-1000; p_after_id (NULL = from the first plan).
-- Result (0..p_limit rows, plan_id order): the plan columns:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (p_queue_id), INVALID_ARGUMENT (p_limit).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_plan_list;
DELIMITER $$
CREATE PROCEDURE orbit_plan_list(IN p_token_hash BINARY(32), IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_limit BIGINT,
                                 IN p_after_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_queue_id IS NOT NULL THEN
    CALL orbit_auth_queue_check(p_token_hash, 'tasks:read', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;
  SELECT p.id AS plan_id, p.queue_id, p.namespace_id, p.name,
         p.current_version, p.paused, p.next_fire_at, p.created_at, p.updated_at,
         v.schedule_kind, v.schedule_spec, v.handler, v.handler_version,
         v.payload_version, v.payload, v.business_key, v.concurrency_key,
         v.priority, v.max_attempts, v.retry_base_ms, v.retry_max_ms,
         v.retry_unknown, v.deadline_seconds, p.schedule_after, v.timezone, v.catch_up,
         v.on_busy
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.namespace_id IN (SELECT n.id
                              FROM orbit_credential_scope s
                              JOIN orbit_namespace n ON n.id = s.namespace_id
                             WHERE s.credential_id = v_credential_id AND n.application_id = v_application_id
                               AND n.environment_id = v_environment_id)
     AND p.id > COALESCE(p_after_id, 0)
     AND (p_queue_id IS NULL OR p.queue_id = p_queue_id)
     AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                WHERE s.credential_id = v_credential_id AND s.namespace_id = p.namespace_id
                  AND s.queue_id IN ('', p.queue_id))
   ORDER BY p.id
   LIMIT p_limit;
END$$
DELIMITER ;

-- ---- orbit_plan_schedule_due (from templates/procedures/orbit_plan_schedule_due.sql) ----
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

-- ---- orbit_plan_schedule_set (from templates/procedures/orbit_plan_schedule_set.sql) ----
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
DROP PROCEDURE IF EXISTS orbit_plan_schedule_set;
DELIMITER $$
CREATE PROCEDURE orbit_plan_schedule_set(IN p_items LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_stored INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_items IS NULL OR NOT JSON_VALID(p_items) OR JSON_TYPE(p_items) <> 'ARRAY'
     OR JSON_LENGTH(p_items) NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: items must be a JSON array of 1-10000 items';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
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
END$$
DELIMITER ;

-- ---- orbit_plan_set_paused (from templates/procedures/orbit_plan_set_paused.sql) ----
-- orbit_plan_set_paused: Pause or resume a plan.
--
-- A paused plan does not fire. Resuming does not fire the slots missed while paused: an interval
-- plan's next slot already past moves to the first whole interval after now; a cron plan's next
-- slot is computed again by the scheduler as the first fire time after now (next_fire_at NULL,
-- schedule_after now). Idempotent.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the plan's queue); p_plan_id;
--   p_paused 0/1.
-- Result (one row): the plan columns:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT.
-- Locks: the orbit_plan row.
DROP PROCEDURE IF EXISTS orbit_plan_set_paused;
DELIMITER $$
CREATE PROCEDURE orbit_plan_set_paused(IN p_token_hash BINARY(32), IN p_plan_id BIGINT UNSIGNED, IN p_paused TINYINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_version INT UNSIGNED;
  DECLARE v_interval BIGINT;
  DECLARE v_kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_paused TINYINT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  SELECT p.queue_id INTO v_queue_id FROM orbit_plan p WHERE p.id = p_plan_id;
  -- A missing plan and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'queues:manage', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: plan not found';
  END IF;
  IF p_paused IS NULL OR p_paused NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: paused must be true or false';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT p.current_version, p.paused INTO v_version, v_paused FROM orbit_plan p WHERE p.id = p_plan_id FOR UPDATE;
  IF v_paused <> p_paused THEN
    SELECT v.schedule_kind, IF(v.schedule_kind = 'interval', CAST(v.schedule_spec AS UNSIGNED), 0)
      INTO v_kind, v_interval
      FROM orbit_plan_version v WHERE v.plan_id = p_plan_id AND v.version = v_version;
    UPDATE orbit_plan p
       SET p.next_fire_at = IF(p_paused = 1, p.next_fire_at,
                               IF(v_kind = 'interval', DATE_ADD(p.next_fire_at, INTERVAL v_interval * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, p.next_fire_at, v_now) / (v_interval * 1000000)) + 1, 0) SECOND), NULL)),
           p.schedule_after = IF(p_paused = 0 AND v_kind = 'cron', v_now, p.schedule_after),
           p.paused = p_paused, p.updated_at = v_now
     WHERE p.id = p_plan_id;
  END IF;
  COMMIT;
  SELECT p.id AS plan_id, p.queue_id, p.namespace_id, p.name,
         p.current_version, p.paused, p.next_fire_at, p.created_at, p.updated_at,
         v.schedule_kind, v.schedule_spec, v.handler, v.handler_version,
         v.payload_version, v.payload, v.business_key, v.concurrency_key,
         v.priority, v.max_attempts, v.retry_base_ms, v.retry_max_ms,
         v.retry_unknown, v.deadline_seconds, p.schedule_after, v.timezone, v.catch_up,
         v.on_busy
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = p_plan_id;
END$$
DELIMITER ;

-- ---- orbit_plan_version_create (from templates/procedures/orbit_plan_version_create.sql) ----
-- orbit_plan_version_create: Add a plan version (schedule + task definition) and make it current.
--
-- Versions are immutable: earlier ones stay as they were, and tasks they fired keep their
-- plan_version. Later fires use the new version's definition, concurrency_key included. With an
-- interval schedule the next slot moves earlier when the new interval is shorter (next_fire_at =
-- the earlier of the scheduled slot and now + interval); it is never pushed later. With a cron
-- schedule the next slot is the expression's first fire time after now: next_fire_at becomes NULL
-- and schedule_after now, and the scheduler computes it (orbit_plan_schedule_set).
-- Parameters (NULL = default where one is given):
--   p_token_hash BINARY(32)   SHA-256 of the bearer token (scope queues:manage on the plan's queue)
--   p_plan_id
--   p_interval_seconds        1-31536000 for an interval plan; NULL for a cron plan
--   p_cron                    a cron plan's expression, 1-191 ASCII characters, parsed and checked by
--                             the server (src/schedule.rs), which computes its fire times; NULL for
--                             an interval plan. Exactly one of p_interval_seconds, p_cron is given.
--   p_timezone                a cron plan's IANA time zone, 1-64 characters; NULL = 'UTC'. Must be
--                             NULL or '' for an interval plan.
--   p_catch_up                'none' | 'one' | 'all' (NULL = 'one'): missed slots after a stop
--   p_on_busy                 'queue' | 'skip' | 'replace_waiting' (NULL = 'queue'): a slot while
--                             the key is busy; other than 'queue' needs a concurrency_key
--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none
-- Result (one row): the plan columns, with the new version:
--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (plan), INVALID_ARGUMENT (naming the
--   field).
-- Locks, in order: the orbit_plan row, the new orbit_plan_version row.
DROP PROCEDURE IF EXISTS orbit_plan_version_create;
DELIMITER $$
CREATE PROCEDURE orbit_plan_version_create(
  IN p_token_hash BINARY(32),
  IN p_plan_id BIGINT UNSIGNED,
  IN p_interval_seconds BIGINT,
  IN p_cron TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_timezone TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_catch_up TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_on_busy TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_version INT UNSIGNED;
  DECLARE v_kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_spec VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_timezone VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_catch_up VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  SELECT p.queue_id INTO v_queue_id FROM orbit_plan p WHERE p.id = p_plan_id;
  -- A missing plan and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'queues:manage', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: plan not found';
  END IF;
  CALL orbit_task_validate(p_handler, p_handler_version, p_payload_version, p_payload, p_business_key,
                           p_concurrency_key, p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms,
                           p_retry_unknown, p_deadline_seconds);
  IF (p_interval_seconds IS NULL) = (p_cron IS NULL) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: schedule needs exactly one of interval_seconds and cron';
  END IF;
  IF p_interval_seconds IS NOT NULL THEN
    IF p_interval_seconds NOT BETWEEN 1 AND 31536000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: interval_seconds must be between 1 and 31536000';
    END IF;
    IF p_timezone IS NOT NULL AND p_timezone <> '' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: timezone is for cron schedules only';
    END IF;
    SET v_kind = 'interval', v_spec = CAST(p_interval_seconds AS CHAR), v_timezone = '';
  ELSE
    IF CHAR_LENGTH(p_cron) NOT BETWEEN 1 AND 191 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: cron must be 1-191 characters';
    END IF;
    IF p_timezone IS NOT NULL AND CHAR_LENGTH(p_timezone) NOT BETWEEN 1 AND 64 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: timezone must be 1-64 characters';
    END IF;
    SET v_kind = 'cron', v_spec = p_cron, v_timezone = COALESCE(p_timezone, 'UTC');
  END IF;
  SET v_catch_up = COALESCE(p_catch_up, 'one'), v_on_busy = COALESCE(p_on_busy, 'queue');
  IF v_catch_up NOT IN ('none', 'one', 'all') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: catch_up must be none, one or all';
  END IF;
  IF v_on_busy NOT IN ('queue', 'skip', 'replace_waiting') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: on_busy must be queue, skip or replace_waiting';
  END IF;
  IF v_on_busy <> 'queue' AND p_concurrency_key = '' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: on_busy skip and replace_waiting need a concurrency_key';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT p.current_version + 1 INTO v_version FROM orbit_plan p WHERE p.id = p_plan_id FOR UPDATE;
  INSERT INTO orbit_plan_version (plan_id, version, schedule_kind, schedule_spec, timezone, catch_up, on_busy,
                                  handler, handler_version,
                                  payload_version, payload, business_key, concurrency_key, priority, max_attempts,
                                  retry_base_ms, retry_max_ms, retry_unknown, deadline_seconds, created_at)
  VALUES (p_plan_id, v_version, v_kind, v_spec, v_timezone, v_catch_up, v_on_busy, p_handler, p_handler_version,
          p_payload_version, p_payload, p_business_key, p_concurrency_key, p_priority, p_max_attempts,
          p_retry_base_ms, p_retry_max_ms, p_retry_unknown, p_deadline_seconds, v_now);
  UPDATE orbit_plan p
     SET p.current_version = v_version,
         p.next_fire_at = IF(v_kind = 'interval',
                             LEAST(COALESCE(p.next_fire_at, DATE_ADD(v_now, INTERVAL p_interval_seconds SECOND)),
                                   DATE_ADD(v_now, INTERVAL p_interval_seconds SECOND)),
                             NULL),
         p.schedule_after = IF(v_kind = 'cron', v_now, NULL),
         p.updated_at = v_now
   WHERE p.id = p_plan_id;
  COMMIT;
  SELECT p.id AS plan_id, p.queue_id, p.namespace_id, p.name,
         p.current_version, p.paused, p.next_fire_at, p.created_at, p.updated_at,
         v.schedule_kind, v.schedule_spec, v.handler, v.handler_version,
         v.payload_version, v.payload, v.business_key, v.concurrency_key,
         v.priority, v.max_attempts, v.retry_base_ms, v.retry_max_ms,
         v.retry_unknown, v.deadline_seconds, p.schedule_after, v.timezone, v.catch_up,
         v.on_busy
    FROM orbit_plan p
    JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
   WHERE p.id = p_plan_id;
END$$
DELIMITER ;

-- ---- orbit_queue_create (from templates/procedures/orbit_queue_create.sql) ----
-- orbit_queue_create: Create a queue in one of the credential's namespaces.
--
-- Parameters: p_token_hash BINARY(32) (scope queues:manage, with every queue of the namespace in
--   scope); p_namespace_id (NULL = the credential's only namespace); p_name 1-191 characters;
--   p_max_active_attempts (queue permits; 0 or NULL = unlimited); p_retention_seconds (how long
--   finished tasks are kept, 60-315360000; NULL = the column default,
--   604800); p_new_queue_id (32 lowercase hex digits from a random source; NULL = derive one).
-- Result (one row): the queue columns: queue_id, namespace_id, name, paused, max_active_attempts,
--   created_at, updated_at, then retention_seconds.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (namespace), INVALID_ARGUMENT,
--   STATE_CONFLICT (a queue of that name exists in the namespace).
-- Locks: the new orbit_queue row.
DROP PROCEDURE IF EXISTS orbit_queue_create;
DELIMITER $$
CREATE PROCEDURE orbit_queue_create(
  IN p_token_hash BINARY(32),
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_name TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_max_active_attempts BIGINT,
  IN p_retention_seconds BIGINT,
  IN p_new_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_namespaces INT DEFAULT 0;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'queues:manage', v_application_id, v_environment_id, v_credential_id);
  -- Namespaces where the credential reaches every queue; creating a queue needs that.
  SELECT COUNT(*), MIN(s.namespace_id) INTO v_namespaces, v_namespace_id
    FROM orbit_credential_scope s
   WHERE s.credential_id = v_credential_id AND s.queue_id = ''
     AND (p_namespace_id IS NULL OR s.namespace_id = p_namespace_id);
  IF v_namespaces = 0 THEN
    IF p_namespace_id IS NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'PERMISSION_DENIED: the credential reaches no namespace as a whole';
    END IF;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: namespace not found';
  END IF;
  IF v_namespaces > 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: namespace_id is required: the credential reaches several namespaces';
  END IF;
  IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: name must be 1-191 characters';
  END IF;
  IF COALESCE(p_max_active_attempts, 0) NOT BETWEEN 0 AND 1000000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: max_active_attempts must be between 0 and 1000000';
  END IF;
  IF p_retention_seconds IS NOT NULL
     AND p_retention_seconds NOT BETWEEN 60 AND 315360000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: retention_seconds must be between 60 and 315360000';
  END IF;
  IF p_new_queue_id IS NOT NULL AND p_new_queue_id NOT REGEXP '^[0-9a-f]{32}$' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: queue id must be 32 lowercase hex digits';
  END IF;
  SET v_queue_id = COALESCE(p_new_queue_id, CONVERT(LEFT(SHA2(CONCAT(UUID(), RAND(), v_namespace_id, p_name), 256), 32) USING ascii));
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO orbit_queue (id, application_id, environment_id, namespace_id, name, max_active_attempts,
                           retention_seconds, created_at, updated_at)
  VALUES (v_queue_id, v_application_id, v_environment_id, v_namespace_id, p_name, COALESCE(p_max_active_attempts, 0),
          COALESCE(p_retention_seconds, 604800), v_now, v_now);
  IF v_duplicate THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: a queue with this name already exists in the namespace';
  END IF;
  COMMIT;
  SELECT q.id AS queue_id, q.namespace_id, q.name, q.paused,
         q.max_active_attempts, q.created_at, q.updated_at, q.retention_seconds FROM orbit_queue q WHERE q.id = v_queue_id;
END$$
DELIMITER ;

-- ---- orbit_queue_get (from templates/procedures/orbit_queue_get.sql) ----
-- orbit_queue_get: Read one queue, as its credential may see it.
--
-- A queue outside the credential's reach (another tenant's, or not in its queue list) is
-- NOT_FOUND, the same as orbit_queue_list not listing it.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_queue_id.
-- Result (one row): the queue columns and retention_seconds (see orbit_queue_create),
--   then its live counts: waiting, leased, running, retry_wait, needs_review (its tasks in each
--   unfinished state; finished tasks are not counted), sessions (open worker sessions serving it,
--   draining ones excluded) and workers (their distinct worker ids). Cost: one index range per
--   count, so it grows with the queue's unfinished tasks and the open sessions, never with the
--   finished tasks.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND.
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_queue_get;
DELIMITER $$
CREATE PROCEDURE orbit_queue_get(IN p_token_hash BINARY(32), IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', p_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: queue not found';
  END IF;
  SELECT q.id AS queue_id, q.namespace_id, q.name, q.paused,
         q.max_active_attempts, q.created_at, q.updated_at, q.retention_seconds,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'WAITING') AS waiting,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'LEASED') AS leased,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'RUNNING') AS running,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'RETRY_WAIT') AS retry_wait,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'NEEDS_REVIEW') AS needs_review,
         (SELECT COUNT(*) FROM orbit_session s JOIN orbit_session_queue sq ON sq.session_id = s.id AND sq.queue_id = q.id
           WHERE s.state = 'active') AS sessions,
         (SELECT COUNT(DISTINCT s.worker_id) FROM orbit_session s
            JOIN orbit_session_queue sq ON sq.session_id = s.id AND sq.queue_id = q.id
           WHERE s.state = 'active') AS workers
    FROM orbit_queue q WHERE q.id = p_queue_id;
END$$
DELIMITER ;

-- ---- orbit_queue_list (from templates/procedures/orbit_queue_list.sql) ----
-- orbit_queue_list: List the queues a credential reaches, in id order, a page at a time.
--
-- Only queues of the credential's application and environment within its queue scope (a
-- namespace-wide grant or the listed queues). Keyset pagination: pass the last queue_id of a page
-- as p_after_id for the next one. Reads ix_queue_application in order, so a page costs p_limit
-- rows (plus queues of the tenant outside the scope).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_limit 1-1000; p_after_id (NULL = from
--   the first queue; any string, compared byte-wise).
-- Result (0..p_limit rows): the queue columns and retention_seconds (see orbit_queue_create),
--   then its live counts: waiting, leased, running, retry_wait, needs_review (its tasks in each
--   unfinished state; finished tasks are not counted), sessions (open worker sessions serving it,
--   draining ones excluded) and workers (their distinct worker ids). Cost: one index range per
--   count, so it grows with the queue's unfinished tasks and the open sessions, never with the
--   finished tasks.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT (p_limit).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_queue_list;
DELIMITER $$
CREATE PROCEDURE orbit_queue_list(IN p_token_hash BINARY(32), IN p_limit BIGINT, IN p_after_id TEXT CHARACTER SET ascii COLLATE ascii_bin)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;
  SELECT q.id AS queue_id, q.namespace_id, q.name, q.paused,
         q.max_active_attempts, q.created_at, q.updated_at, q.retention_seconds,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'WAITING') AS waiting,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'LEASED') AS leased,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'RUNNING') AS running,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'RETRY_WAIT') AS retry_wait,
         (SELECT COUNT(*) FROM orbit_task t WHERE t.queue_id = q.id AND t.state = 'NEEDS_REVIEW') AS needs_review,
         (SELECT COUNT(*) FROM orbit_session s JOIN orbit_session_queue sq ON sq.session_id = s.id AND sq.queue_id = q.id
           WHERE s.state = 'active') AS sessions,
         (SELECT COUNT(DISTINCT s.worker_id) FROM orbit_session s
            JOIN orbit_session_queue sq ON sq.session_id = s.id AND sq.queue_id = q.id
           WHERE s.state = 'active') AS workers
    FROM orbit_queue q
   WHERE q.application_id = v_application_id AND q.environment_id = v_environment_id
     AND q.id > COALESCE(p_after_id, '')
     AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                WHERE s.credential_id = v_credential_id AND s.namespace_id = q.namespace_id
                  AND s.queue_id IN ('', q.id))
   ORDER BY q.id
   LIMIT p_limit;
END$$
DELIMITER ;

-- ---- orbit_queue_set_paused (from templates/procedures/orbit_queue_set_paused.sql) ----
-- orbit_queue_set_paused: Pause or resume a queue's dispatch.
--
-- Pausing stops new grants from the queue; it releases nothing: in-flight attempts end by their
-- result or lease. Submits to a paused queue are still accepted.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the queue); p_queue_id; p_paused 0/1.
-- Result (one row): the queue columns and retention_seconds (see orbit_queue_create).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT.
-- Locks: the orbit_queue row.
DROP PROCEDURE IF EXISTS orbit_queue_set_paused;
DELIMITER $$
CREATE PROCEDURE orbit_queue_set_paused(IN p_token_hash BINARY(32), IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_paused TINYINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL orbit_auth_queue_check(p_token_hash, 'queues:manage', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  IF p_paused IS NULL OR p_paused NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: paused must be true or false';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  UPDATE orbit_queue q SET q.paused = p_paused, q.updated_at = v_now WHERE q.id = p_queue_id;
  COMMIT;
  SELECT q.id AS queue_id, q.namespace_id, q.name, q.paused,
         q.max_active_attempts, q.created_at, q.updated_at, q.retention_seconds FROM orbit_queue q WHERE q.id = p_queue_id;
END$$
DELIMITER ;

-- ---- orbit_queue_set_retention (from templates/procedures/orbit_queue_set_retention.sql) ----
-- orbit_queue_set_retention: Set how long a queue's finished tasks are kept.
--
-- Applies to every finished task of the queue, those finished before the change included: the
-- next orbit_task_purge deletes the queue's tasks that finished more than p_retention_seconds ago.
-- Parameters: p_token_hash BINARY(32) (scope queues:manage on the queue); p_queue_id;
--   p_retention_seconds 60-315360000.
-- Result (one row): the queue columns and retention_seconds (see orbit_queue_create).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT.
-- Locks: the orbit_queue row.
DROP PROCEDURE IF EXISTS orbit_queue_set_retention;
DELIMITER $$
CREATE PROCEDURE orbit_queue_set_retention(IN p_token_hash BINARY(32), IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin, IN p_retention_seconds BIGINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL orbit_auth_queue_check(p_token_hash, 'queues:manage', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  IF p_retention_seconds IS NULL
     OR p_retention_seconds NOT BETWEEN 60 AND 315360000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: retention_seconds must be between 60 and 315360000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  UPDATE orbit_queue q
     SET q.retention_seconds = p_retention_seconds, q.updated_at = v_now
   WHERE q.id = p_queue_id;
  COMMIT;
  SELECT q.id AS queue_id, q.namespace_id, q.name, q.paused,
         q.max_active_attempts, q.created_at, q.updated_at, q.retention_seconds FROM orbit_queue q WHERE q.id = p_queue_id;
END$$
DELIMITER ;

-- ---- orbit_session_attempts (from templates/procedures/orbit_session_attempts.sql) ----
-- orbit_session_attempts: The live attempts a worker session holds, as assignments.
--
-- Lets the façade deliver a grant whose answer never reached it: a claim, or a result that
-- granted the next tasks, can commit and then lose its connection before the rows are read (a
-- killed connection, a failover). Those attempts belong to the session but the worker was never
-- told; without this they would sit until their lease ran out. The façade compares this list with
-- what it has sent (at every lease renewal) and sends the difference.
-- It is also the session's heartbeat: with p_touch_after_ms, a session last heard from that long
-- ago or longer gets last_seen_at = now (so an idle worker's renewals write at most once per
-- p_touch_after_ms), which keeps orbit_session_sweep off it.
-- Parameters: p_session_id; p_touch_after_ms (NULL = do not touch).
-- Result (0..n rows, by attempt id): attempt_id, attempt_no, lease_expires_at, concurrency_token
--   (0 = no key), key_slot, then the task columns (as orbit_task_claim):
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
-- Signals: UNAUTHENTICATED (no such session, or it is closed: its socket went away, the sweep
--   closed it, or its credential was revoked).
-- Locks: the orbit_session row, briefly (the touch; autocommit).
DROP PROCEDURE IF EXISTS orbit_session_attempts;
DELIMITER $$
CREATE PROCEDURE orbit_session_attempts(IN p_session_id BIGINT UNSIGNED, IN p_touch_after_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_session_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  IF p_touch_after_ms IS NOT NULL THEN
    UPDATE orbit_session s
       SET s.last_seen_at = v_now
     WHERE s.id = p_session_id AND s.state <> 'closed'
       AND s.last_seen_at <= DATE_SUB(v_now, INTERVAL p_touch_after_ms * 1000 MICROSECOND);
  END IF;
  SET v_session_state = NULL;
  SELECT s.state INTO v_session_state FROM orbit_session s WHERE s.id = p_session_id;
  IF v_session_state IS NULL OR v_session_state = 'closed' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'UNAUTHENTICATED: the session is closed';
  END IF;
  SELECT a.id AS attempt_id, a.attempt_no, a.lease_expires_at, a.concurrency_token,
         a.key_slot, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at
    FROM orbit_attempt a
    JOIN orbit_task t ON t.id = a.task_id
   WHERE a.session_id = p_session_id AND a.state IN ('LEASED', 'RUNNING')
   ORDER BY a.id;
END$$
DELIMITER ;

-- ---- orbit_session_close (from templates/procedures/orbit_session_close.sql) ----
-- orbit_session_close: Mark a session draining (no new grants) or closed (socket gone).
--
-- Releases nothing: the session's attempts keep their permits until their result or their lease
-- expiry (SPEC §4: stopping dispatch or disconnecting releases nothing directly).
-- Parameters: p_session_id; p_state 'draining' | 'closed'.
-- Result (one row): session_id, state, in_flight (LEASED + RUNNING attempts it still owns).
-- Signals: NOT_FOUND, INVALID_ARGUMENT.
-- Locks: orbit_session row.
DROP PROCEDURE IF EXISTS orbit_session_close;
DELIMITER $$
CREATE PROCEDURE orbit_session_close(IN p_session_id BIGINT UNSIGNED, IN p_state TEXT CHARACTER SET ascii COLLATE ascii_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_found INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF p_state IS NULL OR p_state NOT IN ('draining', 'closed') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: state must be draining or closed';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  UPDATE orbit_session s
     SET s.state = IF(s.state = 'closed', 'closed', p_state),
         s.closed_at = IF(p_state = 'closed', COALESCE(s.closed_at, v_now), s.closed_at),
         s.last_seen_at = v_now
   WHERE s.id = p_session_id;
  COMMIT;
  SELECT COUNT(*) INTO v_found FROM orbit_session s WHERE s.id = p_session_id;
  IF v_found = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: session not found';
  END IF;
  SELECT s.id AS session_id, s.state,
         (SELECT COUNT(*) FROM orbit_attempt a WHERE a.session_id = s.id AND a.state IN ('LEASED', 'RUNNING')) AS in_flight
    FROM orbit_session s
   WHERE s.id = p_session_id;
END$$
DELIMITER ;

-- ---- orbit_session_open (from templates/procedures/orbit_session_open.sql) ----
-- orbit_session_open: Register a worker's WebSocket session (the hello message), resuming its attempts.
--
-- The worker identity (worker_id) is created on first use with its concurrency_keys flag, which is
-- fixed from then on: a hello with the other value is a STATE_CONFLICT (an upgraded process must
-- use a new identity). Sessions of a worker without concurrency_keys never receive keyed tasks.
-- Every queue must be within the credential's scope. Resume: active attempts listed in
-- p_resume_json that belong to the same worker identity AND to one of this session's queues (which
-- the credential may consume: checked above) move to the new session, keeping their attempt, lease
-- and token; others are left alone and not reported. The queue condition matters: worker ids are
-- chosen by workers, so without it a credential of another namespace or queue could take over a
-- running attempt by naming its worker id.
-- start_on_assign = 1: this session's grants are started in the granting transaction (attempt and
-- task RUNNING, as if task.start had been accepted), so the worker runs its handler on the
-- assignment without a task.start round trip and one commit less per task. The price: an attempt
-- whose lease runs out counts as started (ends UNKNOWN, the task goes to NEEDS_REVIEW unless it
-- may retry unknown outcomes), even if the worker never received the assignment.
-- Parameters: p_token_hash BINARY(32) (scopes workers:connect, and workers:consume on every queue);
--   p_worker_id 1-191 characters; p_node (the serve process); p_capacity 1-10000;
--   p_concurrency_keys 0/1; p_start_on_assign 0/1; p_handlers_json JSON array of handler names ([] = any);
--   p_queue_ids_json JSON array of queue ids (1-100); p_resume_json JSON array of attempt ids.
-- Result (one row): session_id, worker_row_id, concurrency_keys, resumed (JSON array of the
--   attempt ids now owned by this session).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (a queue), INVALID_ARGUMENT,
--   STATE_CONFLICT (concurrency_keys differs from the worker's registration).
-- Locks, in order: orbit_worker row (insert or FOR UPDATE), resumed orbit_attempt rows.
DROP PROCEDURE IF EXISTS orbit_session_open;
DELIMITER $$
CREATE PROCEDURE orbit_session_open(
  IN p_token_hash BINARY(32),
  IN p_worker_id TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_node TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_capacity BIGINT,
  IN p_concurrency_keys TINYINT,
  IN p_start_on_assign TINYINT,
  IN p_handlers_json TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_queue_ids_json TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_resume_json TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_app BIGINT UNSIGNED;
  DECLARE v_cred BIGINT UNSIGNED;
  DECLARE v_worker_row_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_registered TINYINT;
  DECLARE v_session_id BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_position INT DEFAULT 0;
  DECLARE v_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'workers:connect', v_application_id, v_environment_id, v_credential_id);
  IF p_worker_id IS NULL OR CHAR_LENGTH(p_worker_id) NOT BETWEEN 1 AND 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: worker_id must be 1-191 characters';
  END IF;
  IF p_capacity IS NULL OR p_capacity NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: capacity must be between 1 and 10000';
  END IF;
  IF p_concurrency_keys IS NULL OR p_concurrency_keys NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: concurrency_keys must be true or false';
  END IF;
  IF p_start_on_assign IS NULL OR p_start_on_assign NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: start_on_assign must be true or false';
  END IF;
  IF p_handlers_json IS NULL OR NOT JSON_VALID(p_handlers_json) OR JSON_TYPE(p_handlers_json) <> 'ARRAY' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: handlers must be an array of handler names';
  END IF;
  IF p_resume_json IS NULL OR NOT JSON_VALID(p_resume_json) OR JSON_TYPE(p_resume_json) <> 'ARRAY' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: resume must be an array of attempt ids';
  END IF;
  IF p_queue_ids_json IS NULL OR NOT JSON_VALID(p_queue_ids_json) OR JSON_TYPE(p_queue_ids_json) <> 'ARRAY'
     OR JSON_LENGTH(p_queue_ids_json) NOT BETWEEN 1 AND 100 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: queue_ids must be an array of 1-100 queue ids';
  END IF;
  SET v_count = JSON_LENGTH(p_queue_ids_json);
  WHILE v_i < v_count DO
    SET v_queue_id = JSON_UNQUOTE(JSON_EXTRACT(p_queue_ids_json, CONCAT('$[', v_i, ']')));
    CALL orbit_auth_queue_check(p_token_hash, 'workers:consume', v_queue_id, v_app, v_namespace_id, v_cred);
    SET v_i = v_i + 1;
  END WHILE;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO orbit_worker (application_id, environment_id, worker_id, concurrency_keys, created_at, last_seen_at)
  VALUES (v_application_id, v_environment_id, p_worker_id, p_concurrency_keys, v_now, v_now)
  ON DUPLICATE KEY UPDATE last_seen_at = VALUES(last_seen_at);
  SELECT w.id, w.concurrency_keys INTO v_worker_row_id, v_registered
    FROM orbit_worker w
   WHERE w.application_id = v_application_id AND w.environment_id = v_environment_id AND w.worker_id = p_worker_id
     FOR UPDATE;
  IF v_registered <> p_concurrency_keys THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: concurrency_keys is fixed for a worker_id; use a new worker_id';
  END IF;
  INSERT INTO orbit_session (worker_row_id, worker_id, credential_id, application_id, node, capacity,
                             concurrency_keys, start_on_assign, handlers, state, claim_seq, connected_at, last_seen_at)
  VALUES (v_worker_row_id, p_worker_id, v_credential_id, v_application_id, COALESCE(p_node, ''), p_capacity,
          v_registered, p_start_on_assign, p_handlers_json, 'active', 0, v_now, v_now);
  SET v_session_id = LAST_INSERT_ID();
  -- Positions 0 to n-1 without gaps (a repeated queue id is skipped and takes none): the grant
  -- finds the queue of each visit by its position (orbit_task_grant).
  SET v_i = 0, v_position = 0;
  WHILE v_i < v_count DO
    INSERT IGNORE INTO orbit_session_queue (session_id, queue_id, position)
    VALUES (v_session_id, JSON_UNQUOTE(JSON_EXTRACT(p_queue_ids_json, CONCAT('$[', v_i, ']'))), v_position);
    SET v_position = v_position + ROW_COUNT(), v_i = v_i + 1;
  END WHILE;
  -- Resume: the same worker identity takes its live attempts over; token and lease unchanged.
  -- claim_seq 0: a grant finds its own attempts by (session, claim_seq), and the old session's
  -- sequence number would otherwise make a resumed attempt part of one of this session's grants.
  SET v_count = JSON_LENGTH(p_resume_json), v_i = 0;
  WHILE v_i < v_count DO
    UPDATE orbit_attempt a
       SET a.session_id = v_session_id, a.claim_seq = 0
     WHERE a.id = CAST(JSON_UNQUOTE(JSON_EXTRACT(p_resume_json, CONCAT('$[', v_i, ']'))) AS UNSIGNED)
       AND a.application_id = v_application_id AND a.worker_id = p_worker_id
       AND a.state IN ('LEASED', 'RUNNING')
       AND a.queue_id IN (SELECT sq.queue_id FROM orbit_session_queue sq WHERE sq.session_id = v_session_id);
    SET v_i = v_i + 1;
  END WHILE;
  COMMIT;
  SELECT v_session_id AS session_id, v_worker_row_id AS worker_row_id, v_registered AS concurrency_keys,
         COALESCE((SELECT JSON_ARRAYAGG(a.id) FROM orbit_attempt a
                    WHERE a.session_id = v_session_id AND a.state IN ('LEASED', 'RUNNING')), JSON_ARRAY()) AS resumed;
END$$
DELIMITER ;

-- ---- orbit_session_sweep (from templates/procedures/orbit_session_sweep.sql) ----
-- orbit_session_sweep: Close open worker sessions not heard from for p_idle_ms (their socket is gone).
--
-- A session is closed by its server when its socket ends; when that write fails (the database
-- was busy or away), or the server died, the session would stay open for ever. The façade
-- touches last_seen_at on hello and at most once per lease on a worker's renewals
-- (orbit_session_attempts); a session silent for p_idle_ms (serve uses three leases) has no live
-- worker. Closing releases nothing: its attempts end by lease expiry as usual
-- (orbit_lease_recover). A frame that still arrives on such a session is refused
-- (UNAUTHENTICATED) and the server ends the socket. Safe from several servers at once.
-- Parameters: p_idle_ms 1000-86400000; p_limit 1-10000 (sessions closed at most).
-- Result (one row): closed INT (sessions closed), next_due_at DATETIME(6) (when the longest
--   silent open session reaches p_idle_ms; NULL when none is open).
-- Signals: INVALID_ARGUMENT.
-- Locks: the closed orbit_session rows (ix_session_seen range).
DROP PROCEDURE IF EXISTS orbit_session_sweep;
DELIMITER $$
CREATE PROCEDURE orbit_session_sweep(IN p_idle_ms INT, IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_closed INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF p_idle_ms IS NULL OR p_idle_ms NOT BETWEEN 1000 AND 86400000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: idle_ms must be between 1000 and 86400000';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  UPDATE orbit_session s FORCE INDEX (ix_session_seen)
     SET s.state = 'closed', s.closed_at = v_now
   WHERE s.state IN ('active', 'draining')
     AND s.last_seen_at < DATE_SUB(v_now, INTERVAL p_idle_ms * 1000 MICROSECOND)
   LIMIT p_limit;
  SET v_closed = ROW_COUNT();
  COMMIT;
  SELECT v_closed AS closed,
         DATE_ADD((SELECT MIN(s.last_seen_at) FROM orbit_session s WHERE s.state IN ('active', 'draining')),
                  INTERVAL p_idle_ms * 1000 MICROSECOND) AS next_due_at;
END$$
DELIMITER ;

-- ---- orbit_task_cancel (from templates/procedures/orbit_task_cancel.sql) ----
-- orbit_task_cancel: Cancel a task that has not started: WAITING, RETRY_WAIT, LEASED or NEEDS_REVIEW.
--
-- A LEASED attempt (granted, not started) is ended as CANCELLED and its permits are released in
-- this transaction, so the key's next task is granted with a larger token. A ready keyed task
-- hands its queue's slot of the key to the next blocked task. A RUNNING task cannot be cancelled
-- (its code may be acting on the resource): STATE_CONFLICT. Cancelling a CANCELLED task returns it
-- unchanged; any other terminal state is a STATE_CONFLICT.
-- Parameters: p_token_hash BINARY(32) (scope tasks:submit on the task's queue); p_task_id.
-- Result (one row): the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
--   then wake_queues: a JSON array of the queue ids where the cancel readied work (a key's next
--   task, room under a queue or application limit): unpaused queues of the task's application
--   with a ready task; the caller wakes the sessions that serve them.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope), NOT_FOUND (no such task, another tenant's,
--   or outside the credential's queues: one answer), STATE_CONFLICT.
-- Locks, in order: orbit_attempt row (LEASED task), orbit_task row, orbit_resource row (keyed),
--   promoted task rows (SKIP LOCKED), the orbit_application_quota slot row the charges go back
--   to (a waiting task: orbit_task.quota_slot; a leased one: its attempt's, orbit_attempt.quota_slot).
DROP PROCEDURE IF EXISTS orbit_task_cancel;
DELIMITER $$
CREATE PROCEDURE orbit_task_cancel(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_attempt_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_attempt_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_current BIGINT UNSIGNED;
  DECLARE v_ended INT;
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_slot TINYINT UNSIGNED;
  DECLARE v_wake_queues TEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT '[]';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  SELECT t.queue_id, t.current_attempt_id INTO v_queue_id, v_attempt_id FROM orbit_task t WHERE t.id = p_task_id;
  -- A missing task and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: task not found';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  -- Attempt before task: the same order as orbit_attempt_finish, so the two never deadlock.
  IF v_attempt_id <> 0 THEN
    SELECT a.state INTO v_attempt_state FROM orbit_attempt a WHERE a.id = v_attempt_id FOR UPDATE;
  END IF;
  SELECT t.state, t.lane, t.resource_id, t.current_attempt_id, t.quota_slot
    INTO v_state, v_lane, v_resource_id, v_current, v_slot
    FROM orbit_task t
   WHERE t.id = p_task_id
     FOR UPDATE;
  IF v_current <> v_attempt_id THEN
    -- A claim granted a new attempt between the two reads; the caller may retry.
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: the task changed while cancelling; retry';
  END IF;
  IF v_state = 'CANCELLED' THEN
    COMMIT;
  ELSEIF v_state = 'LEASED' THEN
    -- (An attempt's key is its task's: v_resource_id.)
    CALL orbit_attempt_end(0 /* p_session_id */, JSON_ARRAY(JSON_OBJECT('attempt_id', v_attempt_id, 'outcome', 'cancelled')) /* p_results */,
                           v_now, 0 /* p_hand_off */, v_ended);
    INSERT INTO orbit_task_event (task_id, attempt_id, event, from_state, to_state, concurrency_token, detail, created_at)
    SELECT a.task_id, a.id, CONCAT('attempt_', a.outcome), IF(a.started_at IS NULL, 'LEASED', 'RUNNING'), t.state,
           a.concurrency_token, CONCAT('attempt ', a.state, '; permits released'), v_now
      FROM (SELECT v_attempt_id AS id) e
      STRAIGHT_JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = e.id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id
     ORDER BY a.id;
    UPDATE (SELECT a.quota_slot AS slot, COUNT(*) AS active,
                 CAST(SUM(t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) AS SIGNED) AS incomplete
            FROM (SELECT x.quota_slot, x.task_id FROM orbit_attempt x WHERE x.id = v_attempt_id) a
            JOIN orbit_task t ON t.id = a.task_id
           GROUP BY a.quota_slot) g
    STRAIGHT_JOIN orbit_application_quota q ON q.application_id = v_application_id AND q.slot = g.slot
     SET q.active_attempts = q.active_attempts - g.active,
         q.incomplete_tasks = q.incomplete_tasks - g.incomplete,
         q.updated_at = v_now;
    COMMIT;
    -- The released key, queue permit and quota may let any queue of the application claim.
    SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO v_wake_queues
      FROM orbit_queue q FORCE INDEX (ix_queue_application)
     WHERE q.application_id = v_application_id AND q.paused = 0
       AND (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = q.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL;
  ELSEIF v_state IN ('WAITING', 'RETRY_WAIT', 'NEEDS_REVIEW') THEN
    IF v_resource_id <> 0 AND v_lane = 'ready' THEN
      SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = v_resource_id FOR UPDATE;
    END IF;
    UPDATE orbit_task t
       SET t.state = 'CANCELLED', t.lane = 'none', t.finished_at = v_now, t.updated_at = v_now
     WHERE t.id = p_task_id;
    IF v_resource_id <> 0 AND v_lane = 'ready' THEN
      CALL orbit_key_promote(v_resource_id, v_queue_id, v_now);
    END IF;
    INSERT INTO orbit_task_event (task_id, event, from_state, to_state, created_at)
    VALUES (p_task_id, 'cancelled', v_state, 'CANCELLED', v_now);
    UPDATE orbit_application_quota q
       SET q.incomplete_tasks = q.incomplete_tasks - 1, q.updated_at = v_now
     WHERE q.application_id = v_application_id AND q.slot = v_slot;
    COMMIT;
    IF v_resource_id <> 0 AND v_lane = 'ready' THEN
      -- The key's next task in this queue.
      SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO v_wake_queues
      FROM (SELECT v_queue_id AS queue_id) w
      STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = w.queue_id
     WHERE q.paused = 0
       AND (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = q.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL;
    END IF;
  ELSE
    ROLLBACK;
    IF v_state = 'RUNNING' THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: a RUNNING task cannot be cancelled';
    END IF;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: the task has already finished';
  END IF;
  SELECT t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at, v_wake_queues AS wake_queues FROM orbit_task t WHERE t.id = p_task_id;
END$$
DELIMITER ;

-- ---- orbit_task_charge (from templates/procedures/orbit_task_charge.sql) ----
-- orbit_task_charge: Internal: charge one new task to its application's incomplete-task quota, in the caller's transaction.
--
-- The one exact charge (see orbit_application_quota): the connection's slot when it stays within
-- its share, otherwise, under a lock on every slot and an exact check of the total, a respread of
-- the counters with the new total. The task row records the connection's slot either way (where
-- a cancel, review or expiry gives it back; any slot will do, only the sum counts). Used by
-- orbit_task_create for each task, by orbit_task_submit for its task (after its receipt), and
-- by orbit_task_submit_many for each task of a batch that its connection's slot cannot take whole.
-- Parameters: p_application_id; p_now.
-- Out: o_charged (1 = charged; 0 = the quota is full: nothing was charged, the caller rolls back).
-- Result: none. Signals: none.
-- Locks: orbit_application_quota slot rows: the connection's slot; or, when it cannot take the
--   charge alone, every slot of the application in ascending slot order (one locking read).
DROP PROCEDURE IF EXISTS orbit_task_charge;
DELIMITER $$
CREATE PROCEDURE orbit_task_charge(
  IN p_application_id BIGINT UNSIGNED,
  IN p_now DATETIME(6),
  OUT o_charged TINYINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_slot TINYINT UNSIGNED DEFAULT (CONNECTION_ID() % 16);
  DECLARE v_limit BIGINT UNSIGNED;
  DECLARE v_total BIGINT;
  SET o_charged = 1;
  UPDATE orbit_application_quota q
     SET q.incomplete_tasks = q.incomplete_tasks + 1, q.updated_at = p_now
   WHERE q.application_id = p_application_id AND q.slot = v_slot
     AND q.checked_max_incomplete_tasks = q.max_incomplete_tasks
     AND q.incomplete_tasks + 1 <= (q.max_incomplete_tasks DIV 16 + (q.slot < q.max_incomplete_tasks % 16));
  IF ROW_COUNT() = 0 THEN
    -- The connection's slot cannot take it alone (READ COMMITTED released that row): lock every
    -- slot in ascending order and check the exact total.
    SELECT MIN(q.max_incomplete_tasks), SUM(q.incomplete_tasks) INTO v_limit, v_total
      FROM orbit_application_quota q
     WHERE q.application_id = p_application_id
       FOR UPDATE;
    IF v_total < v_limit THEN
      -- Admitted: spread the new total evenly, which puts every slot within its share (the
      -- counters are signed and only their sum counts), so one-slot charges resume everywhere.
      UPDATE orbit_application_quota q
         SET q.incomplete_tasks = (v_total + 1) DIV 16 + (q.slot < (v_total + 1) % 16),
             q.checked_max_incomplete_tasks = q.max_incomplete_tasks, q.updated_at = p_now
       WHERE q.application_id = p_application_id;
    ELSE
      SET o_charged = 0;
    END IF;
  END IF;
END$$
DELIMITER ;

-- ---- orbit_task_claim (from templates/procedures/orbit_task_claim.sql) ----
-- orbit_task_claim: Grant up to p_max ready tasks to a worker session, in one transaction.
--
-- Runs orbit_task_grant (which tasks are granted, in which order, and what is skipped is described
-- there; each grant's own rules in orbit_attempt_grant) and commits. A claim that grants nothing writes nothing (no durable commit): idle sessions woken
-- by the dispatch signal cost the server no log flush.
-- Parameters: p_session_id; p_max 1-1000 (the session's free capacity); p_lease_ms 1000-3600000.
-- Result (0..p_max rows, one per grant):
--   attempt_id, attempt_no, lease_expires_at, concurrency_token (0 = no key), key_slot (the key's
--   permit slot, 0 to its holder limit - 1; 0 = no key), then the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
-- Signals: NOT_FOUND (no such session), INVALID_ARGUMENT (p_max, p_lease_ms).
--   A closed or draining session, or a revoked credential, gets no rows.
-- Locks: as orbit_task_grant (orbit_session row first, orbit_application_quota slot rows last).
DROP PROCEDURE IF EXISTS orbit_task_claim;
DELIMITER $$
CREATE PROCEDURE orbit_task_claim(IN p_session_id BIGINT UNSIGNED, IN p_max INT, IN p_lease_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_seq BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_granted INT DEFAULT 0;
  -- (A claim hands nothing off: always 0.)
  DECLARE v_handoffs INT;
  DECLARE v_room BIGINT;
  DECLARE v_deferred TINYINT;
  DECLARE v_queue_limited TINYINT;
  DECLARE v_granted_id BIGINT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_max IS NULL OR p_max NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: max must be between 1 and 1000';
  END IF;
  IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 3600000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: lease_ms must be between 1000 and 3600000';
  END IF;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  -- From the front of each ready lane: a claim on its own is how a woken session finds what
  -- other sessions readied.
  CALL orbit_task_grant(p_session_id, p_max, p_lease_ms, v_now, NULL /* p_results */, 0 /* p_hinted */,
                        0 /* p_credit */, 0 /* p_every_slot */, v_deferred, v_seq, v_granted, v_handoffs, v_room,
                        v_queue_limited, v_granted_id /* p_attempt_id */);
  IF v_deferred THEN
    -- The session's slot refused the charge and may stay locked (see orbit_task_grant): again,
    -- in a transaction of its own that locks every slot at once.
    ROLLBACK;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
    CALL orbit_task_grant(p_session_id, p_max, p_lease_ms, v_now, NULL /* p_results */, 0 /* p_hinted */,
                          0 /* p_credit */, 1 /* p_every_slot */, v_deferred, v_seq, v_granted, v_handoffs, v_room,
                          v_queue_limited, v_granted_id /* p_attempt_id */);
  END IF;
  IF v_seq = 0 THEN
    ROLLBACK;
  ELSE
    COMMIT;
  END IF;
  IF v_granted = 1 THEN
    SELECT a.id AS attempt_id, a.attempt_no, a.lease_expires_at, a.concurrency_token,
         a.key_slot, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at
      FROM orbit_attempt a
      JOIN orbit_task t ON t.id = a.task_id
     WHERE a.id = v_granted_id;
  ELSEIF v_granted > 1 THEN
    SELECT a.id AS attempt_id, a.attempt_no, a.lease_expires_at, a.concurrency_token,
         a.key_slot, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at
      FROM orbit_attempt a
      JOIN orbit_task t ON t.id = a.task_id
     WHERE a.session_id = p_session_id AND a.claim_seq = v_seq
     ORDER BY a.id;
  ELSE
    -- No grant, no rows: no row has id 0 (a primary-key probe that finds nothing).
    SELECT a.id AS attempt_id, a.attempt_no, a.lease_expires_at, a.concurrency_token,
         a.key_slot, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at
      FROM orbit_attempt a
      JOIN orbit_task t ON t.id = a.task_id
     WHERE a.id = 0;
  END IF;
END$$
DELIMITER ;

-- ---- orbit_task_create (from templates/procedures/orbit_task_create.sql) ----
-- orbit_task_create: Internal: create one accepted task inside the caller's transaction.
--
-- Shared by orbit_task_submit, orbit_task_submit_many and orbit_plan_fire_due, so every task is
-- created by the same code: the key's resource row (lock, or insert), the task row in its lane
-- (as orbit_task_place decides it: 'scheduled' until its run_at, else 'ready' for an unkeyed
-- task, and for a keyed one 'ready' only while its key has room and no ready task of the key
-- waits in the queue; a task whose key's policy replaces others is placed after them, by
-- orbit_task_place) and (p_charge = 1) the application's incomplete-task counter
-- (orbit_task_charge). The definition and timing must already be validated (orbit_task_validate,
-- m::task_timing_error). When the incomplete-task quota is full, or the key's policy refuses the
-- task, o_task_id is 0 and the caller must roll back what this call wrote. With p_charge = 0 the
-- task records the connection's quota slot and the caller charges it: orbit_task_submit_many
-- charges a whole batch with one statement, last, and orbit_task_submit a task after its
-- receipt. No history row: the task row's created_at, plan_id and plan_version record the creation
-- (see orbit_task_event). orbit_task_submit_many and orbit_plan_fire_due insert a batch of
-- unkeyed tasks whole, with the row this writes (m::task_insert_values; a test compares them).
-- Debounce (p_debounce_seconds > 0, keyed): under the key's resource row lock, the key's
-- debounced task that still waits for its run_at in this queue (at most one: each debounced
-- create replaces the one before) is replaced. It ends CANCELLED with error
-- {"code": "REPLACED", "replaced_by": <the new task>}, and the new task takes its quota charge
-- (its slot: nothing is charged or given back) and its burst's bound (debounce_until). The new
-- run_at is acceptance + p_debounce_seconds, at most that bound; its acceptance time is read
-- after the key's lock is taken. A waiting task locked by another transaction is skipped (SKIP
-- LOCKED, as the lock order requires of a task row taken after a resource row): only
-- orbit_task_promote_due (the task is due, so the new one starts a burst of its own), a cancel
-- or a deadline expiry (it will not run) take that lock.
-- Key policy: the longest pattern of orbit_key_policy that matches the key, read under the key's
-- lock. Its holder_limit is kept on the key's row (for the placement; a grant reads the policy
-- again). Its on_busy applies to a submitted task (a plan's task follows its plan's on_busy):
-- 'reject': when as many hold the key as its limit allows or any task of it waits (lanes ready,
-- blocked, scheduled; any queue), nothing is written and o_refusal is KEY_BUSY. 'replace_waiting': every WAITING task of the key in this
-- queue is replaced as above (SKIP LOCKED: one a grant is taking is no longer waiting); the new
-- task takes the first one's charge and each other gives its charge back at once.
-- 'cancel_running': as 'replace_waiting', and first, when as many hold the key as its limit
-- allows, the key's oldest holder (the lowest attempt id), LEASED or RUNNING, is ended CANCELLED (orbit_attempt_end, its charges given back): the new task is the key's next in its
-- queue, with a larger token, and o_cancelled names the attempt so the caller can tell its
-- worker (task.cancel).
-- Parameters: p_application_id, p_namespace_id, p_queue_id (the queue's tenancy, already
--   authorised); the validated definition (see orbit_task_validate); p_run_at (the effective
--   time it may first be claimed, m::task_run_at; a debounced task's is computed here);
--   p_debounce_seconds, p_debounce_max_seconds (0 = none); p_idempotency_key ('' for a
--   plan-fired task); p_plan_id, p_plan_version (0 for a submitted task); p_now; p_charge (1 =
--   charge the incomplete-task quota here, 0 = the caller does).
-- Out: o_task_id (0 = refused); o_replaced (the task it replaced first, whose charge it took:
--   the caller charges nothing for it; 0 = none); o_refusal ('' = accepted, QUOTA_EXCEEDED,
--   KEY_BUSY); o_cancelled (the holder's attempt a cancel_running policy ended; 0 = none).
-- Result: none. Signals: none.
-- Locks, in order: orbit_resource row (keyed; insert or FOR UPDATE), the orbit_key_slot row of a
--   cancelled holder (via orbit_attempt_end), the orbit_application_quota
--   slot rows of a cancelled holder and of the further tasks a policy replaces, then as
--   orbit_task_charge (p_charge = 1). Not waits: the new orbit_task row, the tasks it replaces
--   and a cancelled holder's task (read FOR UPDATE SKIP LOCKED), and the holder's orbit_attempt
--   rows (FOR UPDATE SKIP LOCKED). In a batch (orbit_task_submit_many) those give-backs come before the
--   next task's resource row: such a batch can deadlock with a grant, and is retried whole.
DROP PROCEDURE IF EXISTS orbit_task_create;
DELIMITER $$
CREATE PROCEDURE orbit_task_create(
  IN p_application_id BIGINT UNSIGNED,
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT,
  IN p_run_at DATETIME(6),
  IN p_debounce_seconds BIGINT,
  IN p_debounce_max_seconds BIGINT,
  IN p_idempotency_key BLOB,
  IN p_plan_id BIGINT UNSIGNED,
  IN p_plan_version INT UNSIGNED,
  IN p_now DATETIME(6),
  IN p_charge TINYINT,
  OUT o_task_id BIGINT UNSIGNED,
  OUT o_replaced BIGINT UNSIGNED,
  OUT o_refusal VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  OUT o_cancelled BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_holder BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_holders SMALLINT UNSIGNED DEFAULT 0;
  DECLARE v_row_limit SMALLINT UNSIGNED DEFAULT 1;
  DECLARE v_limit SMALLINT UNSIGNED DEFAULT 1;
  DECLARE v_policy_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT 'queue';
  DECLARE v_on_busy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT 'queue';
  DECLARE v_busy TINYINT DEFAULT 0;
  DECLARE v_slot TINYINT UNSIGNED DEFAULT (CONNECTION_ID() % 16);
  DECLARE v_charged TINYINT DEFAULT 0;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_run_at DATETIME(6) DEFAULT COALESCE(p_run_at, p_now);
  DECLARE v_debounce_until DATETIME(6) DEFAULT NULL;
  DECLARE v_replaced BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_replaced_slot TINYINT UNSIGNED;
  DECLARE v_other BIGINT UNSIGNED;
  DECLARE v_holder_task BIGINT UNSIGNED;
  -- How many attempts orbit_attempt_end ended (the holder a cancel_running policy ends: 1).
  DECLARE v_ended INT;
  DECLARE v_done TINYINT DEFAULT 0;
  -- The key's waiting tasks in this queue (every lane they wait in), oldest first: what a
  -- replace_waiting or cancel_running policy replaces. Read and locked when opened, before the new
  -- task exists, in one scan of ix_task_key and one sort (SKIP LOCKED: task rows come after the
  -- resource row in the lock order), so replacing N tasks reads each entry once.
  DECLARE c_waiting CURSOR FOR
    SELECT t.id, t.quota_slot
      FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane IN ('ready', 'blocked', 'scheduled') AND t.queue_id = p_queue_id
       AND t.state = 'WAITING'
     ORDER BY t.id
       FOR UPDATE SKIP LOCKED;
  SET o_task_id = 0, o_replaced = 0, o_refusal = '', o_cancelled = 0;
  IF p_concurrency_key <> '' THEN
    -- The key's row, locked where it exists (most submits find it). Otherwise insert-or-lock in
    -- one statement (a concurrent submit may insert it first): ON DUPLICATE KEY UPDATE takes the
    -- row's exclusive lock directly, avoiding the shared-then-exclusive upgrade that deadlocks
    -- concurrent submitters; then the same locked read.
    SELECT r.id, r.holder_attempt_id, r.holders, r.holder_limit INTO v_resource_id, v_holder, v_holders, v_row_limit
      FROM orbit_resource r
     WHERE r.namespace_id = p_namespace_id AND r.concurrency_key = p_concurrency_key
       FOR UPDATE;
    IF v_resource_id = 0 THEN
      INSERT INTO orbit_resource (namespace_id, concurrency_key, highest_token, version, created_at, updated_at)
      VALUES (p_namespace_id, p_concurrency_key, 0, 0, p_now, p_now)
      ON DUPLICATE KEY UPDATE version = version;
      SELECT r.id, r.holder_attempt_id, r.holders, r.holder_limit INTO v_resource_id, v_holder, v_holders, v_row_limit
      FROM orbit_resource r
     WHERE r.namespace_id = p_namespace_id AND r.concurrency_key = p_concurrency_key
       FOR UPDATE;
    END IF;
    -- The key's policy: the longest pattern that matches it (orbit_key_policy), at most
    -- 1000 index entries of the namespace. Its limit is kept on the key's row
    -- for the placement below; its on_busy applies to a submitted task (a plan's follows the plan).
    SELECT p.on_busy, p.holder_limit INTO v_policy_on_busy, v_limit
      FROM orbit_key_policy p
       WHERE p.namespace_id = p_namespace_id
         AND ((p.match_kind = 'exact' AND p.key_pattern = p_concurrency_key)
              OR (p.match_kind = 'prefix' AND p.key_pattern = LEFT(p_concurrency_key, LENGTH(p.key_pattern))))
       ORDER BY LENGTH(p.key_pattern) DESC, p.match_kind = 'exact' DESC
       LIMIT 1;
    IF p_plan_id = 0 THEN
      SET v_on_busy = v_policy_on_busy;
    END IF;
    IF v_limit <> v_row_limit THEN
      UPDATE orbit_resource r SET r.holder_limit = v_limit WHERE r.id = v_resource_id;
    END IF;
    IF v_on_busy = 'reject' THEN
      -- Busy: as many hold the key as its limit allows, or any task of the key waits (ready,
      -- blocked, or scheduled for later), in any queue. A plain read, exact under the resource
      -- row lock.
      SELECT v_holders >= v_limit
             OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                         WHERE h.resource_id = v_resource_id AND h.lane IN ('ready', 'blocked', 'scheduled'))
        INTO v_busy;
      IF v_busy THEN
        SET o_refusal = 'KEY_BUSY';
        LEAVE body;
      END IF;
    END IF;
    IF v_on_busy = 'cancel_running' AND v_holders >= v_limit THEN
      -- The key's oldest holder (the lowest attempt id: slot 0's, or a slot row's; plain reads,
      -- exact under the resource row lock).
      SELECT MIN(h.attempt_id) INTO v_holder
    FROM (SELECT r.holder_attempt_id AS attempt_id FROM orbit_resource r
           WHERE r.id = v_resource_id AND r.holder_attempt_id <> 0
          UNION ALL
          SELECT s.attempt_id FROM orbit_key_slot s
           WHERE s.resource_id = v_resource_id AND s.attempt_id <> 0) h;
      -- Its attempt and task, FOR UPDATE SKIP LOCKED (task rows come before resource
      -- rows in the lock order, so this must not wait). Locked means a result, a start, a
      -- renewal, a cancel or recovery is changing the holder right now: the call is answered as
      -- a deadlock victim is (error 1213), rolled back whole and retried by the caller.
      SET v_holder_task = NULL;
      SELECT a.task_id INTO v_holder_task
        FROM orbit_attempt a
       WHERE a.id = v_holder AND a.state IN ('LEASED', 'RUNNING')
         FOR UPDATE SKIP LOCKED;
      IF v_holder_task IS NOT NULL THEN
        SELECT t.id INTO v_holder_task FROM orbit_task t WHERE t.id = v_holder_task FOR UPDATE SKIP LOCKED;
      END IF;
      IF v_holder_task IS NULL THEN
        SIGNAL SQLSTATE '40001'
          SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'the key holder is changing; try the submit again';
      END IF;
      -- Ended CANCELLED at once: its permits are released (the key's next grant has a larger
      -- token, so the old holder's writes are fenced), its late result is refused, and its
      -- charges are given back.
      CALL orbit_attempt_end(0 /* p_session_id */, JSON_ARRAY(JSON_OBJECT('attempt_id', v_holder, 'outcome', 'cancelled')) /* p_results */,
                             p_now, 0 /* p_hand_off */, v_ended);
      INSERT INTO orbit_task_event (task_id, attempt_id, event, from_state, to_state, concurrency_token, detail, created_at)
    SELECT a.task_id, a.id, CONCAT('attempt_', a.outcome), IF(a.started_at IS NULL, 'LEASED', 'RUNNING'), t.state,
           a.concurrency_token, CONCAT('attempt ', a.state, '; permits released'), p_now
      FROM (SELECT v_holder AS id) e
      STRAIGHT_JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = e.id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id
     ORDER BY a.id;
      UPDATE (SELECT a.quota_slot AS slot, COUNT(*) AS active,
                 CAST(SUM(t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) AS SIGNED) AS incomplete
            FROM (SELECT x.quota_slot, x.task_id FROM orbit_attempt x WHERE x.id = v_holder) a
            JOIN orbit_task t ON t.id = a.task_id
           GROUP BY a.quota_slot) g
    STRAIGHT_JOIN orbit_application_quota q ON q.application_id = p_application_id AND q.slot = g.slot
     SET q.active_attempts = q.active_attempts - g.active,
         q.incomplete_tasks = q.incomplete_tasks - g.incomplete,
         q.updated_at = p_now;
      SET o_cancelled = v_holder;
    END IF;
  END IF;
  IF p_debounce_seconds > 0 AND v_resource_id <> 0 THEN
    -- The acceptance time of a debounced task is read under its key's lock: a waiting task this
    -- call skips (locked) is being promoted, so it was due before now, and no two debounced
    -- tasks that run have overlapping windows (created_at to run_at).
    SET p_now = GREATEST(p_now, UTC_TIMESTAMP(6));
    SELECT t.id, t.quota_slot, t.debounce_until INTO v_replaced, v_replaced_slot, v_debounce_until
      FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = v_resource_id AND t.lane = 'scheduled' AND t.queue_id = p_queue_id
       AND t.state = 'WAITING' AND t.debounce_seconds > 0 AND t.run_at > p_now
     ORDER BY t.id DESC
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    IF v_replaced IS NULL THEN
      SET v_debounce_until = IF(p_debounce_max_seconds > 0, DATE_ADD(p_now, INTERVAL p_debounce_max_seconds SECOND), NULL);
    END IF;
    SET v_run_at = DATE_ADD(p_now, INTERVAL p_debounce_seconds SECOND);
    IF v_debounce_until < v_run_at THEN
      SET v_run_at = v_debounce_until;
    END IF;
  END IF;
  IF v_on_busy IN ('replace_waiting', 'cancel_running') THEN
    -- The oldest waiting task, unless a debounce chose the task to replace: the new task takes
    -- its quota charge. The others are replaced after the insert.
    OPEN c_waiting;
    IF v_replaced IS NULL THEN
      fetch_oldest: BEGIN
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        FETCH c_waiting INTO v_replaced, v_replaced_slot;
      END fetch_oldest;
    END IF;
  END IF;
  IF v_replaced IS NOT NULL THEN
    -- The new task takes the replaced one's quota charge.
    SET v_slot = v_replaced_slot;
  END IF;
  -- Its lane, as orbit_task_place decides it, written by the insert: a keyed task due now from
  -- its key's row (a plain read, exact under the row's lock), unless tasks of its key are
  -- replaced. Those leave their lanes after the insert, so the new task waits in lane 'none' (where
  -- the replacement, which looks for waiting tasks in every other lane, cannot take it for one
  -- of them) and is placed after them (orbit_task_place).
  IF v_resource_id = 0 THEN
    SET v_lane = IF(v_run_at > p_now, 'scheduled', 'ready');
  ELSEIF v_replaced IS NOT NULL OR v_on_busy IN ('replace_waiting', 'cancel_running') THEN
    SET v_lane = 'none';
  ELSEIF v_run_at > p_now THEN
    SET v_lane = 'scheduled';
  ELSE
    SELECT IF((r.holders >= r.holder_limit OR COALESCE(r.rate_wake_at > p_now, 0))
              OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                          WHERE h.resource_id = r.id AND h.lane = 'ready' AND h.queue_id = p_queue_id),
              'blocked', 'ready')
      INTO v_lane
      FROM orbit_resource r
     WHERE r.id = v_resource_id;
  END IF;
  INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                          payload, business_key, concurrency_key, resource_id, state, lane, priority,
                          max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
                          deadline_at, idempotency_key, plan_id, plan_version, quota_slot, created_at, updated_at,
                          debounce_seconds, debounce_until)
  VALUES (p_application_id, p_namespace_id, p_queue_id, p_handler, p_handler_version, p_payload_version,
          p_payload, p_business_key, p_concurrency_key, v_resource_id, 'WAITING', v_lane, p_priority,
          p_max_attempts, 0, p_retry_base_ms, p_retry_max_ms, p_retry_unknown, v_run_at,
          IF(p_deadline_seconds > 0, DATE_ADD(p_now, INTERVAL p_deadline_seconds SECOND), NULL),
          p_idempotency_key, p_plan_id, p_plan_version, v_slot, p_now, p_now,
          IF(v_resource_id <> 0, p_debounce_seconds, 0), IF(p_debounce_seconds > 0, v_debounce_until, NULL));
  SET o_task_id = LAST_INSERT_ID();
  IF v_replaced IS NOT NULL THEN
    UPDATE orbit_task t
       SET t.state = 'CANCELLED', t.lane = 'none', t.finished_at = p_now, t.updated_at = p_now,
           t.error = JSON_OBJECT('code', 'REPLACED', 'message', CONCAT('replaced by task ', o_task_id),
                                 'replaced_by', CAST(o_task_id AS UNSIGNED))
     WHERE t.id = v_replaced;
    INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
    VALUES (v_replaced, 'replaced', 'WAITING', 'CANCELLED', CONCAT('replaced by task ', o_task_id), p_now);
    SET o_replaced = v_replaced;
  END IF;
  IF v_on_busy IN ('replace_waiting', 'cancel_running') THEN
    -- Every other waiting task of the key in this queue (the debounced one a debounce replaced
    -- above is among them); each gives its charge back (the one quota row write this call makes
    -- before its caller's later locks: see the header).
    each_waiting: LOOP
      fetch_other: BEGIN
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        FETCH c_waiting INTO v_other, v_replaced_slot;
      END fetch_other;
      IF v_done THEN
        LEAVE each_waiting;
      END IF;
      IF v_other = v_replaced THEN
        ITERATE each_waiting;
      END IF;
      UPDATE orbit_task t
       SET t.state = 'CANCELLED', t.lane = 'none', t.finished_at = p_now, t.updated_at = p_now,
           t.error = JSON_OBJECT('code', 'REPLACED', 'message', CONCAT('replaced by task ', o_task_id),
                                 'replaced_by', CAST(o_task_id AS UNSIGNED))
     WHERE t.id = v_other;
    INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
    VALUES (v_other, 'replaced', 'WAITING', 'CANCELLED', CONCAT('replaced by task ', o_task_id), p_now);
      UPDATE orbit_application_quota q
         SET q.incomplete_tasks = q.incomplete_tasks - 1, q.updated_at = p_now
       WHERE q.application_id = p_application_id AND q.slot = v_replaced_slot;
    END LOOP each_waiting;
    CLOSE c_waiting;
  END IF;
  IF v_lane = 'none' THEN
    CALL orbit_task_place(o_task_id, p_now, v_state, v_lane);
  END IF;
  IF v_replaced IS NULL AND p_charge THEN
    CALL orbit_task_charge(p_application_id, p_now, v_charged);
    IF NOT v_charged THEN
      SET o_task_id = 0, o_refusal = 'QUOTA_EXCEEDED';
    END IF;
  END IF;
END$$
DELIMITER ;

-- ---- orbit_task_create_keyed_many (from templates/procedures/orbit_task_create_keyed_many.sql) ----
-- orbit_task_create_keyed_many: Internal: create a keyed batch's tasks whole, each as orbit_task_create would, in the caller's transaction.
--
-- orbit_task_submit_many's keyed batch on one queue whose namespace has no key policy, without
-- debounce: what orbit_task_create does for each task (every key of one holder, its tasks
-- queued) is done for the whole batch, set-based. The keys' rows are locked by one statement, in
-- key order; a key with no row yet gets one (holder limit 1), and a key's row that keeps the
-- limit of a policy that is gone is set back to 1. One plain read, exact under those locks,
-- finds the tasks that go to the ready lane: each free key's first task due now, as
-- m::keyed_lane decides it. One insert writes the tasks with the row macros orbit_task_create
-- uses (m::task_insert_values): ready, blocked behind their key, or scheduled until their run_at;
-- a task without a key is ready. The caller then writes the receipts, naming the new tasks
-- (ids from o_first on, in input order), and charges the quota.
-- Parameters: p_tasks (orbit_task_submit_many's, checked there); p_application_id;
--   p_namespace_id and p_queue_id (the batch's one queue); p_slot (the connection's quota slot,
--   recorded on each task); p_now.
-- Out: o_first, the id of the batch's first task (the others follow it in input order).
-- Result: none. Signals: none.
-- Session state: raises the connection's group_concat_max_len to 1 MB when it is lower (MySQL's
--   default is 1,024 bytes), for its list of ready tasks.
-- Locks, in order: the orbit_resource rows of the batch's keys, in key order (one locking read;
--   a missing one is locked by its insert, or by its ON DUPLICATE KEY UPDATE when a concurrent
--   submit inserted it first). Not waits: the new orbit_task rows.
DROP PROCEDURE IF EXISTS orbit_task_create_keyed_many;
DELIMITER $$
CREATE PROCEDURE orbit_task_create_keyed_many(
  IN p_tasks MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_application_id BIGINT UNSIGNED,
  IN p_namespace_id BIGINT UNSIGNED,
  IN p_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
  IN p_slot TINYINT UNSIGNED,
  IN p_now DATETIME(6),
  OUT o_first BIGINT UNSIGNED)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_count INT DEFAULT JSON_LENGTH(p_tasks);
  -- How many distinct keys the batch names, how many have a row, and how many of those keep
  -- another limit than 1.
  DECLARE v_keys INT;
  DECLARE v_key_rows INT;
  DECLARE v_stale_limits INT;
  DECLARE v_concurrency_key BLOB;
  -- The items of the keyed tasks that go to the ready lane (a comma-separated list).
  DECLARE v_ready_items MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin;
  -- The keys that have no row yet (a plain read).
  DECLARE c_new_keys CURSOR FOR
    SELECT k.concurrency_key
      FROM (SELECT DISTINCT CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192), IF(j.j_concurrency_key IS NULL, '', NULL)) AS BINARY) AS concurrency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (j_concurrency_key JSON PATH '$.concurrency_key',
              s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key')) j
      WHERE JSON_TYPE(j.j_concurrency_key) = 'STRING' AND j.s_concurrency_key <> ''
      ORDER BY 1
      LIMIT 1000) k
      LEFT JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = k.concurrency_key
     WHERE r.id IS NULL;
  -- The keys' rows, locked in key order; then the missing ones inserted, each locked by its
  -- insert (a concurrent submit may insert one first: ON DUPLICATE KEY UPDATE then takes its
  -- lock), with the holder limit 1.
  SELECT COUNT(*), COUNT(r.id), COALESCE(SUM(r.holder_limit <> 1), 0) INTO v_keys, v_key_rows, v_stale_limits
    FROM (SELECT DISTINCT CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192), IF(j.j_concurrency_key IS NULL, '', NULL)) AS BINARY) AS concurrency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (j_concurrency_key JSON PATH '$.concurrency_key',
              s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key')) j
      WHERE JSON_TYPE(j.j_concurrency_key) = 'STRING' AND j.s_concurrency_key <> ''
      ORDER BY 1
      LIMIT 1000) k
    LEFT JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = k.concurrency_key
     FOR UPDATE;
  IF v_key_rows < v_keys THEN
    -- One insert a key, as orbit_task_create inserts it: an INSERT ... SELECT would hold
    -- orbit_resource's AUTO-INC lock while it waits for a key's row another batch holds, and
    -- that batch, inserting its own new keys, would wait for the AUTO-INC lock (a deadlock
    -- that MariaDB reports as error 1467, not 1213).
    OPEN c_new_keys;
    new_keys: LOOP
      SET v_concurrency_key = NULL;
      fetch_key: BEGIN
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_concurrency_key = NULL;
        FETCH c_new_keys INTO v_concurrency_key;
      END fetch_key;
      IF v_concurrency_key IS NULL THEN
        LEAVE new_keys;
      END IF;
      INSERT INTO orbit_resource (namespace_id, concurrency_key, highest_token, version, created_at, updated_at)
      VALUES (p_namespace_id, v_concurrency_key, 0, 0, p_now, p_now)
      ON DUPLICATE KEY UPDATE version = version;
    END LOOP new_keys;
    CLOSE c_new_keys;
  END IF;
  -- No policy: every key has one holder (a key's row keeps the limit of the policy it last
  -- read, which may be gone).
  IF v_stale_limits > 0 THEN
    UPDATE orbit_resource r
       SET r.holder_limit = 1
     WHERE r.namespace_id = p_namespace_id AND r.holder_limit <> 1
       AND r.concurrency_key IN (SELECT k.concurrency_key FROM (SELECT DISTINCT CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192), IF(j.j_concurrency_key IS NULL, '', NULL)) AS BINARY) AS concurrency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (j_concurrency_key JSON PATH '$.concurrency_key',
              s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key')) j
      WHERE JSON_TYPE(j.j_concurrency_key) = 'STRING' AND j.s_concurrency_key <> ''
      ORDER BY 1
      LIMIT 1000) k);
  END IF;
  -- The tasks that go to the ready lane: each key's first task due now, when the key has
  -- room and no ready task in the queue yet (m::keyed_lane; plain reads, exact under the
  -- rows' locks), as a list of items: the insert below then reads no orbit_task row (which
  -- would make it buffer its rows first) and joins no grouped table. The key's other tasks
  -- go to the blocked lane.
  IF @@SESSION.group_concat_max_len < 1048576 THEN
    SET SESSION group_concat_max_len = 1048576;
  END IF;
  SELECT GROUP_CONCAT(f.first_item) INTO v_ready_items
    FROM (SELECT t.concurrency_key, MIN(t.item) AS first_item
            FROM (SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          IF(JSON_TYPE(j.j_idempotency_key) = 'STRING', LEFT(CAST(j.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          IF(JSON_TYPE(j.j_handler) = 'STRING', LEFT(j.s_handler, 192), IF(j.j_handler IS NULL, NULL, NULL)) AS handler,
          IF(JSON_TYPE(j.j_handler_version) = 'STRING', LEFT(j.s_handler_version, 65), IF(j.j_handler_version IS NULL, NULL, NULL)) AS handler_version,
          IF(JSON_TYPE(j.j_payload_version) = 'STRING', LEFT(j.s_payload_version, 65), IF(j.j_payload_version IS NULL, NULL, NULL)) AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE(IF(JSON_TYPE(j.j_business_key) = 'STRING', LEFT(j.s_business_key, 192), IF(j.j_business_key IS NULL, NULL, NULL)), '') AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE(CASE WHEN j.j_priority REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_priority AS SIGNED)
                                    WHEN j.j_priority REGEXP '^-?[0-9]+$' THEN -1 END, 5) AS priority,
          COALESCE(CASE WHEN j.j_max_attempts REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_max_attempts AS SIGNED)
                                    WHEN j.j_max_attempts REGEXP '^-?[0-9]+$' THEN -1 END, 3) AS max_attempts,
          COALESCE(CASE WHEN j.j_retry_base_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_base_ms AS SIGNED)
                                    WHEN j.j_retry_base_ms REGEXP '^-?[0-9]+$' THEN -1 END, 1000) AS retry_base_ms,
          COALESCE(CASE WHEN j.j_retry_max_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_max_ms AS SIGNED)
                                    WHEN j.j_retry_max_ms REGEXP '^-?[0-9]+$' THEN -1 END, 300000) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   0) AS retry_unknown,
          COALESCE(CASE WHEN j.j_deadline_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_deadline_seconds AS SIGNED)
                                    WHEN j.j_deadline_seconds REGEXP '^-?[0-9]+$' THEN -1 END, 0) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          CASE WHEN j.j_delay_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_delay_seconds AS SIGNED)
                                    WHEN j.j_delay_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS delay_seconds,
          CASE WHEN j.j_debounce_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_seconds AS SIGNED)
                                    WHEN j.j_debounce_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_seconds,
          CASE WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_max_seconds AS SIGNED)
                                    WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key', s_queue_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.queue_id',
            s_handler LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler', s_handler_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler_version',
            s_payload_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload_version', s_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
            s_business_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.business_key', s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key',
            s_run_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.run_at',
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t
           WHERE t.concurrency_key <> '' AND CASE WHEN t.run_at IS NOT NULL THEN GREATEST(t.run_at, p_now)
            WHEN t.delay_seconds > 0 THEN DATE_ADD(p_now, INTERVAL t.delay_seconds SECOND)
            ELSE p_now END <= p_now
           GROUP BY t.concurrency_key) f
    STRAIGHT_JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = f.concurrency_key
   WHERE IF((r.holders >= r.holder_limit OR COALESCE(r.rate_wake_at > p_now, 0))
              OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                          WHERE h.resource_id = r.id AND h.lane = 'ready' AND h.queue_id = p_queue_id),
              'blocked', 'ready') = 'ready';
  INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                          payload, business_key, concurrency_key, resource_id, state, lane, priority,
                          max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
                          deadline_at, idempotency_key, plan_id, plan_version, quota_slot, created_at, updated_at,
                          debounce_seconds, debounce_until)
  SELECT p_application_id, q.namespace_id, q.id, t.handler, t.handler_version, t.payload_version,
         t.payload, t.business_key, t.concurrency_key, COALESCE(r.id, 0), 'WAITING', CASE WHEN t.effective_run_at > p_now THEN 'scheduled' WHEN r.id IS NULL OR FIND_IN_SET(t.item, v_ready_items) THEN 'ready' ELSE 'blocked' END, t.priority,
         t.max_attempts, 0, t.retry_base_ms, t.retry_max_ms, t.retry_unknown, t.effective_run_at,
         IF(t.deadline_seconds > 0, DATE_ADD(p_now, INTERVAL t.deadline_seconds SECOND), NULL),
         t.idempotency_key, 0, 0, p_slot, p_now, p_now,
         0, NULL
    FROM (SELECT t.*, CASE WHEN t.run_at IS NOT NULL THEN GREATEST(t.run_at, p_now)
            WHEN t.delay_seconds > 0 THEN DATE_ADD(p_now, INTERVAL t.delay_seconds SECOND)
            ELSE p_now END AS effective_run_at FROM (SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          IF(JSON_TYPE(j.j_idempotency_key) = 'STRING', LEFT(CAST(j.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          IF(JSON_TYPE(j.j_handler) = 'STRING', LEFT(j.s_handler, 192), IF(j.j_handler IS NULL, NULL, NULL)) AS handler,
          IF(JSON_TYPE(j.j_handler_version) = 'STRING', LEFT(j.s_handler_version, 65), IF(j.j_handler_version IS NULL, NULL, NULL)) AS handler_version,
          IF(JSON_TYPE(j.j_payload_version) = 'STRING', LEFT(j.s_payload_version, 65), IF(j.j_payload_version IS NULL, NULL, NULL)) AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE(IF(JSON_TYPE(j.j_business_key) = 'STRING', LEFT(j.s_business_key, 192), IF(j.j_business_key IS NULL, NULL, NULL)), '') AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE(CASE WHEN j.j_priority REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_priority AS SIGNED)
                                    WHEN j.j_priority REGEXP '^-?[0-9]+$' THEN -1 END, 5) AS priority,
          COALESCE(CASE WHEN j.j_max_attempts REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_max_attempts AS SIGNED)
                                    WHEN j.j_max_attempts REGEXP '^-?[0-9]+$' THEN -1 END, 3) AS max_attempts,
          COALESCE(CASE WHEN j.j_retry_base_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_base_ms AS SIGNED)
                                    WHEN j.j_retry_base_ms REGEXP '^-?[0-9]+$' THEN -1 END, 1000) AS retry_base_ms,
          COALESCE(CASE WHEN j.j_retry_max_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_max_ms AS SIGNED)
                                    WHEN j.j_retry_max_ms REGEXP '^-?[0-9]+$' THEN -1 END, 300000) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   0) AS retry_unknown,
          COALESCE(CASE WHEN j.j_deadline_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_deadline_seconds AS SIGNED)
                                    WHEN j.j_deadline_seconds REGEXP '^-?[0-9]+$' THEN -1 END, 0) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          CASE WHEN j.j_delay_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_delay_seconds AS SIGNED)
                                    WHEN j.j_delay_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS delay_seconds,
          CASE WHEN j.j_debounce_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_seconds AS SIGNED)
                                    WHEN j.j_debounce_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_seconds,
          CASE WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_max_seconds AS SIGNED)
                                    WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key', s_queue_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.queue_id',
            s_handler LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler', s_handler_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler_version',
            s_payload_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload_version', s_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
            s_business_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.business_key', s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key',
            s_run_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.run_at',
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t) t
    JOIN orbit_queue q ON q.id = t.queue_id
    LEFT JOIN orbit_resource r ON r.namespace_id = p_namespace_id AND r.concurrency_key = t.concurrency_key
                              AND t.concurrency_key <> ''
   ORDER BY t.item;
  SET o_first = LAST_INSERT_ID();
END$$
DELIMITER ;

-- ---- orbit_task_event_list (from templates/procedures/orbit_task_event_list.sql) ----
-- orbit_task_event_list: List a task's history events (orbit_task_event), oldest first.
--
-- History only. The events record the changes the task row and its attempts do not keep on their
-- own: attempt ends (released, with the outcome and token), cancel, resolve, expiry, retries.
-- Grants and starts are on the attempt rows (granted_at, started_at), the acceptance is the
-- task's created_at: a timeline reads all three. A task outside the credential's reach is
-- NOT_FOUND. Reads ix_task_event_task in order from p_after_id: a page costs p_limit rows.
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the task's queue); p_task_id;
--   p_limit 1-1000; p_after_id (NULL or 0 = from the first event).
-- Result (0..p_limit rows, event id order): event_id, attempt_id (0 = none), event, from_state,
--   to_state, concurrency_token (0 = none), detail, created_at (UTC).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope missing), NOT_FOUND (no such task, or out of
--   reach), INVALID_ARGUMENT (p_limit).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_task_event_list;
DELIMITER $$
CREATE PROCEDURE orbit_task_event_list(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED, IN p_limit BIGINT,
                                       IN p_after_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: task not found';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;
  SELECT e.id AS event_id, e.attempt_id, e.event, e.from_state, e.to_state, e.concurrency_token, e.detail,
         e.created_at
    FROM orbit_task_event e
   WHERE e.task_id = p_task_id AND e.id > COALESCE(p_after_id, 0)
   ORDER BY e.id
   LIMIT p_limit;
END$$
DELIMITER ;

-- ---- orbit_task_expire_due (from templates/procedures/orbit_task_expire_due.sql) ----
-- orbit_task_expire_due: Expire waiting tasks whose total deadline has passed.
--
-- WAITING and RETRY_WAIT tasks (lanes ready, blocked, scheduled) past deadline_at become EXPIRED.
-- A ready keyed task hands its queue's slot of the key to the next blocked task. Tasks already
-- LEASED or RUNNING finish by their lease or result. One short transaction per task.
-- Parameters: p_limit 1-10000.
-- Result (one row): expired INT, next_deadline_at DATETIME(6) (earliest deadline of a waiting task,
--   NULL when none).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per task in order: orbit_task row, orbit_resource row (ready keyed task), promoted task
--   rows (SKIP LOCKED), the orbit_application_quota slot row the task charged (orbit_task.quota_slot).
DROP PROCEDURE IF EXISTS orbit_task_expire_due;
DELIMITER $$
CREATE PROCEDURE orbit_task_expire_due(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_deadline DATETIME(6);
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_slot TINYINT UNSIGNED;
  DECLARE v_expired INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  due: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_task_id = NULL;
    -- The earliest due task of each lane, then the earliest of the three.
    SELECT d.id INTO v_task_id
      FROM (
                  (SELECT t.id, t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'ready' AND t.deadline_at <= v_now ORDER BY t.deadline_at LIMIT 1)
                  UNION ALL
                  (SELECT t.id, t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'blocked' AND t.deadline_at <= v_now ORDER BY t.deadline_at LIMIT 1)
                  UNION ALL
                  (SELECT t.id, t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'scheduled' AND t.deadline_at <= v_now ORDER BY t.deadline_at LIMIT 1)) d
     ORDER BY d.deadline_at
     LIMIT 1;
    IF v_task_id IS NULL THEN
      LEAVE due;
    END IF;
    SET v_seen = v_seen + 1;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
    SELECT t.lane, t.state, t.deadline_at, t.resource_id, t.queue_id, t.application_id, t.quota_slot
      INTO v_lane, v_state, v_deadline, v_resource_id, v_queue_id, v_application_id, v_slot
      FROM orbit_task t
     WHERE t.id = v_task_id
       FOR UPDATE;
    IF v_lane IN ('ready', 'blocked', 'scheduled') AND v_deadline <= v_now THEN
      IF v_resource_id <> 0 AND v_lane = 'ready' THEN
        SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = v_resource_id FOR UPDATE;
      END IF;
      UPDATE orbit_task t
     SET t.state = 'EXPIRED', t.lane = 'none', t.finished_at = v_now, t.updated_at = v_now
   WHERE t.id = v_task_id;
  INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
  VALUES (v_task_id, 'deadline_expired', v_state, 'EXPIRED', 'total deadline passed', v_now);
      IF v_resource_id <> 0 AND v_lane = 'ready' THEN
        CALL orbit_key_promote(v_resource_id, v_queue_id, v_now);
      END IF;
      UPDATE orbit_application_quota q
         SET q.incomplete_tasks = q.incomplete_tasks - 1, q.updated_at = v_now
       WHERE q.application_id = v_application_id AND q.slot = v_slot;
      SET v_expired = v_expired + 1;
    END IF;
    COMMIT;
  END WHILE due;
  SELECT v_expired AS expired,
         (SELECT MIN(d.deadline_at)
            FROM (
                  (SELECT t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'ready' AND t.deadline_at IS NOT NULL ORDER BY t.deadline_at LIMIT 1)
                  UNION ALL
                  (SELECT t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'blocked' AND t.deadline_at IS NOT NULL ORDER BY t.deadline_at LIMIT 1)
                  UNION ALL
                  (SELECT t.deadline_at FROM orbit_task t
                    WHERE t.lane = 'scheduled' AND t.deadline_at IS NOT NULL ORDER BY t.deadline_at LIMIT 1)) d
         ) AS next_deadline_at;
END$$
DELIMITER ;

-- ---- orbit_task_get (from templates/procedures/orbit_task_get.sql) ----
-- orbit_task_get: Read one task, as its credential may see it.
--
-- Parameters: p_token_hash BINARY(32) (scope tasks:read on the task's queue); p_task_id.
-- Result (one row): the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (no such task, or another tenant's).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_task_get;
DELIMITER $$
CREATE PROCEDURE orbit_task_get(IN p_token_hash BINARY(32), IN p_task_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  -- A missing task and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:read', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: task not found';
  END IF;
  SELECT t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at FROM orbit_task t WHERE t.id = p_task_id;
END$$
DELIMITER ;

-- ---- orbit_task_grant (from templates/procedures/orbit_task_grant.sql) ----
-- orbit_task_grant: Internal: grant up to p_max ready tasks to a worker session, in the caller's transaction.
--
-- The claim itself, shared by orbit_task_claim (a claim on its own) and orbit_attempt_finish (the
-- releasing transaction grants the session its next tasks, so a hot key is handed on with the
-- result, in one commit). This procedure decides which tasks the session gets: it checks the
-- session, its credential and the application's quota, visits the session's queues, and locks
-- candidates. orbit_attempt_grant grants each one (its deadline, its key's permit by the key's
-- policy, the attempt); the quota is charged once, for the whole grant, last.
-- A grant in a result's transaction (p_results) first takes the hand-off: the next tasks of the
-- keys those results released, which the releases left in the blocked lane for it
-- (orbit_attempt.handoff_task_id; see c_handoffs for which it may take), so a hot key goes on
-- without its next task being readied and found again in the ready lane. A key's next task thus
-- goes before older ready tasks of its priority. What it leaves, the caller readies.
-- Other candidates come only from the 'ready' lane (ix_task_dispatch), a batch per scan, where a
-- key has at most one task per queue and only while the key has room, so tasks blocked on a busy
-- key are never scanned: claim cost does not grow with them, and a blocked key never hides other
-- keys from the LIMIT. Queues are visited from a position that rotates per claim (fair across queues);
-- priority (0 first), then age, orders each queue. Skipped: paused queues, queues at their permit
-- limit, keyed tasks for a session that did not register concurrency_keys, handlers the session
-- does not run. A candidate that orbit_attempt_grant expires or sends back to the blocked lane
-- takes no room, and the scan goes on past it. Never commits: when nothing was granted, expired
-- or moved back to the blocked lane it rolls back to its own savepoint (the session's claim_seq
-- step included), so the caller's other work is kept.
-- Where a scan from the front starts: for a session that lists its handlers, at the first ready
-- task of one of them (ix_task_handler: one probe per handler, and for a session without
-- concurrency_keys its first unkeyed one), so the ready tasks of other handlers waiting in front
-- of it are never read, and a queue where none waits is not scanned at all. Past that task the
-- scan reads what lies between the session's tasks.
-- Where a scan starts: tasks leave the front of a ready lane, and their index entries stay there,
-- delete-marked, until purge removes them; a locking scan passes over each, and a busy queue
-- has hundreds of them. So with p_hinted, a scan of the queue the session
-- scanned last starts past the last candidate that scan took, within its priority: worse
-- priorities are scanned whole, and a better one found ready makes the scan start at the front.
-- It goes on from the front when it comes up short, and every 16th grant of a session
-- starts at the front: a task readied behind that point (a promoted key's task, a retry, a submit
-- that committed late) is passed over by at most that many of the session's grants, and a scan
-- from the front (a claim) takes it at once (the SPEC promises no FIFO order; priority orders
-- every scan).
-- Parameters: p_session_id; p_max 1-1000 and p_lease_ms 1000-3600000 (checked by the caller);
--   p_now; p_results: the caller's results (orbit_attempt_finish's p_results, checked there),
--   whose attempts ended at p_now hold the hand-off, or NULL (a claim, or no key handed off);
--   p_hinted: 1 = scans may start where the session's last one stopped (see above; a caller
--   that has just readied tasks of its own passes 0); p_credit: active-attempt charges of
--   the session's slot that the caller gives back after this grant (orbit_attempt_finish's
--   results, whose quota work comes last), counted as room; p_every_slot: 1 = charge under a lock
--   on every slot of the application at once (a retry after p_deferred, or a caller that then
--   gives back charges of other slots), 0 = the session's slot alone when its room takes the
--   grant; OUT p_deferred: 1 when the session's slot was tried and refused the charge, which
--   leaves that row locked whenever the update waited for it (InnoDB keeps the lock of a row an
--   update waited for and then did not change, even in READ COMMITTED), so every slot's row
--   cannot be taken after it without risking a deadlock: the grant rolled back to its savepoint
--   and the caller retries in a transaction of its own with p_every_slot = 1; OUT p_seq: the session's claim_seq
--   recorded on the granted attempts (0 = nothing written); OUT p_granted: how many attempts it
--   granted (a p_seq with none: only expiries or demotions were written); OUT p_handoffs: how
--   many of them took a hand-off's task (p_results); OUT p_room: the
--   application's room for more active attempts after the grant, as read at its start less what
--   it granted (NULL: no quota rows); OUT p_queue_limited: 1 when one of the session's queues
--   has a permit limit (as the grant began). orbit_attempt_finish uses both to decide, without a
--   statement of its own, whether its releases may have left work for other sessions. OUT
--   p_attempt_id: the last attempt granted (the only one when p_granted = 1), NULL when none:
--   callers read a grant of one by primary key.
-- Result: none. Signals: NOT_FOUND (no such session). A closed or draining session, or a revoked
--   credential, gets nothing.
-- Locks, in order: orbit_session row; per queue, the orbit_queue row when it has a permit limit;
--   the hand-off's and the candidates' orbit_task rows (FOR UPDATE SKIP LOCKED); then, per
--   candidate, orbit_attempt_grant's: the orbit_resource row of a keyed candidate (a hand-off's,
--   the caller's already), the new orbit_attempt row (its queue permit), the key's orbit_key_slot
--   and orbit_key_rate_log rows; orbit_application_quota slot rows last: the session's slot alone
--   when the grant fits its share and nothing expired, otherwise every slot of the application in
--   ascending slot order (one locking read) and the exact total checked (orbit_attempt_charge).
DROP PROCEDURE IF EXISTS orbit_task_grant;
DELIMITER $$
CREATE PROCEDURE orbit_task_grant(IN p_session_id BIGINT UNSIGNED, IN p_max INT, IN p_lease_ms INT,
                                  IN p_now DATETIME(6), IN p_results MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                  IN p_hinted TINYINT, IN p_credit INT,
                                  IN p_every_slot TINYINT, OUT p_deferred TINYINT, OUT p_seq BIGINT UNSIGNED,
                                  OUT p_granted INT, OUT p_handoffs INT, OUT p_room BIGINT, OUT p_queue_limited TINYINT,
                                  OUT p_attempt_id BIGINT UNSIGNED)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_expires DATETIME(6);
  DECLARE v_application_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_worker_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_keys TINYINT;
  DECLARE v_start TINYINT;
  DECLARE v_handlers TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_any_handler TINYINT;
  DECLARE v_session_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_credential_ok TINYINT DEFAULT 0;
  DECLARE v_seq BIGINT UNSIGNED;
  DECLARE v_queue_count INT DEFAULT 0;
  DECLARE v_budget BIGINT DEFAULT 0;
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_handoffs INT DEFAULT 0;
  DECLARE v_expired INT DEFAULT 0;
  DECLARE v_demoted INT DEFAULT 0;
  DECLARE v_visit INT DEFAULT 0;
  DECLARE v_position INT;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_paused TINYINT;
  -- 1 when the visited queue's namespace has a key policy (its keyed candidates read theirs).
  DECLARE v_policies TINYINT;
  DECLARE v_queue_max INT UNSIGNED;
  DECLARE v_queue_room BIGINT;
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_deadline DATETIME(6);
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_attempt_no INT UNSIGNED;
  -- One candidate's grant (orbit_attempt_grant): the attempt, NULL when none; 1 when it expired.
  DECLARE v_attempt_id BIGINT UNSIGNED;
  DECLARE v_expired_one TINYINT;
  -- The last attempt granted (p_attempt_id).
  DECLARE v_last_attempt_id BIGINT UNSIGNED;
  DECLARE v_slot TINYINT UNSIGNED DEFAULT (p_session_id % 16);
  DECLARE v_charged INT DEFAULT 0;
  DECLARE v_slot_room BIGINT;
  -- Candidates are locked a batch at a time: as many as the room left (v_want), in one scan of
  -- the queue's ready lane; v_fetched counts what the scan found.
  DECLARE v_want BIGINT;
  DECLARE v_fetched INT;
  DECLARE v_any_ready TINYINT;
  -- 1 when one of the session's queues has a permit limit (p_queue_limited).
  DECLARE v_limited TINYINT DEFAULT 1;
  -- Where the session's last scan stopped (orbit_session.scan_*), and where this visit's scan
  -- starts: past (v_from_priority, v_from_task_id); v_from_task_id 0 = from the front.
  DECLARE v_scan_position INT UNSIGNED;
  DECLARE v_scan_priority TINYINT UNSIGNED;
  DECLARE v_scan_task_id BIGINT UNSIGNED;
  DECLARE v_from_priority TINYINT UNSIGNED;
  DECLARE v_from_task_id BIGINT UNSIGNED;
  DECLARE v_priority TINYINT UNSIGNED;
  DECLARE v_hinted TINYINT;
  DECLARE v_better TINYINT;
  -- 1 when the visit's next scan starts at the front (for a session with a handler list: at its
  -- handlers' first ready task, and v_from_head = 1 once it does).
  DECLARE v_front TINYINT DEFAULT 0;
  DECLARE v_from_head TINYINT DEFAULT 0;
  -- 1 once the hand-off readied a task (see there): the scans start at the front.
  DECLARE v_readied TINYINT DEFAULT 0;
  DECLARE v_lock BIGINT UNSIGNED;
  -- A subquery that takes the first entry of an index under an equality on an outer column also
  -- orders by that column: MySQL otherwise reads every entry of the prefix and sorts them. (Not
  -- by a column equal to a constant, such as the lane: MariaDB then reads them all.)
  -- FORCE INDEX, as in every probe of a ready lane: the queue id is a constant when the statement
  -- is planned, and the optimizer otherwise estimates the range in each index that starts with
  -- queue_id or lane (four of them, two B-tree dives each), for this and the visit's probe
  -- below.
  DECLARE c_candidates CURSOR FOR
    SELECT t.id, t.resource_id, t.deadline_at, t.namespace_id, t.attempt_count + 1, t.priority
      FROM orbit_task t FORCE INDEX (ix_task_dispatch)
     WHERE t.queue_id = v_queue_id AND t.lane = 'ready'
       AND (v_from_task_id = 0 OR t.priority > v_from_priority
            OR (t.priority = v_from_priority AND t.id > v_from_task_id))
       AND (v_keys OR t.resource_id = 0)
       AND (v_any_handler OR JSON_CONTAINS(v_handlers, JSON_QUOTE(t.handler)))
     ORDER BY t.priority, t.id
     LIMIT v_want
       FOR UPDATE SKIP LOCKED;
  -- The hand-off (p_results): the keys the caller's results released go to their next tasks,
  -- which the releases left blocked for this grant (orbit_attempt.handoff_task_id), where the
  -- session may take them: in one of its queues, not paused and without a permit limit (whose
  -- room is counted per visit), with no ready task of a better priority there: the ready lane's
  -- head, its best priority, read as one entry (a NOT EXISTS over `b.priority < t.priority` reads
  -- every ready entry of the task's priority and worse, since an outer column bounds no range of
  -- the subquery's index). A plain read (a locking one would lock every row it joins): each task
  -- is locked as it is taken.
  DECLARE c_handoffs CURSOR FOR
    SELECT t.id, t.resource_id, t.deadline_at, t.namespace_id, t.attempt_count + 1, t.queue_id,
           (SELECT 1 FROM orbit_key_policy p WHERE p.namespace_id = t.namespace_id LIMIT 1) IS NOT NULL
      FROM JSON_TABLE(p_results, '$[*]' COLUMNS (attempt_id BIGINT UNSIGNED PATH '$.attempt_id')) r
      STRAIGHT_JOIN orbit_attempt x FORCE INDEX (PRIMARY) ON x.id = r.attempt_id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = x.handoff_task_id
      STRAIGHT_JOIN orbit_session_queue sq FORCE INDEX (PRIMARY) ON sq.session_id = p_session_id AND sq.queue_id = t.queue_id
      STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = t.queue_id
     WHERE x.session_id = p_session_id AND x.released_at = p_now AND x.handoff_task_id <> 0
       AND t.lane = 'blocked' AND t.blocked_reason = ''
       AND (v_any_handler OR JSON_CONTAINS(v_handlers, JSON_QUOTE(t.handler)))
       AND NOT q.paused AND q.max_active_attempts = 0
       AND COALESCE((SELECT b.priority FROM orbit_task b FORCE INDEX (ix_task_dispatch)
                      WHERE b.queue_id = t.queue_id AND b.lane = 'ready'
                      ORDER BY b.queue_id, b.priority
                      LIMIT 1) >= t.priority, 1)
     ORDER BY t.priority, t.id
     LIMIT v_budget;

  SET p_deferred = 0, p_seq = 0, p_granted = 0, p_handoffs = 0, p_room = NULL, p_queue_limited = 1, p_attempt_id = NULL;
  SET v_expires = DATE_ADD(p_now, INTERVAL p_lease_ms * 1000 MICROSECOND);
  SAVEPOINT orbit_task_grant;
  SELECT s.application_id, s.credential_id, s.worker_id, s.concurrency_keys, s.start_on_assign, s.handlers,
         s.state, s.claim_seq + 1, s.scan_position, s.scan_priority, s.scan_task_id
    INTO v_application_id, v_credential_id, v_worker_id, v_keys, v_start, v_handlers, v_session_state, v_seq,
         v_scan_position, v_scan_priority, v_scan_task_id
    FROM orbit_session s
   WHERE s.id = p_session_id
     FOR UPDATE;
  IF v_application_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: session not found';
  END IF;
  -- Plain reads from here on unless a lock is named: a subquery inside a locking statement, SET or
  -- IF is a locking read, and every session of a fleet shares its credential and quota rows.
  -- The credential, the quota's room, the session's slot's room (-1: it takes no charge on its
  -- own), the session's queue count and whether one of them has a permit limit: one statement.
  SELECT (SELECT COUNT(*) FROM orbit_credential c WHERE c.id = v_credential_id AND c.revoked_at IS NULL),
         (SELECT CAST(MIN(q.max_active_attempts) AS SIGNED) - CAST(SUM(q.active_attempts) AS SIGNED)
            FROM orbit_application_quota q WHERE q.application_id = v_application_id),
         (SELECT IF(q.checked_max_active_attempts = q.max_active_attempts,
                    CAST((q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16)) AS SIGNED) - CAST(q.active_attempts AS SIGNED), -1)
            FROM orbit_application_quota q WHERE q.application_id = v_application_id AND q.slot = v_slot),
         (SELECT COUNT(*) FROM orbit_session_queue sq WHERE sq.session_id = p_session_id),
         (SELECT COALESCE(MAX(q.max_active_attempts > 0), 0)
            FROM orbit_session_queue sq JOIN orbit_queue q ON q.id = sq.queue_id
           WHERE sq.session_id = p_session_id)
    INTO v_credential_ok, v_budget, v_slot_room, v_queue_count, v_limited;
  SET p_room = v_budget + p_credit, v_slot_room = v_slot_room + p_credit,
      v_budget = LEAST(p_max, GREATEST(COALESCE(v_budget + p_credit, 0), 0));
  IF v_session_state <> 'active' OR v_credential_ok = 0 OR v_budget = 0 THEN
    LEAVE body;
  END IF;
  SET v_any_handler = (v_handlers = '[]');

  -- The hand-off first (p_results; for a session that takes keyed tasks): each task carries its
  -- queue, and the cursor's LIMIT is the grant's room.
  IF p_results IS NOT NULL AND v_keys THEN
    OPEN c_handoffs;
    handoffs: LOOP
      SET v_task_id = NULL;
      fetch_handoff: BEGIN
        -- Scoped to the FETCH alone: no nested call's empty SELECT ... INTO can set it.
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_task_id = NULL;
        FETCH c_handoffs INTO v_task_id, v_resource_id, v_deadline, v_namespace_id, v_attempt_no,
                              v_queue_id, v_policies;
      END fetch_handoff;
      IF v_task_id IS NULL THEN
        LEAVE handoffs;
      END IF;
      -- The task, unless someone else holds it (a cancel or expiry is never waited for: the
      -- queue's next task of the key is readied instead, as a release readies it, for the
      -- scans below) or it was taken already (a result repeated in p_results: the key is full,
      -- and nothing is readied).
      SET v_lock = NULL;
      SELECT t.id INTO v_lock
        FROM orbit_task t
       WHERE t.id = v_task_id AND t.lane = 'blocked' AND t.blocked_reason = ''
         FOR UPDATE SKIP LOCKED;
      IF v_lock IS NULL THEN
        CALL orbit_key_promote(v_resource_id, v_queue_id, p_now);
        SET v_readied = 1;
        ITERATE handoffs;
      END IF;
      -- The task's own rules (its deadline, its key's permit) and the attempt.
      CALL orbit_attempt_grant(p_session_id, v_application_id, v_worker_id, v_start, v_seq,
                               v_task_id, v_namespace_id, v_queue_id, v_resource_id, v_deadline, v_attempt_no,
                               v_policies, p_now, v_expires, v_attempt_id, v_expired_one);
      IF v_attempt_id IS NOT NULL THEN
        SET v_granted = v_granted + 1, v_handoffs = v_handoffs + 1, v_last_attempt_id = v_attempt_id;
      ELSEIF v_expired_one THEN
        SET v_expired = v_expired + 1;
      ELSE
        SET v_demoted = v_demoted + 1;
      END IF;
    END LOOP handoffs;
    CLOSE c_handoffs;
  END IF;

  queues: WHILE v_visit < v_queue_count AND v_granted < v_budget DO
    -- Visit the session's queues from a rotating start position: visit v takes the queue at
    -- position (v - claim_seq) mod n (positions run 0 to n-1, see orbit_session_open), one probe
    -- of ux_session_queue_position, no sort.
    -- For a session of several queues an empty ready lane is common (a hot key's other queue, an
    -- idle queue) and opening the cursor costs a temporary table: the same statement probes the
    -- lane's head first. Not for one queue: a busy lane's head is full of entries just moved out
    -- of it, which the probe would pass over as the cursor does, and then the scan again.
    -- A scan from where the session's last one stopped (see the header) first needs to know that
    -- no better priority is ready: probed downwards from that priority, because a probe upwards
    -- from the front would pass over the entries the scan is to skip.
    SET v_queue_id = NULL, v_position = (v_visit + v_queue_count - v_seq % v_queue_count) % v_queue_count,
        v_hinted = p_hinted AND NOT v_readied AND v_scan_task_id > 0 AND v_position = v_scan_position
                   AND v_seq % 16 <> 0;
    SELECT sq.queue_id, q.paused, q.max_active_attempts,
           IF(v_queue_count > 1,
              EXISTS (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
                       WHERE t.queue_id = sq.queue_id AND t.lane = 'ready'), 1),
           IF(v_hinted,
              (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
                WHERE t.queue_id = sq.queue_id AND t.lane = 'ready' AND t.priority < v_scan_priority
                ORDER BY t.queue_id DESC, t.priority DESC, t.id DESC
                LIMIT 1) IS NOT NULL, 1),
           (SELECT 1 FROM orbit_key_policy p WHERE p.namespace_id = q.namespace_id LIMIT 1) IS NOT NULL
      INTO v_queue_id, v_paused, v_queue_max, v_any_ready, v_better, v_policies
      FROM orbit_session_queue sq
      JOIN orbit_queue q ON q.id = sq.queue_id
     WHERE sq.session_id = p_session_id AND sq.position = v_position;
    SET v_visit = v_visit + 1;
    IF v_queue_id IS NULL OR v_paused THEN
      ITERATE queues;
    END IF;
    SET v_queue_room = v_budget, v_front = NOT v_hinted OR v_better, v_from_head = 0,
        v_from_priority = v_scan_priority, v_from_task_id = v_scan_task_id;
    IF v_queue_max > 0 AND v_any_ready THEN
      SELECT q.max_active_attempts INTO v_queue_max FROM orbit_queue q WHERE q.id = v_queue_id FOR UPDATE;
      SELECT CAST(v_queue_max AS SIGNED) - COUNT(*) INTO v_queue_room
        FROM orbit_attempt a FORCE INDEX (ix_attempt_active_queue)
       WHERE a.released_at IS NULL AND a.queue_id = v_queue_id;
    END IF;

    -- One scan locks a batch of candidates (each scan passes over the rows other sessions hold
    -- and the entries they just moved out of the lane, so one per batch, not one per task); a
    -- batch that grants less than it found (expired, demoted, refused) is followed by another.
    candidates: WHILE v_any_ready AND v_queue_room > 0 AND v_granted < v_budget DO
      IF v_front THEN
        -- The front: the lane's, or the first ready task of the session's handlers (the best of
        -- each handler's first, one probe of ix_task_handler each; none: nothing here for this
        -- session). The scan starts at that task (past id - 1 within its priority). Each name
        -- is read in the handler column's character set and collation (a string column without
        -- them would be in the database's default, which may not hold the name; JSON_UNQUOTE is
        -- utf8mb3 on MariaDB 10.6), at most 192 characters: a longer name matches no task.
        SET v_front = 0, v_from_task_id = 0, v_from_head = 0;
        IF NOT v_any_handler THEN
          SET v_from_priority = NULL;
          SELECT t.priority, t.id INTO v_from_priority, v_from_task_id
            FROM JSON_TABLE(v_handlers, '$[*]' COLUMNS (name VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) h
            STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY)
              ON t.id = (SELECT b.id FROM orbit_task b FORCE INDEX (ix_task_handler)
                          WHERE b.queue_id = v_queue_id AND b.lane = 'ready'
                            AND b.handler = h.name AND (v_keys OR b.resource_id = 0)
                          ORDER BY b.handler, b.priority, b.id
                          LIMIT 1)
           ORDER BY t.priority, t.id
           LIMIT 1;
          IF v_from_priority IS NULL THEN
            LEAVE candidates;
          END IF;
          SET v_from_task_id = v_from_task_id - 1, v_from_head = 1;
        END IF;
      END IF;
      SET v_want = LEAST(v_queue_room, v_budget - v_granted), v_fetched = 0;
      OPEN c_candidates;
      batch: LOOP
        SET v_task_id = NULL;
        fetch_candidate: BEGIN
          -- Scoped to the FETCH alone: no nested call's empty SELECT ... INTO can set it.
          DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_task_id = NULL;
          FETCH c_candidates INTO v_task_id, v_resource_id, v_deadline, v_namespace_id, v_attempt_no, v_priority;
        END fetch_candidate;
        IF v_task_id IS NULL THEN
          LEAVE batch;
        END IF;
        -- Every candidate fetched leaves the ready lane (granted, expired or demoted below).
        SET v_fetched = v_fetched + 1,
            v_scan_position = v_position, v_scan_priority = v_priority, v_scan_task_id = v_task_id;
        -- The task's own rules (its deadline, its key's permit) and the attempt.
        CALL orbit_attempt_grant(p_session_id, v_application_id, v_worker_id, v_start, v_seq,
                                 v_task_id, v_namespace_id, v_queue_id, v_resource_id, v_deadline, v_attempt_no,
                                 v_policies, p_now, v_expires, v_attempt_id, v_expired_one);
        IF v_attempt_id IS NOT NULL THEN
          SET v_granted = v_granted + 1, v_queue_room = v_queue_room - 1, v_last_attempt_id = v_attempt_id;
        ELSEIF v_expired_one THEN
          SET v_expired = v_expired + 1;
        ELSE
          SET v_demoted = v_demoted + 1;
        END IF;
      END LOOP batch;
      CLOSE c_candidates;
      IF v_fetched < v_want THEN
        IF v_from_task_id > 0 AND NOT v_from_head THEN
          -- A scan from the session's last stop came up short: the rest from the front, which
          -- also finds what was readied behind that stop.
          SET v_front = 1;
          ITERATE candidates;
        END IF;
        -- The scan found fewer than it asked for: the queue has nothing more for this session.
        LEAVE candidates;
      END IF;
    END WHILE candidates;
  END WHILE queues;
  SET p_queue_limited = v_limited;
  -- The claim_seq step and where the scan stopped (undone below when nothing was written).
  UPDATE orbit_session s
     SET s.claim_seq = v_seq,
         s.scan_position = v_scan_position, s.scan_priority = v_scan_priority, s.scan_task_id = v_scan_task_id
   WHERE s.id = p_session_id;

  IF v_granted = 0 AND v_expired = 0 THEN
    IF v_demoted = 0 THEN
      -- Nothing granted, expired or demoted: undo the claim_seq step (a caller with nothing else
      -- to commit then writes nothing).
      ROLLBACK TO SAVEPOINT orbit_task_grant;
      LEAVE body;
    END IF;
    SET p_seq = v_seq;
    LEAVE body;
  END IF;
  -- The common case: the whole grant fits the session's slot (the attempts recorded it), as the
  -- slot's room read above says. Otherwise every slot's row, without trying this one first (see
  -- p_deferred).
  IF v_expired = 0 AND NOT p_every_slot AND v_slot_room >= v_granted THEN
    UPDATE orbit_application_quota q
     SET q.active_attempts = q.active_attempts + v_granted, q.updated_at = p_now
   WHERE q.application_id = v_application_id AND q.slot = v_slot
     AND q.checked_max_active_attempts = q.max_active_attempts
     AND q.active_attempts + v_granted <= (q.max_active_attempts DIV 16 + (q.slot < q.max_active_attempts % 16)) + p_credit;
    SET v_charged = ROW_COUNT();
    IF v_charged = 0 THEN
      -- Charged meanwhile by another grant of the slot: see p_deferred.
      ROLLBACK TO SAVEPOINT orbit_task_grant;
      SET p_deferred = 1;
      LEAVE body;
    END IF;
  END IF;
  IF v_charged = 0 THEN
    -- Otherwise every slot's row, locked at once, the exact total checked, and the expired
    -- tasks' charges given back under that lock (orbit_attempt_charge).
    CALL orbit_attempt_charge(v_application_id, p_session_id, v_seq, v_slot, v_granted, v_expired, p_credit, p_now,
                              v_charged);
    IF NOT v_charged THEN
      -- Concurrent claims used the quota first: grant nothing this time.
      ROLLBACK TO SAVEPOINT orbit_task_grant;
      LEAVE body;
    END IF;
  END IF;
  SET p_seq = v_seq, p_granted = v_granted, p_handoffs = v_handoffs, p_room = p_room - v_granted, p_attempt_id = v_last_attempt_id;
END$$
DELIMITER ;

-- ---- orbit_task_list (from templates/procedures/orbit_task_list.sql) ----
-- orbit_task_list: List tasks newest first (id descending), filtered, a page at a time.
--
-- Only tasks of queues the credential reaches: p_queue_id (which must pass the queue check), or
-- every queue of its queue scope. Filters combine with AND; NULL = no filter. concurrency_key
-- matches exact bytes ('' = tasks without a key). Keyset pagination: pass the last task_id of a
-- page as p_before_id for the next one; ids never change, so pages neither repeat nor skip rows.
-- Every candidate comes from an index range read newest first, at most p_limit rows each, in one
-- read-only snapshot; the ranges are merged keeping the newest p_limit (a range stops early at
-- the oldest id already kept):
--   business_key given    -> ix_task_business, per namespace in scope;
--   concurrency_key given -> the key's resource row, then ix_task_key, per namespace in scope;
--   otherwise             -> ix_task_list, per queue in scope and per state (p_state or all nine).
-- Parameters: p_token_hash BINARY(32) (scope tasks:read); p_queue_id (NULL = all in scope);
--   p_state (a task state; NULL = any); p_business_key (NULL = any); p_concurrency_key (exact
--   bytes; '' = no key; NULL = any); p_limit 1-1000; p_before_id (NULL = from the newest).
-- Result (0..p_limit rows, task_id descending): the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (p_queue_id), INVALID_ARGUMENT (p_state,
--   p_limit).
-- Locks: none (a consistent read).
DROP PROCEDURE IF EXISTS orbit_task_list;
DELIMITER $$
CREATE PROCEDURE orbit_task_list(
  IN p_token_hash BINARY(32),
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_state TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_limit BIGINT,
  IN p_before_id BIGINT UNSIGNED)
  READS SQL DATA
BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_before BIGINT UNSIGNED;
  DECLARE v_floor BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_ids LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE v_min BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_ns BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_next_ns BIGINT UNSIGNED;
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_next_queue CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_s INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_check(p_token_hash, 'tasks:read', v_application_id, v_environment_id, v_credential_id);
  IF p_queue_id IS NOT NULL THEN
    CALL orbit_auth_queue_check(p_token_hash, 'tasks:read', p_queue_id, v_application_id, v_namespace_id, v_credential_id);
  END IF;
  IF p_state IS NOT NULL AND p_state NOT IN ('WAITING', 'LEASED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED',
                                             'CANCELLED', 'NEEDS_REVIEW', 'EXPIRED') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: state must be a task state such as WAITING, RUNNING or SUCCEEDED';
  END IF;
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 1000';
  END IF;
  SET v_before = COALESCE(p_before_id, 18446744073709551615);

  SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION READ ONLY;
  IF p_business_key IS NOT NULL OR p_concurrency_key <> '' THEN
    namespaces: LOOP
      SET v_next_ns = NULL, v_resource_id = NULL;
      SELECT MIN(s.namespace_id) INTO v_next_ns
        FROM orbit_credential_scope s
       WHERE s.credential_id = v_credential_id AND s.namespace_id > v_ns
         AND (v_namespace_id IS NULL OR s.namespace_id = v_namespace_id);
      IF v_next_ns IS NULL THEN
        LEAVE namespaces;
      END IF;
      SET v_ns = v_next_ns;
      IF p_business_key IS NULL THEN
        SELECT r.id INTO v_resource_id
          FROM orbit_resource r
         WHERE r.namespace_id = v_ns AND r.concurrency_key = p_concurrency_key;
      END IF;
      IF p_business_key IS NOT NULL THEN
        SELECT COALESCE(JSON_ARRAYAGG(k.id), '[]'), MIN(k.id), COUNT(*) INTO v_ids, v_min, v_count
          FROM (SELECT u.id
                  FROM (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j
                        UNION ALL
                        (SELECT t.id
                           FROM orbit_task t
                          WHERE t.namespace_id = v_ns AND t.business_key = p_business_key
                            AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                        WHERE s.credential_id = v_credential_id AND s.namespace_id = t.namespace_id
                                          AND s.queue_id IN ('', t.queue_id))
                            AND t.id < v_before AND t.id > v_floor
                            AND (p_state IS NULL OR t.state = p_state)
                            AND (p_business_key IS NULL OR t.business_key = p_business_key)
                            AND (p_concurrency_key IS NULL OR t.concurrency_key = p_concurrency_key)
                            AND (p_queue_id IS NULL OR t.queue_id = p_queue_id)
                          ORDER BY t.id DESC
                          LIMIT p_limit)) u
                 ORDER BY u.id DESC
                 LIMIT p_limit) k;
        IF v_count = p_limit THEN
          SET v_floor = v_min;
        END IF;
      ELSEIF v_resource_id IS NOT NULL THEN
        SELECT COALESCE(JSON_ARRAYAGG(k.id), '[]'), MIN(k.id), COUNT(*) INTO v_ids, v_min, v_count
          FROM (SELECT u.id
                  FROM (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j
                        UNION ALL
                        (SELECT t.id
                           FROM orbit_task t
                          WHERE t.resource_id = v_resource_id
                            AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                        WHERE s.credential_id = v_credential_id AND s.namespace_id = t.namespace_id
                                          AND s.queue_id IN ('', t.queue_id))
                            AND t.id < v_before AND t.id > v_floor
                            AND (p_state IS NULL OR t.state = p_state)
                            AND (p_business_key IS NULL OR t.business_key = p_business_key)
                            AND (p_concurrency_key IS NULL OR t.concurrency_key = p_concurrency_key)
                            AND (p_queue_id IS NULL OR t.queue_id = p_queue_id)
                          ORDER BY t.id DESC
                          LIMIT p_limit)) u
                 ORDER BY u.id DESC
                 LIMIT p_limit) k;
        IF v_count = p_limit THEN
          SET v_floor = v_min;
        END IF;
      END IF;
    END LOOP namespaces;
  ELSE
    queues: LOOP
      SET v_next_queue = NULL;
      SELECT MIN(q.id) INTO v_next_queue
        FROM orbit_queue q
       WHERE q.application_id = v_application_id AND q.environment_id = v_environment_id AND q.id > v_queue_id
         AND (p_queue_id IS NULL OR q.id = p_queue_id)
         AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                WHERE s.credential_id = v_credential_id AND s.namespace_id = q.namespace_id
                  AND s.queue_id IN ('', q.id));
      IF v_next_queue IS NULL THEN
        LEAVE queues;
      END IF;
      SET v_queue_id = v_next_queue, v_s = 0;
      states: WHILE v_s < 9 DO
        SET v_s = v_s + 1;
        SET v_state = ELT(v_s, 'WAITING', 'LEASED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED', 'CANCELLED',
                          'NEEDS_REVIEW', 'EXPIRED');
        IF p_state IS NOT NULL AND p_state <> v_state THEN
          ITERATE states;
        END IF;
        SELECT COALESCE(JSON_ARRAYAGG(k.id), '[]'), MIN(k.id), COUNT(*) INTO v_ids, v_min, v_count
          FROM (SELECT u.id
                  FROM (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j
                        UNION ALL
                        (SELECT t.id
                           FROM orbit_task t
                          WHERE t.queue_id = v_queue_id AND t.state = v_state
                            AND t.id < v_before AND t.id > v_floor
                            AND (p_state IS NULL OR t.state = p_state)
                            AND (p_business_key IS NULL OR t.business_key = p_business_key)
                            AND (p_concurrency_key IS NULL OR t.concurrency_key = p_concurrency_key)
                            AND (p_queue_id IS NULL OR t.queue_id = p_queue_id)
                          ORDER BY t.id DESC
                          LIMIT p_limit)) u
                 ORDER BY u.id DESC
                 LIMIT p_limit) k;
        IF v_count = p_limit THEN
          SET v_floor = v_min;
        END IF;
      END WHILE states;
    END LOOP queues;
  END IF;
  SELECT t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at
    FROM orbit_task t
   WHERE t.id IN (SELECT j.id FROM JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) j)
   ORDER BY t.id DESC;
  COMMIT;
END$$
DELIMITER ;

-- ---- orbit_task_place (from templates/procedures/orbit_task_place.sql) ----
-- orbit_task_place: Internal: put a WAITING or RETRY_WAIT task into its dispatch lane.
--
-- The caller holds the task row lock. A task whose run_at is in the future goes to 'scheduled'.
-- An unkeyed task goes to 'ready'. A keyed task goes to 'ready' only when its key has room for
-- another holder (m::key_full) and its queue has no ready task of that key yet (at most one ready
-- task per key and queue); otherwise it goes to 'blocked', outside the range the claim scans. Every change of a
-- keyed task into or out of 'ready' happens under the resource row lock, so the check below is
-- exact under READ COMMITTED.
-- Parameters: p_task_id; p_now (the caller's UTC timestamp).
-- Out: o_state (WAITING, or RETRY_WAIT for a retry scheduled later), o_lane (the lane it went to).
-- Result: none. Signals: none.
-- Locks: orbit_resource row FOR UPDATE (keyed tasks).
DROP PROCEDURE IF EXISTS orbit_task_place;
DELIMITER $$
CREATE PROCEDURE orbit_task_place(IN p_task_id BIGINT UNSIGNED, IN p_now DATETIME(6),
                                  OUT o_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin, OUT o_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_resource_id BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_run_at DATETIME(6) DEFAULT NULL;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT 'ready';
  DECLARE v_lock BIGINT UNSIGNED;
  DECLARE v_attempt_count INT UNSIGNED DEFAULT 0;
  SELECT t.queue_id, t.resource_id, t.run_at, t.attempt_count INTO v_queue_id, v_resource_id, v_run_at, v_attempt_count
    FROM orbit_task t
   WHERE t.id = p_task_id;
  IF v_run_at > p_now THEN
    SET v_lane = 'scheduled';
  ELSEIF v_resource_id <> 0 THEN
    SELECT r.id INTO v_lock FROM orbit_resource r WHERE r.id = v_resource_id FOR UPDATE;
    -- A plain read (a subquery of a locking read takes locks); exact under the resource lock.
    SELECT IF((r.holders >= r.holder_limit OR COALESCE(r.rate_wake_at > p_now, 0))
              OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                          WHERE h.resource_id = r.id AND h.lane = 'ready' AND h.queue_id = v_queue_id),
              'blocked', 'ready')
      INTO v_lane
      FROM orbit_resource r
     WHERE r.id = v_resource_id;
  END IF;
  SET o_state = IF(v_lane = 'scheduled' AND v_attempt_count > 0, 'RETRY_WAIT', 'WAITING'), o_lane = v_lane;
  UPDATE orbit_task t
     SET t.state = o_state, t.lane = v_lane, t.updated_at = p_now
   WHERE t.id = p_task_id;
END$$
DELIMITER ;

-- ---- orbit_task_promote_due (from templates/procedures/orbit_task_promote_due.sql) ----
-- orbit_task_promote_due: Move scheduled tasks whose run_at has come into the ready or blocked lane, and wake keys whose rate allows a grant again.
--
-- Retries wait in the 'scheduled' lane (RETRY_WAIT) so they do not occupy their key during the
-- backoff; when due they compete again like a new task (orbit_task_place). Then the keys whose
-- rate_wake_at has come (ix_resource_wake): a grant their rate refused left their tasks blocked,
-- and each gets its next task ready in every queue (orbit_key_promote_all). One short
-- transaction per task or key, at most p_limit of them in all.
-- Parameters: p_limit 1-10000.
-- Result (one row): promoted INT (tasks and keys), next_run_at DATETIME(6) (the earliest
--   scheduled task still waiting or key rate wait, NULL when none: when to call again).
-- Signals: INVALID_ARGUMENT (p_limit).
-- Locks, per task in order: orbit_task row, orbit_resource row (keyed); per key: orbit_resource
--   row, the promoted orbit_task rows (SKIP LOCKED).
DROP PROCEDURE IF EXISTS orbit_task_promote_due;
DELIMITER $$
CREATE PROCEDURE orbit_task_promote_due(IN p_limit INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_run_at DATETIME(6);
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_promoted INT DEFAULT 0;
  DECLARE v_seen INT DEFAULT 0;
  DECLARE v_resource_id BIGINT UNSIGNED;
  DECLARE v_wake DATETIME(6);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  due: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_task_id = NULL;
    SELECT t.id INTO v_task_id
      FROM orbit_task t
     WHERE t.lane = 'scheduled' AND t.run_at <= v_now
     ORDER BY t.run_at
     LIMIT 1;
    IF v_task_id IS NULL THEN
      LEAVE due;
    END IF;
    SET v_seen = v_seen + 1;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
    SELECT t.lane, t.run_at INTO v_lane, v_run_at FROM orbit_task t WHERE t.id = v_task_id FOR UPDATE;
    IF v_lane = 'scheduled' AND v_run_at <= v_now THEN
      CALL orbit_task_place(v_task_id, v_now, v_state, v_lane);
      SET v_promoted = v_promoted + 1;
    END IF;
    COMMIT;
  END WHILE due;
  wake_keys: WHILE v_seen < p_limit DO
    SET v_now = UTC_TIMESTAMP(6), v_resource_id = NULL;
    SELECT r.id INTO v_resource_id
      FROM orbit_resource r
     WHERE r.rate_wake_at <= v_now
     ORDER BY r.rate_wake_at
     LIMIT 1;
    IF v_resource_id IS NULL THEN
      LEAVE wake_keys;
    END IF;
    SET v_seen = v_seen + 1;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
    SELECT r.rate_wake_at INTO v_wake FROM orbit_resource r WHERE r.id = v_resource_id FOR UPDATE;
    IF v_wake <= v_now THEN
      UPDATE orbit_resource r SET r.rate_wake_at = NULL WHERE r.id = v_resource_id;
      CALL orbit_key_promote_all(v_resource_id, v_now);
      SET v_promoted = v_promoted + 1;
    END IF;
    COMMIT;
  END WHILE wake_keys;
  SELECT v_promoted AS promoted,
         (SELECT MIN(w.at)
            FROM (SELECT MIN(t.run_at) AS at FROM orbit_task t WHERE t.lane = 'scheduled'
                  UNION ALL
                  SELECT MIN(r.rate_wake_at) FROM orbit_resource r) w) AS next_run_at;
END$$
DELIMITER ;

-- ---- orbit_task_purge (from templates/procedures/orbit_task_purge.sql) ----
-- orbit_task_purge: Delete finished tasks kept longer than their queue's retention, with their attempts, history and idempotency receipts.
--
-- A task is purged when it is SUCCEEDED, FAILED, CANCELLED or EXPIRED and finished more than its
-- queue's orbit_queue.retention_seconds before p_now. NEEDS_REVIEW and unfinished tasks are never
-- purged (finished_at is NULL until a terminal state, and the state is checked too). Its
-- orbit_attempt rows, orbit_task_event rows and the orbit_idempotency receipt that names it go in
-- the same transaction, so a receipt lives exactly as long as its task. orbit_resource rows are
-- never deleted: a key's next token stays larger than any token granted before (SPEC §4).
-- orbit_plan_fire rows stay too: they keep plan firing idempotent.
-- Queues are visited in id order; in each, the ix_task_finished range (queue_id, finished_at <
-- cutoff) is read oldest first, 50 tasks per short transaction, taken FOR UPDATE SKIP LOCKED:
-- two servers purging at once take different tasks and never wait on each other, and a task row
-- or attempt row someone else holds is skipped and left for a later call. The claim reads the
-- ready lane (ix_task_dispatch), which holds no finished task, so it never waits on a purge.
-- A call stops at p_limit tasks, or before its next batch once p_budget_ms have passed, so it
-- answers well within the caller's timeout however slow the database is; `more` says whether it
-- stopped early (call again) or found nothing more to purge.
-- Parameters: p_now DATETIME(6) (NULL = UTC_TIMESTAMP(6): tests pass a later time instead of
--   waiting); p_limit 1-10000: the most tasks this call deletes; p_budget_ms 1-60000.
-- Result (one row): purged INT (tasks deleted; their attempts, events and receipts not counted),
--   more TINYINT (1 = stopped at the limit or the time budget: there may be more to purge).
-- Signals: INVALID_ARGUMENT (p_limit, p_budget_ms).
-- Locks, per transaction in order: the batch's orbit_task rows (SKIP LOCKED); per task, its
--   orbit_attempt rows (SKIP LOCKED: a task with a held attempt row is skipped), then its
--   orbit_task_event rows, its orbit_idempotency row and the task row's delete.
DROP PROCEDURE IF EXISTS orbit_task_purge;
DELIMITER $$
CREATE PROCEDURE orbit_task_purge(IN p_now DATETIME(6), IN p_limit INT, IN p_budget_ms INT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT '';
  DECLARE v_next_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_retention INT UNSIGNED;
  DECLARE v_cutoff DATETIME(6);
  DECLARE v_batch INT DEFAULT 0;
  DECLARE v_taken INT DEFAULT 0;
  DECLARE v_task_id BIGINT UNSIGNED;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_idempotency_key VARBINARY(255);
  DECLARE v_attempts INT UNSIGNED;
  DECLARE v_locked INT UNSIGNED;
  DECLARE v_purged INT DEFAULT 0;
  DECLARE v_purged_before INT DEFAULT 0;
  DECLARE v_done TINYINT DEFAULT 0;
  DECLARE v_more TINYINT DEFAULT 0;
  DECLARE v_started DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE c_batch CURSOR FOR
    SELECT t.id, t.application_id, t.idempotency_key
      FROM orbit_task t
     WHERE t.queue_id = v_queue_id AND t.finished_at < v_cutoff
       AND t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')
     ORDER BY t.finished_at
     LIMIT v_batch
       FOR UPDATE SKIP LOCKED;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: limit must be between 1 and 10000';
  END IF;
  IF p_budget_ms IS NULL OR p_budget_ms NOT BETWEEN 1 AND 60000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: budget must be between 1 and 60000 ms';
  END IF;
  SET v_now = COALESCE(p_now, UTC_TIMESTAMP(6));
  queues: WHILE v_purged < p_limit DO
    SET v_next_queue_id = NULL;
    SELECT q.id, q.retention_seconds INTO v_next_queue_id, v_retention
      FROM orbit_queue q
     WHERE q.id > v_queue_id
     ORDER BY q.id
     LIMIT 1;
    IF v_next_queue_id IS NULL THEN
      LEAVE queues;
    END IF;
    SET v_queue_id = v_next_queue_id, v_cutoff = DATE_SUB(v_now, INTERVAL v_retention SECOND);
    -- Batches until one comes back short (the range is empty, or the rest is held by others) or
    -- purges nothing (all of it skipped), or the call's limit is reached.
    batches: REPEAT
      -- Each statement of a procedure reads the clock anew.
      IF UTC_TIMESTAMP(6) >= v_started + INTERVAL p_budget_ms * 1000 MICROSECOND THEN
        SET v_more = 1;
        LEAVE queues;
      END IF;
      SET v_batch = LEAST(50, p_limit - v_purged), v_taken = 0, v_done = 0,
          v_purged_before = v_purged;
      SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
      OPEN c_batch;
      tasks: LOOP
        FETCH c_batch INTO v_task_id, v_application_id, v_idempotency_key;
        IF v_done = 1 THEN
          LEAVE tasks;
        END IF;
        SET v_taken = v_taken + 1;
        -- Every attempt row of the task, or none: a held one (a late frame of its worker) means
        -- the task is left for a later call rather than waited on.
        SELECT COUNT(*) INTO v_attempts FROM orbit_attempt a WHERE a.task_id = v_task_id;
        SELECT COUNT(*) INTO v_locked
          FROM orbit_attempt a
         WHERE a.task_id = v_task_id
           FOR UPDATE SKIP LOCKED;
        IF v_locked = v_attempts THEN
          DELETE FROM orbit_attempt WHERE task_id = v_task_id;
          DELETE FROM orbit_task_event WHERE task_id = v_task_id;
          IF v_idempotency_key <> '' THEN
            DELETE FROM orbit_idempotency
             WHERE application_id = v_application_id AND idempotency_key = v_idempotency_key
               AND task_id = v_task_id;
          END IF;
          DELETE FROM orbit_task WHERE id = v_task_id;
          SET v_purged = v_purged + ROW_COUNT();
        END IF;
      END LOOP tasks;
      CLOSE c_batch;
      COMMIT;
    UNTIL v_taken < v_batch OR v_purged = v_purged_before OR v_purged >= p_limit END REPEAT batches;
  END WHILE queues;
  SELECT v_purged AS purged, IF(v_purged >= p_limit, 1, v_more) AS more;
END$$
DELIMITER ;

-- ---- orbit_task_ready_queues (from templates/procedures/orbit_task_ready_queues.sql) ----
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

-- ---- orbit_task_resolve (from templates/procedures/orbit_task_resolve.sql) ----
-- orbit_task_resolve: Settle a NEEDS_REVIEW task: mark it succeeded or failed, or requeue it.
--
-- The unknown attempt's permits were released when it ended; resolving changes no permit.
-- 'requeue' puts the task back to WAITING with one more attempt allowed; its next grant gets a
-- larger token than any before it.
-- Parameters: p_token_hash BINARY(32) (scope tasks:submit on the task's queue); p_task_id;
--   p_resolution 'succeeded' | 'failed' | 'requeue'; p_note (JSON text or NULL, kept as the
--   task's output for succeeded, error for failed).
-- Result (one row): the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
--   then wake_queues: a JSON array, the task's queue when a requeue left it ready (unpaused),
--   else empty; the caller wakes the sessions that serve it.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope), NOT_FOUND (no such task, another tenant's,
--   or outside the credential's queues: one answer), INVALID_ARGUMENT, STATE_CONFLICT (not in
--   NEEDS_REVIEW).
-- Locks, in order: orbit_task row, orbit_resource row (requeue of a keyed task),
--   the orbit_application_quota slot row the task charged (orbit_task.quota_slot).
DROP PROCEDURE IF EXISTS orbit_task_resolve;
DELIMITER $$
CREATE PROCEDURE orbit_task_resolve(
  IN p_token_hash BINARY(32),
  IN p_task_id BIGINT UNSIGNED,
  IN p_resolution TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_note MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_visible TINYINT;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_new_state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_slot TINYINT UNSIGNED;
  DECLARE v_lane VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_wake_queues TEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT '[]';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  SELECT t.queue_id INTO v_queue_id FROM orbit_task t WHERE t.id = p_task_id;
  -- A missing task and another tenant's (or one outside the credential's queues) get one answer.
  CALL orbit_auth_queue_visible(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_environment_id,
                                v_credential_id, v_visible);
  IF NOT v_visible THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'NOT_FOUND: task not found';
  END IF;
  IF p_resolution IS NULL OR p_resolution NOT IN ('succeeded', 'failed', 'requeue') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: resolution must be succeeded, failed or requeue';
  END IF;
  IF p_note IS NOT NULL AND NOT JSON_VALID(p_note) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: note must be valid JSON';
  END IF;

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT t.state, t.quota_slot INTO v_state, v_slot FROM orbit_task t WHERE t.id = p_task_id FOR UPDATE;
  IF v_state <> 'NEEDS_REVIEW' THEN
    ROLLBACK;
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'STATE_CONFLICT: only a NEEDS_REVIEW task can be resolved';
  END IF;
  IF p_resolution = 'requeue' THEN
    UPDATE orbit_task t
       SET t.state = 'WAITING', t.run_at = v_now, t.max_attempts = GREATEST(t.max_attempts, t.attempt_count + 1),
           t.updated_at = v_now
     WHERE t.id = p_task_id;
    CALL orbit_task_place(p_task_id, v_now, v_new_state, v_lane);
  ELSE
    SET v_new_state = IF(p_resolution = 'succeeded', 'SUCCEEDED', 'FAILED');
    UPDATE orbit_task t
       SET t.state = v_new_state,
           t.output = IF(p_resolution = 'succeeded', p_note, t.output),
           t.error = IF(p_resolution = 'failed', COALESCE(p_note, t.error), t.error),
           t.finished_at = v_now, t.updated_at = v_now
     WHERE t.id = p_task_id;
    UPDATE orbit_application_quota q
       SET q.incomplete_tasks = q.incomplete_tasks - 1, q.updated_at = v_now
     WHERE q.application_id = v_application_id AND q.slot = v_slot;
  END IF;
  INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
  VALUES (p_task_id, 'resolved', 'NEEDS_REVIEW', v_new_state, p_resolution, v_now);
  COMMIT;
  IF p_resolution = 'requeue' AND v_lane = 'ready' THEN
    SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO v_wake_queues
      FROM (SELECT v_queue_id AS queue_id) w
      STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = w.queue_id
     WHERE q.paused = 0
       AND (SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = q.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL;
  END IF;
  SELECT t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at, v_wake_queues AS wake_queues FROM orbit_task t WHERE t.id = p_task_id;
END$$
DELIMITER ;

-- ---- orbit_task_submit (from templates/procedures/orbit_task_submit.sql) ----
-- orbit_task_submit: Accept a task once per Idempotency-Key: create it, or replay the original.
--
-- The same (application, Idempotency-Key) with the same request returns the original task with
-- replayed = 1; with any other field (concurrency_key included) it is an IDEMPOTENCY_CONFLICT.
-- Concurrent identical submits serialise on the idempotency row: exactly one creates the task
-- (a submit that finds the row taken undoes the task it had created, and replays); a keyed
-- replay after the original committed reads the row and creates nothing.
-- A keyed task is accepted even while its key is held: it waits (WAITING, lane blocked) without
-- consuming an attempt, counts against the incomplete-task quota, and its deadline keeps running.
-- A task with a run_at ahead (p_run_at, p_delay_seconds, p_debounce_seconds) waits in the
-- 'scheduled' lane, which the claim never scans, until orbit_task_promote_due places it. A
-- debounced submit replaces its key's debounced task that still waits (see orbit_task_create):
-- the replaced task's Idempotency-Key still answers with it, now CANCELLED; a full
-- incomplete-task quota does not refuse a replacement, which takes the replaced task's charge.
-- Parameters (NULL = default where one is given):
--   p_token_hash BINARY(32)   SHA-256 of the bearer token (scope tasks:submit on the queue)
--   p_idempotency_key         1-255 bytes
--   p_queue_id                CHAR(32)
--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none
--   p_run_at                  UTC time before which the task is not claimed; a past time runs at
--                             once; at most 31536000 s (365 days) ahead; NULL = now
--   p_delay_seconds           0-31536000: run_at is acceptance + this; NULL or 0 = none;
--                             not with p_run_at
--   p_debounce_seconds        0-31536000, keyed tasks only, not with p_run_at or
--                             p_delay_seconds: the task runs this long after acceptance unless a
--                             later debounced submit for its key and queue replaces it first (it
--                             ends CANCELLED, error code REPLACED naming its successor); NULL or 0 = none
--   p_debounce_max_seconds    0-31536000, with p_debounce_seconds and at least it: the
--                             latest run_at a burst of replacements may reach, counted from the
--                             burst's first submit; NULL or 0 = no bound
-- Result (one row): replayed TINYINT (0 = created now, 1 = the original), then the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
--   then cancelled_attempt_id, cancelled_session_id: the key's holder a cancel_running policy
--   ended for this submit, and its worker session (whose worker the caller tells); 0 = none.
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND (queue), INVALID_ARGUMENT (naming the
--   field), IDEMPOTENCY_CONFLICT, QUOTA_EXCEEDED (incomplete tasks), KEY_BUSY (the key's policy
--   is 'reject' and the key is held or has waiting tasks: nothing is written, and a replay is
--   decided again).
-- Locks, in order: through orbit_task_create, the orbit_resource row (keyed; insert or FOR
--   UPDATE) and the replaced task row (debounce); then the orbit_idempotency row: its insert
--   (after the new task row and, unkeyed, the AUTO-INC lock of orbit_task for one statement),
--   or FOR UPDATE on a replay or a refused task; then as orbit_task_charge, last. One step out
--   of this order: a key policy that replaces waiting tasks or cancels the holder gives their
--   quota charges back inside orbit_task_create, before the receipt. Only a concurrent submit of
--   the same Idempotency-Key with another key or none (a conflicting request) can then wait in
--   a cycle with it; the database rolls one back (a deadlock), and the caller's retry answers
--   the conflict.
DROP PROCEDURE IF EXISTS orbit_task_submit;
DELIMITER $$
CREATE PROCEDURE orbit_task_submit(
  IN p_token_hash BINARY(32),
  IN p_idempotency_key BLOB,
  IN p_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin,
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT,
  IN p_run_at DATETIME(6),
  IN p_delay_seconds BIGINT,
  IN p_debounce_seconds BIGINT,
  IN p_debounce_max_seconds BIGINT)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_hash BINARY(32);
  DECLARE v_existing_hash BINARY(32) DEFAULT NULL;
  DECLARE v_task_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  DECLARE v_replayed TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_replaced BIGINT UNSIGNED;
  DECLARE v_refusal VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  -- The holder a cancel_running policy ended for this submit, and its session; 0 when none.
  DECLARE v_cancelled BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_cancelled_session BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_charged TINYINT;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL orbit_auth_queue_check(p_token_hash, 'tasks:submit', p_queue_id, v_application_id, v_namespace_id, v_credential_id);

  IF p_idempotency_key IS NULL OR LENGTH(p_idempotency_key) NOT BETWEEN 1 AND 255 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: Idempotency-Key must be 1-255 bytes';
  END IF;
  -- Defaults, then validation: the request hash covers the effective values.
  CALL orbit_task_validate(p_handler, p_handler_version, p_payload_version, p_payload, p_business_key,
                           p_concurrency_key, p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms,
                           p_retry_unknown, p_deadline_seconds);
  SET v_message = CASE
       WHEN p_run_at IS NOT NULL AND p_delay_seconds IS NOT NULL
         THEN 'run_at and delay_seconds cannot both be given'
       WHEN p_delay_seconds NOT BETWEEN 0 AND 31536000
         THEN 'delay_seconds must be between 0 and 31536000 (365 days)'
       WHEN p_run_at > DATE_ADD(v_now, INTERVAL 31536000 SECOND)
         THEN 'run_at must be at most 365 days ahead'
       WHEN p_debounce_seconds NOT BETWEEN 0 AND 31536000
         THEN 'debounce_seconds must be between 0 and 31536000 (365 days)'
       WHEN p_debounce_max_seconds NOT BETWEEN 0 AND 31536000
         THEN 'debounce_max_seconds must be between 0 and 31536000 (365 days)'
       WHEN p_debounce_seconds > 0 AND p_concurrency_key = ''
         THEN 'debounce_seconds needs a concurrency_key'
       WHEN p_debounce_seconds > 0 AND (p_run_at IS NOT NULL OR p_delay_seconds > 0)
         THEN 'debounce_seconds cannot be combined with run_at or delay_seconds'
       WHEN p_debounce_max_seconds > 0 AND p_debounce_max_seconds < COALESCE(p_debounce_seconds, 0)
         THEN 'debounce_max_seconds must be at least debounce_seconds'
       WHEN p_debounce_max_seconds > 0 AND NOT COALESCE(p_debounce_seconds, 0) > 0
         THEN 'debounce_max_seconds needs debounce_seconds'
  END;
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  -- Every field is hex-encoded, so no separator can be forged by a value.
  SET v_hash = UNHEX(SHA2(CONCAT_WS(',', HEX(p_queue_id), HEX(p_handler), HEX(p_handler_version),
                 HEX(p_payload_version), SHA2(p_payload, 256), HEX(p_business_key), HEX(p_concurrency_key),
                 p_priority, p_max_attempts, p_retry_base_ms, p_retry_max_ms, p_retry_unknown,
                 p_deadline_seconds, CONCAT('run_at=', p_run_at), CONCAT('delay_seconds=', NULLIF(p_delay_seconds, 0)),
                 CONCAT('debounce_seconds=', NULLIF(p_debounce_seconds, 0)),
                 CONCAT('debounce_max_seconds=', NULLIF(p_debounce_max_seconds, 0))), 256));

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  -- The task first, then its receipt, written once with the task's id: a keyed task's key row
  -- comes before the receipt in the lock order. The receipt's insert waits for a concurrent
  -- first submit of the same Idempotency-Key, then sees it as a duplicate: what the task's
  -- creation wrote is undone (a key policy's replacements and cancel too) and the original
  -- replayed. A replay is decided before the key's policy: a refused task whose
  -- Idempotency-Key has a receipt replays it (a locking read, which waits for a concurrent first
  -- submit). A keyed task's creation takes its key's row and runs its key policy, so for a keyed
  -- submit a receipt that exists already (a client's retry, most often) is read first (a plain
  -- read), and the task is not created; an unkeyed task's creation costs less than that read on
  -- every submit.
  IF p_concurrency_key <> '' THEN
    SELECT COUNT(*) INTO v_duplicate
      FROM orbit_idempotency i
     WHERE i.application_id = v_application_id AND i.idempotency_key = p_idempotency_key;
  END IF;
  IF NOT v_duplicate THEN
    SAVEPOINT orbit_submit_task;
    CALL orbit_task_create(v_application_id, v_namespace_id, p_queue_id, p_handler, p_handler_version,
                           p_payload_version, p_payload, p_business_key, p_concurrency_key, p_priority,
                           p_max_attempts, p_retry_base_ms, p_retry_max_ms, p_retry_unknown,
                           p_deadline_seconds, CASE WHEN p_run_at IS NOT NULL THEN GREATEST(p_run_at, v_now)
            WHEN p_delay_seconds > 0 THEN DATE_ADD(v_now, INTERVAL p_delay_seconds SECOND)
            ELSE v_now END /* p_run_at */,
                           COALESCE(p_debounce_seconds, 0) /* p_debounce_seconds */,
                           COALESCE(p_debounce_max_seconds, 0) /* p_debounce_max_seconds */, p_idempotency_key,
                           0 /* p_plan_id */, 0 /* p_plan_version */, v_now, 0 /* p_charge */, v_task_id, v_replaced,
                           v_refusal, v_cancelled);
    IF v_refusal = 'KEY_BUSY' THEN
      SELECT COUNT(*) INTO v_duplicate
        FROM orbit_idempotency i
       WHERE i.application_id = v_application_id AND i.idempotency_key = p_idempotency_key
         FOR UPDATE;
    ELSE
      INSERT INTO orbit_idempotency (application_id, idempotency_key, request_hash, task_id, created_at)
      VALUES (v_application_id, p_idempotency_key, v_hash, v_task_id, v_now);
    END IF;
    IF v_refusal = 'KEY_BUSY' AND NOT v_duplicate THEN
      ROLLBACK;
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'KEY_BUSY: the concurrency_key is held or has waiting tasks, and its key policy rejects new tasks';
    END IF;
    IF v_duplicate THEN
      ROLLBACK TO SAVEPOINT orbit_submit_task;
      SET v_cancelled = 0;
    END IF;
  END IF;
  IF v_duplicate THEN
    SELECT i.request_hash, i.task_id INTO v_existing_hash, v_task_id
      FROM orbit_idempotency i
     WHERE i.application_id = v_application_id AND i.idempotency_key = p_idempotency_key
       FOR UPDATE;
    IF v_existing_hash <> v_hash THEN
      ROLLBACK;
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'IDEMPOTENCY_CONFLICT: this Idempotency-Key was used with a different request';
    END IF;
    SET v_replayed = 1;
  ELSE
    IF v_cancelled <> 0 THEN
      SELECT a.session_id INTO v_cancelled_session FROM orbit_attempt a WHERE a.id = v_cancelled;
    END IF;
    -- The incomplete-task quota last; a task that replaced another (debounce, a key policy)
    -- took its charge.
    IF v_replaced = 0 THEN
      CALL orbit_task_charge(v_application_id, v_now, v_charged);
      IF NOT v_charged THEN
        ROLLBACK;
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'QUOTA_EXCEEDED: the application has reached its incomplete-task quota';
      END IF;
    END IF;
  END IF;
  COMMIT;

  SELECT v_replayed AS replayed, t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at,
         v_cancelled AS cancelled_attempt_id, v_cancelled_session AS cancelled_session_id
    FROM orbit_task t
   WHERE t.id = v_task_id;
END$$
DELIMITER ;

-- ---- orbit_task_submit_many (from templates/procedures/orbit_task_submit_many.sql) ----
-- orbit_task_submit_many: Accept many tasks in one transaction, each once per its own Idempotency-Key.
--
-- All or nothing: every task is read, authorised and validated before anything is written, then
-- one transaction gives each task, in input order, exactly what orbit_task_submit gives it: the
-- same key with the same request (hashed exactly as orbit_task_submit hashes it, so a single
-- submit and a batch task replay each other) returns the original task, replayed = 1; with any
-- other field it is an IDEMPOTENCY_CONFLICT, which fails the whole call. A key used twice in one
-- call: the second task replays the first, or conflicts with it. The scope tasks:submit is
-- checked on each task's queue, once per queue. Set-based where it can be: the fields of the
-- whole batch are checked by one statement; when no task of it names a concurrency key, its
-- tasks are created by one insert (the rows orbit_task_create writes for an unkeyed task,
-- m::task_insert_values), and a keyed batch on one queue whose namespace has no key policy,
-- without debounce, is created whole too, each task placed as orbit_task_create places it
-- (orbit_task_create_keyed_many). Either way the receipts follow in one more insert, each
-- written once with its task; when an Idempotency-Key of the batch exists or repeats, that
-- insert fails, the batch is undone, and each task is created by orbit_task_create and its
-- receipt written after it, as orbit_task_submit does. Keyed tasks behind a held key
-- (including one taken by an earlier task of the same call) wait, as with single submits. A
-- full incomplete-task quota (QUOTA_EXCEEDED) fails the whole call. One durable commit and one
-- round trip for up to 1000 tasks.
-- Parameters:
--   p_token_hash BINARY(32)   SHA-256 of the bearer token (scope tasks:submit on every queue)
--   p_tasks                   a JSON array of 1-1000 task objects, each with the members
--     idempotency_key         string, 1-255 bytes
--     queue_id                string, CHAR(32)
--     handler, handler_version, payload_version, business_key, concurrency_key: strings, and
--     priority, max_attempts, retry_base_ms, retry_max_ms, deadline_seconds: integers, and
--     retry_unknown: true/false, delay_seconds, debounce_seconds, debounce_max_seconds:
--     integers, with the rules and defaults of the p_ parameters below;
--     run_at                  a string, the UTC time 'YYYY-MM-DD HH:MM:SS[.ffffff]' (p_run_at);
--     payload                 a string holding the payload's JSON text (e.g. "{\"n\":1}"): the
--                             text is stored and hashed byte for byte, as orbit_task_submit does
--                             with p_payload (the server's JSON functions would reformat a value)
--   A missing member or JSON null takes the default; a missing concurrency_key is '' (none), a
--   null one is invalid (as in orbit_task_submit); no other member is allowed.
--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none
--   p_run_at                  UTC time before which the task is not claimed; a past time runs at
--                             once; at most 31536000 s (365 days) ahead; NULL = now
--   p_delay_seconds           0-31536000: run_at is acceptance + this; NULL or 0 = none;
--                             not with p_run_at
--   p_debounce_seconds        0-31536000, keyed tasks only, not with p_run_at or
--                             p_delay_seconds: the task runs this long after acceptance unless a
--                             later debounced submit for its key and queue replaces it first (it
--                             ends CANCELLED, error code REPLACED naming its successor); NULL or 0 = none
--   p_debounce_max_seconds    0-31536000, with p_debounce_seconds and at least it: the
--                             latest run_at a burst of replacements may reach, counted from the
--                             burst's first submit; NULL or 0 = no bound
-- Result: one row per task, in input order: item INT (0-based index in p_tasks), replayed TINYINT
--   (0 = created now, 1 = the original), then the task columns:
--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.
--   then cancelled_attempt_id, cancelled_session_id (see orbit_task_submit).
-- Signals: UNAUTHENTICATED, PERMISSION_DENIED (scope, or a queue outside the queue scope),
--   NOT_FOUND (queue), INVALID_ARGUMENT (p_tasks itself, or a task's field), IDEMPOTENCY_CONFLICT,
--   QUOTA_EXCEEDED (incomplete tasks), KEY_BUSY (a task's key policy rejects it: see
--   orbit_task_submit). A task's error starts with its index: "tasks[3]: handler
--   must be 1-191 characters".
-- Session state: creates the temporary table orbit_submit_outcome (so the definer needs
--   CREATE TEMPORARY TABLES) on the connection's first call, with a note (1050: it exists) on
--   later calls; it holds no row between calls, and goes with the connection. A keyed batch
--   created whole raises the connection's group_concat_max_len to 1 MB when it is lower (MySQL's
--   default is 1,024 bytes), for its list of ready tasks.
-- Locks, in order: the orbit_resource rows of the batch's keys: all at once, in key order (a
--   keyed batch created whole, as orbit_task_create_keyed_many), or per task in input order,
--   through orbit_task_create (insert or FOR UPDATE); a batch without concurrency keys takes the
--   AUTO-INC lock of orbit_task for one statement instead. Then the batch's orbit_idempotency
--   rows: one insert, which waits for a concurrent first submit of a key; when a key exists or
--   repeats, each task takes its receipt after its own key's row, in input order (insert, or FOR
--   UPDATE on a replay or a refused task). Then, once for the batch, the connection's
--   orbit_application_quota slot row (or, when it cannot take the batch, as orbit_task_charge per
--   new task). Two calls that share keys in different orders can deadlock, and so can a batch
--   created task by task (a receipt, then the next task's key row; or, under a key policy that
--   replaces or cancels, its give-backs of quota charges before the task's receipt, see
--   orbit_task_submit); the loser is rolled back whole and retried by the caller.
DROP PROCEDURE IF EXISTS orbit_task_submit_many;
DELIMITER $$
CREATE PROCEDURE orbit_task_submit_many(
  IN p_token_hash BINARY(32),
  IN p_tasks MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
  MODIFIES SQL DATA
body: BEGIN
  DECLARE v_application_id BIGINT UNSIGNED;
  DECLARE v_environment_id BIGINT UNSIGNED;
  DECLARE v_namespace_id BIGINT UNSIGNED;
  DECLARE v_credential_id BIGINT UNSIGNED;
  DECLARE v_count INT;
  DECLARE v_i INT DEFAULT 0;
  -- The first task that breaks a field rule (v_count + 1 when none), and the rule's message.
  DECLARE v_bad_item INT;
  DECLARE v_bad VARCHAR(132) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  -- The batch's least and greatest queue id (equal: one queue).
  DECLARE v_queue_least VARBINARY(255);
  DECLARE v_queue_greatest VARBINARY(255);
  DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_idempotency_key BLOB;
  DECLARE v_queue_id TEXT CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_last_queue TEXT CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL;
  DECLARE v_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_concurrency_key BLOB;
  DECLARE v_priority INT;
  DECLARE v_max_attempts INT;
  DECLARE v_retry_base_ms BIGINT;
  DECLARE v_retry_max_ms BIGINT;
  DECLARE v_retry_unknown TINYINT;
  DECLARE v_deadline_seconds BIGINT;
  DECLARE v_run_at DATETIME(6);
  DECLARE v_debounce_seconds BIGINT;
  DECLARE v_debounce_max_seconds BIGINT;
  DECLARE v_replaced BIGINT UNSIGNED;
  DECLARE v_refusal VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
  DECLARE v_cancelled BIGINT UNSIGNED;
  DECLARE v_hash BINARY(32);
  DECLARE v_existing_hash BINARY(32);
  DECLARE v_task_id BIGINT UNSIGNED;
  -- The first id of the batch insert, and how many tasks of the batch name a concurrency key.
  DECLARE v_first BIGINT UNSIGNED;
  DECLARE v_keyed INT;
  -- How many of the batch's tasks are debounced; whether the batch's namespace has key policies.
  DECLARE v_debounced INT;
  DECLARE v_policies TINYINT;
  DECLARE v_duplicate TINYINT DEFAULT 0;
  -- 1 when the batch was created whole, its receipts included.
  DECLARE v_batched TINYINT;
  -- 1 when some Idempotency-Key of the batch has a receipt already (the batch was sent before,
  -- most often): each task then looks for its receipt before it is created.
  DECLARE v_resent TINYINT;
  DECLARE v_replayed TINYINT;
  DECLARE v_created INT DEFAULT 0;
  DECLARE v_charged TINYINT;
  DECLARE v_slot TINYINT UNSIGNED DEFAULT (CONNECTION_ID() % 16);
  DECLARE v_item INT;
  -- 1 once a row of orbit_submit_outcome is written.
  DECLARE v_noted TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  -- The queues of the tasks before the first bad one, each once, in order of first use (read to
  -- its end by a FETCH with its own NOT FOUND handler, scoped to the FETCH alone: a handler over
  -- the loop would also catch an empty SELECT ... INTO in a nested call). The tasks' loop runs
  -- p_tasks' length, so its FETCH never runs past the end.
  DECLARE c_queues CURSOR FOR
    SELECT MIN(t.queue_id), MIN(t.item)
      FROM (SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          IF(JSON_TYPE(j.j_idempotency_key) = 'STRING', LEFT(CAST(j.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          IF(JSON_TYPE(j.j_handler) = 'STRING', LEFT(j.s_handler, 192), IF(j.j_handler IS NULL, NULL, NULL)) AS handler,
          IF(JSON_TYPE(j.j_handler_version) = 'STRING', LEFT(j.s_handler_version, 65), IF(j.j_handler_version IS NULL, NULL, NULL)) AS handler_version,
          IF(JSON_TYPE(j.j_payload_version) = 'STRING', LEFT(j.s_payload_version, 65), IF(j.j_payload_version IS NULL, NULL, NULL)) AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE(IF(JSON_TYPE(j.j_business_key) = 'STRING', LEFT(j.s_business_key, 192), IF(j.j_business_key IS NULL, NULL, NULL)), '') AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE(CASE WHEN j.j_priority REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_priority AS SIGNED)
                                    WHEN j.j_priority REGEXP '^-?[0-9]+$' THEN -1 END, 5) AS priority,
          COALESCE(CASE WHEN j.j_max_attempts REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_max_attempts AS SIGNED)
                                    WHEN j.j_max_attempts REGEXP '^-?[0-9]+$' THEN -1 END, 3) AS max_attempts,
          COALESCE(CASE WHEN j.j_retry_base_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_base_ms AS SIGNED)
                                    WHEN j.j_retry_base_ms REGEXP '^-?[0-9]+$' THEN -1 END, 1000) AS retry_base_ms,
          COALESCE(CASE WHEN j.j_retry_max_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_max_ms AS SIGNED)
                                    WHEN j.j_retry_max_ms REGEXP '^-?[0-9]+$' THEN -1 END, 300000) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   0) AS retry_unknown,
          COALESCE(CASE WHEN j.j_deadline_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_deadline_seconds AS SIGNED)
                                    WHEN j.j_deadline_seconds REGEXP '^-?[0-9]+$' THEN -1 END, 0) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          CASE WHEN j.j_delay_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_delay_seconds AS SIGNED)
                                    WHEN j.j_delay_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS delay_seconds,
          CASE WHEN j.j_debounce_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_seconds AS SIGNED)
                                    WHEN j.j_debounce_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_seconds,
          CASE WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_max_seconds AS SIGNED)
                                    WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key', s_queue_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.queue_id',
            s_handler LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler', s_handler_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler_version',
            s_payload_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload_version', s_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
            s_business_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.business_key', s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key',
            s_run_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.run_at',
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t
     WHERE t.item < v_bad_item
     GROUP BY CAST(t.queue_id AS BINARY)
     ORDER BY MIN(t.item);
  -- The tasks whose creation the quota counts, in input order: every task but a replay and a
  -- task that took the charge of the task it replaced (those have an orbit_submit_outcome row).
  DECLARE c_charged CURSOR FOR
    SELECT b.item
      FROM (SELECT k.item, IF(JSON_TYPE(k.j_idempotency_key) = 'STRING', LEFT(CAST(k.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, j_idempotency_key JSON PATH '$.idempotency_key',
              s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key')) k
      LIMIT 1000) b
      LEFT JOIN orbit_submit_outcome x ON x.item = b.item
     WHERE x.item IS NULL OR (x.replayed = 0 AND x.replaced = 0)
     ORDER BY b.item;
  DECLARE c_tasks CURSOR FOR
    SELECT t.idempotency_key, t.queue_id, t.handler, t.handler_version, t.payload_version, t.payload,
           t.business_key, t.concurrency_key, t.priority, t.max_attempts, t.retry_base_ms, t.retry_max_ms,
           t.retry_unknown, t.deadline_seconds, CASE WHEN t.run_at IS NOT NULL THEN GREATEST(t.run_at, v_now)
            WHEN t.delay_seconds > 0 THEN DATE_ADD(v_now, INTERVAL t.delay_seconds SECOND)
            ELSE v_now END,
           COALESCE(t.debounce_seconds, 0), COALESCE(t.debounce_max_seconds, 0), UNHEX(SHA2(CONCAT_WS(',', HEX(t.queue_id), HEX(t.handler), HEX(t.handler_version),
                 HEX(t.payload_version), SHA2(t.payload, 256), HEX(t.business_key), HEX(t.concurrency_key),
                 t.priority, t.max_attempts, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
                 t.deadline_seconds, CONCAT('run_at=', t.run_at), CONCAT('delay_seconds=', NULLIF(t.delay_seconds, 0)),
                 CONCAT('debounce_seconds=', NULLIF(t.debounce_seconds, 0)),
                 CONCAT('debounce_max_seconds=', NULLIF(t.debounce_max_seconds, 0))), 256))
      FROM (SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          IF(JSON_TYPE(j.j_idempotency_key) = 'STRING', LEFT(CAST(j.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          IF(JSON_TYPE(j.j_handler) = 'STRING', LEFT(j.s_handler, 192), IF(j.j_handler IS NULL, NULL, NULL)) AS handler,
          IF(JSON_TYPE(j.j_handler_version) = 'STRING', LEFT(j.s_handler_version, 65), IF(j.j_handler_version IS NULL, NULL, NULL)) AS handler_version,
          IF(JSON_TYPE(j.j_payload_version) = 'STRING', LEFT(j.s_payload_version, 65), IF(j.j_payload_version IS NULL, NULL, NULL)) AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE(IF(JSON_TYPE(j.j_business_key) = 'STRING', LEFT(j.s_business_key, 192), IF(j.j_business_key IS NULL, NULL, NULL)), '') AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE(CASE WHEN j.j_priority REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_priority AS SIGNED)
                                    WHEN j.j_priority REGEXP '^-?[0-9]+$' THEN -1 END, 5) AS priority,
          COALESCE(CASE WHEN j.j_max_attempts REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_max_attempts AS SIGNED)
                                    WHEN j.j_max_attempts REGEXP '^-?[0-9]+$' THEN -1 END, 3) AS max_attempts,
          COALESCE(CASE WHEN j.j_retry_base_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_base_ms AS SIGNED)
                                    WHEN j.j_retry_base_ms REGEXP '^-?[0-9]+$' THEN -1 END, 1000) AS retry_base_ms,
          COALESCE(CASE WHEN j.j_retry_max_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_max_ms AS SIGNED)
                                    WHEN j.j_retry_max_ms REGEXP '^-?[0-9]+$' THEN -1 END, 300000) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   0) AS retry_unknown,
          COALESCE(CASE WHEN j.j_deadline_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_deadline_seconds AS SIGNED)
                                    WHEN j.j_deadline_seconds REGEXP '^-?[0-9]+$' THEN -1 END, 0) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          CASE WHEN j.j_delay_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_delay_seconds AS SIGNED)
                                    WHEN j.j_delay_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS delay_seconds,
          CASE WHEN j.j_debounce_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_seconds AS SIGNED)
                                    WHEN j.j_debounce_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_seconds,
          CASE WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_max_seconds AS SIGNED)
                                    WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key', s_queue_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.queue_id',
            s_handler LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler', s_handler_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler_version',
            s_payload_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload_version', s_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
            s_business_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.business_key', s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key',
            s_run_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.run_at',
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t
     ORDER BY t.item;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  -- The token and the scope first, as for a single submit; queues are checked below.
  CALL orbit_auth_check(p_token_hash, 'tasks:submit', v_application_id, v_environment_id, v_credential_id);
  IF p_tasks IS NULL OR NOT JSON_VALID(p_tasks) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: tasks must be a JSON array of 1-1000 tasks';
  END IF;
  SET v_count = IF(JSON_TYPE(p_tasks) = 'ARRAY', JSON_LENGTH(p_tasks), 0);
  IF v_count NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'INVALID_ARGUMENT: tasks must be a JSON array of 1-1000 tasks';
  END IF;

  -- Checks, nothing written, reported in input order as a task-by-task check would: the first
  -- task whose fields break a rule, then the queue of each task before it (once per queue); a
  -- queue refused before that task is the error, else its rule. One statement over the whole
  -- batch finds the first bad task (its item, 4 digits, before its message: the least such
  -- string is the first), and also counts the keyed tasks and the least and greatest queue.
  SELECT MIN(IF(b.bad IS NULL, NULL, CONCAT(LPAD(b.item, 4, '0'), b.bad))), SUM(b.concurrency_key <> ''),
         COALESCE(SUM(b.debounce_seconds > 0), 0), MIN(CAST(b.queue_id AS BINARY)), MAX(CAST(b.queue_id AS BINARY))
    INTO v_bad, v_keyed, v_debounced, v_queue_least, v_queue_greatest
    FROM (SELECT t.item, t.queue_id, t.concurrency_key, t.debounce_seconds,
                 CASE
                   WHEN JSON_TYPE(t.task) <> 'OBJECT' THEN 'a task must be a JSON object'
                   WHEN NOT COALESCE(LENGTH(t.idempotency_key) BETWEEN 1 AND 255, 0)
                     THEN 'idempotency_key must be a string of 1-255 bytes'
                   WHEN COALESCE(JSON_TYPE(t.j_queue_id), '') <> 'STRING' THEN 'queue_id must be a string'
                   WHEN NOT (t.j_handler IS NULL OR JSON_TYPE(t.j_handler) IN ('NULL', 'STRING')) THEN 'handler must be a string'
                   WHEN NOT (t.j_handler_version IS NULL OR JSON_TYPE(t.j_handler_version) IN ('NULL', 'STRING')) THEN 'handler_version must be a string'
                   WHEN NOT (t.j_payload_version IS NULL OR JSON_TYPE(t.j_payload_version) IN ('NULL', 'STRING')) THEN 'payload_version must be a string'
                   WHEN NOT (t.j_payload IS NULL OR JSON_TYPE(t.j_payload) IN ('NULL', 'STRING')) THEN 'payload must be a string holding the JSON text'
                   WHEN NOT (t.j_business_key IS NULL OR JSON_TYPE(t.j_business_key) IN ('NULL', 'STRING')) THEN 'business_key must be a string'
                   WHEN NOT (t.j_concurrency_key IS NULL OR JSON_TYPE(t.j_concurrency_key) IN ('NULL', 'STRING')) THEN 'concurrency_key must be a string'
                   WHEN NOT (t.j_priority IS NULL OR JSON_TYPE(t.j_priority) = 'NULL' OR t.j_priority REGEXP '^-?[0-9]+$') THEN 'priority must be an integer'
                   WHEN NOT (t.j_max_attempts IS NULL OR JSON_TYPE(t.j_max_attempts) = 'NULL' OR t.j_max_attempts REGEXP '^-?[0-9]+$') THEN 'max_attempts must be an integer'
                   WHEN NOT (t.j_retry_base_ms IS NULL OR JSON_TYPE(t.j_retry_base_ms) = 'NULL' OR t.j_retry_base_ms REGEXP '^-?[0-9]+$') THEN 'retry_base_ms must be an integer'
                   WHEN NOT (t.j_retry_max_ms IS NULL OR JSON_TYPE(t.j_retry_max_ms) = 'NULL' OR t.j_retry_max_ms REGEXP '^-?[0-9]+$') THEN 'retry_max_ms must be an integer'
                   WHEN NOT (t.j_retry_unknown IS NULL OR JSON_TYPE(t.j_retry_unknown) IN ('NULL', 'BOOLEAN')) THEN 'retry_unknown must be true or false'
                   WHEN NOT (t.j_deadline_seconds IS NULL OR JSON_TYPE(t.j_deadline_seconds) = 'NULL' OR t.j_deadline_seconds REGEXP '^-?[0-9]+$') THEN 'deadline_seconds must be an integer'
                   WHEN NOT (t.j_run_at IS NULL OR JSON_TYPE(t.j_run_at) IN ('NULL', 'STRING')) OR (t.j_run_at IS NOT NULL AND JSON_TYPE(t.j_run_at) = 'STRING' AND t.run_at IS NULL)
                     THEN 'run_at must be a UTC time, a string YYYY-MM-DD HH:MM:SS[.ffffff]'
                   WHEN NOT (t.j_delay_seconds IS NULL OR JSON_TYPE(t.j_delay_seconds) = 'NULL' OR t.j_delay_seconds REGEXP '^-?[0-9]+$') THEN 'delay_seconds must be an integer'
                   WHEN NOT (t.j_debounce_seconds IS NULL OR JSON_TYPE(t.j_debounce_seconds) = 'NULL' OR t.j_debounce_seconds REGEXP '^-?[0-9]+$') THEN 'debounce_seconds must be an integer'
                   WHEN NOT (t.j_debounce_max_seconds IS NULL OR JSON_TYPE(t.j_debounce_max_seconds) = 'NULL' OR t.j_debounce_max_seconds REGEXP '^-?[0-9]+$') THEN 'debounce_max_seconds must be an integer'
                   -- What is left once every field is removed (a member that is null counts too:
                   -- MySQL's JSON_TABLE reads it as SQL NULL, as it reads a missing one).
                   WHEN JSON_LENGTH(JSON_REMOVE(t.task, '$.idempotency_key', '$.queue_id', '$.handler',
                          '$.handler_version', '$.payload_version', '$.payload', '$.business_key',
                          '$.concurrency_key', '$.priority', '$.max_attempts', '$.retry_base_ms', '$.retry_max_ms',
                          '$.retry_unknown', '$.deadline_seconds', '$.run_at', '$.delay_seconds',
                          '$.debounce_seconds', '$.debounce_max_seconds')) > 0
                     THEN 'the task has a member that is not a field of a submit'
                   ELSE COALESCE(COALESCE(CASE
       WHEN t.handler IS NULL OR CHAR_LENGTH(t.handler) NOT BETWEEN 1 AND 191
         THEN 'handler must be 1-191 characters'
       WHEN t.handler_version IS NULL OR CHAR_LENGTH(t.handler_version) NOT BETWEEN 1 AND 64
         THEN 'handler_version must be 1-64 characters'
       WHEN t.payload_version IS NULL OR CHAR_LENGTH(t.payload_version) NOT BETWEEN 1 AND 64
         THEN 'payload_version must be 1-64 characters'
       WHEN t.payload IS NULL OR NOT JSON_VALID(t.payload) THEN 'payload must be valid JSON'
       WHEN CHAR_LENGTH(t.business_key) > 191 THEN 'business_key must be at most 191 characters'
  END, CASE WHEN t.concurrency_key IS NULL THEN 'concurrency_key must be a string or omitted, not null'
       WHEN t.concurrency_key = '' THEN NULL
       WHEN NOT HEX(t.concurrency_key) REGEXP '^([0-7][0-9A-F]|C[2-9A-F][89AB][0-9A-F]|D[0-9A-F][89AB][0-9A-F]|E0[AB][0-9A-F][89AB][0-9A-F]|E[1-9A-CEF][89AB][0-9A-F][89AB][0-9A-F]|ED[89][0-9A-F][89AB][0-9A-F]|F0[9AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F[1-3][89AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F48[0-9A-F][89AB][0-9A-F][89AB][0-9A-F])*$'
         THEN 'concurrency_key must be valid UTF-8'
       WHEN CHAR_LENGTH(CONVERT(t.concurrency_key USING utf8mb4)) > 191
         THEN 'concurrency_key must be at most 191 characters'
       WHEN HEX(t.concurrency_key) REGEXP '^(..)*(0[0-9A-F]|1[0-9A-F]|7F|C2[89][0-9A-F])'
         THEN 'concurrency_key must not contain control characters'
       WHEN HEX(t.concurrency_key) REGEXP '^(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)'
            OR HEX(t.concurrency_key) REGEXP '(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)$'
         THEN 'concurrency_key must not start or end with whitespace'
  END, CASE
       WHEN t.priority NOT BETWEEN 0 AND 9 THEN 'priority must be between 0 and 9'
       WHEN t.max_attempts NOT BETWEEN 1 AND 1000 THEN 'max_attempts must be between 1 and 1000'
       WHEN t.retry_base_ms NOT BETWEEN 0 AND 86400000 OR t.retry_max_ms NOT BETWEEN 0 AND 604800000
         THEN 'retry_base_ms must be 0-86400000 and retry_max_ms 0-604800000'
       WHEN t.retry_unknown NOT IN (0, 1) THEN 'retry_unknown must be true or false'
       WHEN t.deadline_seconds NOT BETWEEN 0 AND 315360000
         THEN 'deadline_seconds must be between 1 and 315360000'
  END), CASE
       WHEN t.run_at IS NOT NULL AND t.delay_seconds IS NOT NULL
         THEN 'run_at and delay_seconds cannot both be given'
       WHEN t.delay_seconds NOT BETWEEN 0 AND 31536000
         THEN 'delay_seconds must be between 0 and 31536000 (365 days)'
       WHEN t.run_at > DATE_ADD(v_now, INTERVAL 31536000 SECOND)
         THEN 'run_at must be at most 365 days ahead'
       WHEN t.debounce_seconds NOT BETWEEN 0 AND 31536000
         THEN 'debounce_seconds must be between 0 and 31536000 (365 days)'
       WHEN t.debounce_max_seconds NOT BETWEEN 0 AND 31536000
         THEN 'debounce_max_seconds must be between 0 and 31536000 (365 days)'
       WHEN t.debounce_seconds > 0 AND t.concurrency_key = ''
         THEN 'debounce_seconds needs a concurrency_key'
       WHEN t.debounce_seconds > 0 AND (t.run_at IS NOT NULL OR t.delay_seconds > 0)
         THEN 'debounce_seconds cannot be combined with run_at or delay_seconds'
       WHEN t.debounce_max_seconds > 0 AND t.debounce_max_seconds < COALESCE(t.debounce_seconds, 0)
         THEN 'debounce_max_seconds must be at least debounce_seconds'
       WHEN t.debounce_max_seconds > 0 AND NOT COALESCE(t.debounce_seconds, 0) > 0
         THEN 'debounce_max_seconds needs debounce_seconds'
  END)
                 END AS bad
            FROM (SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          IF(JSON_TYPE(j.j_idempotency_key) = 'STRING', LEFT(CAST(j.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          IF(JSON_TYPE(j.j_handler) = 'STRING', LEFT(j.s_handler, 192), IF(j.j_handler IS NULL, NULL, NULL)) AS handler,
          IF(JSON_TYPE(j.j_handler_version) = 'STRING', LEFT(j.s_handler_version, 65), IF(j.j_handler_version IS NULL, NULL, NULL)) AS handler_version,
          IF(JSON_TYPE(j.j_payload_version) = 'STRING', LEFT(j.s_payload_version, 65), IF(j.j_payload_version IS NULL, NULL, NULL)) AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE(IF(JSON_TYPE(j.j_business_key) = 'STRING', LEFT(j.s_business_key, 192), IF(j.j_business_key IS NULL, NULL, NULL)), '') AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE(CASE WHEN j.j_priority REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_priority AS SIGNED)
                                    WHEN j.j_priority REGEXP '^-?[0-9]+$' THEN -1 END, 5) AS priority,
          COALESCE(CASE WHEN j.j_max_attempts REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_max_attempts AS SIGNED)
                                    WHEN j.j_max_attempts REGEXP '^-?[0-9]+$' THEN -1 END, 3) AS max_attempts,
          COALESCE(CASE WHEN j.j_retry_base_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_base_ms AS SIGNED)
                                    WHEN j.j_retry_base_ms REGEXP '^-?[0-9]+$' THEN -1 END, 1000) AS retry_base_ms,
          COALESCE(CASE WHEN j.j_retry_max_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_max_ms AS SIGNED)
                                    WHEN j.j_retry_max_ms REGEXP '^-?[0-9]+$' THEN -1 END, 300000) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   0) AS retry_unknown,
          COALESCE(CASE WHEN j.j_deadline_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_deadline_seconds AS SIGNED)
                                    WHEN j.j_deadline_seconds REGEXP '^-?[0-9]+$' THEN -1 END, 0) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          CASE WHEN j.j_delay_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_delay_seconds AS SIGNED)
                                    WHEN j.j_delay_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS delay_seconds,
          CASE WHEN j.j_debounce_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_seconds AS SIGNED)
                                    WHEN j.j_debounce_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_seconds,
          CASE WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_max_seconds AS SIGNED)
                                    WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key', s_queue_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.queue_id',
            s_handler LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler', s_handler_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler_version',
            s_payload_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload_version', s_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
            s_business_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.business_key', s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key',
            s_run_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.run_at',
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t) b;
  SET v_bad_item = COALESCE(CAST(LEFT(v_bad, 4) AS UNSIGNED), v_count + 1), v_bad = SUBSTRING(v_bad, 5);
  queues: BEGIN
    DECLARE EXIT HANDLER FOR SQLSTATE '45000'
    BEGIN
      GET DIAGNOSTICS CONDITION 1 v_message = MESSAGE_TEXT;
      SET v_message = LEFT(CONCAT(SUBSTRING_INDEX(v_message, ': ', 1), ': tasks[', v_i - 1, ']: ',
                                  SUBSTRING(v_message, LOCATE(': ', v_message) + 2)), 128);
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
    END;
    -- The usual batch, all valid on one queue, needs no list of its queues.
    IF v_bad IS NULL AND v_queue_least = v_queue_greatest THEN
      SET v_i = 1, v_queue_id = v_queue_least;
      CALL orbit_auth_queue_check(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_namespace_id,
                                  v_credential_id);
      SET v_last_queue = v_queue_id;
      LEAVE queues;
    END IF;
    OPEN c_queues;
    each_queue: LOOP
      SET v_queue_id = NULL;
      fetch_queue: BEGIN
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_queue_id = NULL;
        FETCH c_queues INTO v_queue_id, v_i;
      END fetch_queue;
      IF v_queue_id IS NULL THEN
        LEAVE each_queue;
      END IF;
      CALL orbit_auth_queue_check(p_token_hash, 'tasks:submit', v_queue_id, v_application_id, v_namespace_id,
                                  v_credential_id);
      SET v_last_queue = v_queue_id;
    END LOOP each_queue;
    CLOSE c_queues;
  END queues;
  IF v_bad IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: tasks[', v_bad_item - 1, ']: ', v_bad);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;

  -- What the result cannot read from the rows: which tasks were replays, took the charge of a
  -- task they replaced, or cancelled a key holder. Rare, so most calls write no row of it. A
  -- table, not a variable: it is read by joins. Created once per connection and kept empty
  -- between calls: its rows are written in this call's transaction (InnoDB: a call that fails
  -- rolls them back) and deleted after the result (re-creating it on every call made every
  -- statement that names it be prepared again). Its comments double no quote: MySQL lists this
  -- body with such a quote undoubled, which `orbit migrate verify` would report as a change.
  CREATE TEMPORARY TABLE IF NOT EXISTS orbit_submit_outcome (
    item INT NOT NULL COMMENT 'the position of the task in p_tasks, from 1',
    replayed TINYINT NOT NULL COMMENT '1 = the receipt of its key existed: the original task is returned',
    replaced TINYINT NOT NULL COMMENT '1 = it took the quota charge of the task it replaced',
    cancelled BIGINT UNSIGNED NOT NULL COMMENT 'the attempt of the key holder that a cancel_running policy ended for it; 0 = none',
    PRIMARY KEY (item)
  ) ENGINE=InnoDB COMMENT='the tasks of orbit_task_submit_many whose outcome the rows do not show';

  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET v_i = 0, v_batched = 0;
  -- A batch sent again (a client's retry) has a receipt for its first task: it is not created
  -- whole only to be undone, but goes task by task, each replayed without being created. One
  -- probe a call.
  SELECT MAX(b.idempotency_key) INTO v_idempotency_key FROM (SELECT k.item, IF(JSON_TYPE(k.j_idempotency_key) = 'STRING', LEFT(CAST(k.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key
       FROM JSON_TABLE(p_tasks, '$[0]' COLUMNS (item FOR ORDINALITY, j_idempotency_key JSON PATH '$.idempotency_key',
              s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key')) k
      LIMIT 1000) b;
  SELECT COUNT(*) INTO v_resent
    FROM orbit_idempotency i
   WHERE i.application_id = v_application_id AND i.idempotency_key = v_idempotency_key;
  -- A keyed batch on one queue whose namespace has no key policy, without debounce, can be
  -- created whole (orbit_task_create_keyed_many; v_policies stays NULL otherwise).
  IF v_keyed > 0 AND v_debounced = 0 AND v_queue_least = v_queue_greatest THEN
    SELECT COUNT(*) INTO v_policies FROM orbit_key_policy p WHERE p.namespace_id = v_namespace_id;
  END IF;
  IF NOT v_resent AND (v_keyed = 0 OR v_policies = 0) THEN
    SAVEPOINT orbit_submit_batch;
    IF v_keyed = 0 THEN
      -- No concurrency key: every task waits for nothing but its run_at, so the batch is created
      -- by one insert of the rows orbit_task_create writes for an unkeyed task
      -- (m::task_insert_values: lane 'ready', or 'scheduled' until a run_at ahead; the
      -- connection's quota slot; no debounce, which needs a key); ORDER BY numbers the tasks in
      -- input order. Under innodb_autoinc_lock_mode 1 the insert holds the table's AUTO-INC lock
      -- for the statement; it still costs less mariadbd CPU a task than an INSERT ... VALUES a
      -- task, which does not (BENCHMARKS.md).
      INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                              payload, business_key, concurrency_key, resource_id, state, lane, priority,
                              max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
                              deadline_at, idempotency_key, plan_id, plan_version, quota_slot, created_at, updated_at,
                              debounce_seconds, debounce_until)
      SELECT v_application_id, q.namespace_id, q.id, t.handler, t.handler_version, t.payload_version,
             t.payload, t.business_key, '', 0, 'WAITING', IF(t.effective_run_at > v_now, 'scheduled', 'ready'), t.priority,
             t.max_attempts, 0, t.retry_base_ms, t.retry_max_ms, t.retry_unknown, t.effective_run_at,
             IF(t.deadline_seconds > 0, DATE_ADD(v_now, INTERVAL t.deadline_seconds SECOND), NULL),
             t.idempotency_key, 0, 0, v_slot, v_now, v_now,
             0, NULL
        FROM (SELECT t.*, CASE WHEN t.run_at IS NOT NULL THEN GREATEST(t.run_at, v_now)
            WHEN t.delay_seconds > 0 THEN DATE_ADD(v_now, INTERVAL t.delay_seconds SECOND)
            ELSE v_now END AS effective_run_at FROM (SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          IF(JSON_TYPE(j.j_idempotency_key) = 'STRING', LEFT(CAST(j.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          IF(JSON_TYPE(j.j_handler) = 'STRING', LEFT(j.s_handler, 192), IF(j.j_handler IS NULL, NULL, NULL)) AS handler,
          IF(JSON_TYPE(j.j_handler_version) = 'STRING', LEFT(j.s_handler_version, 65), IF(j.j_handler_version IS NULL, NULL, NULL)) AS handler_version,
          IF(JSON_TYPE(j.j_payload_version) = 'STRING', LEFT(j.s_payload_version, 65), IF(j.j_payload_version IS NULL, NULL, NULL)) AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE(IF(JSON_TYPE(j.j_business_key) = 'STRING', LEFT(j.s_business_key, 192), IF(j.j_business_key IS NULL, NULL, NULL)), '') AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE(CASE WHEN j.j_priority REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_priority AS SIGNED)
                                    WHEN j.j_priority REGEXP '^-?[0-9]+$' THEN -1 END, 5) AS priority,
          COALESCE(CASE WHEN j.j_max_attempts REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_max_attempts AS SIGNED)
                                    WHEN j.j_max_attempts REGEXP '^-?[0-9]+$' THEN -1 END, 3) AS max_attempts,
          COALESCE(CASE WHEN j.j_retry_base_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_base_ms AS SIGNED)
                                    WHEN j.j_retry_base_ms REGEXP '^-?[0-9]+$' THEN -1 END, 1000) AS retry_base_ms,
          COALESCE(CASE WHEN j.j_retry_max_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_max_ms AS SIGNED)
                                    WHEN j.j_retry_max_ms REGEXP '^-?[0-9]+$' THEN -1 END, 300000) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   0) AS retry_unknown,
          COALESCE(CASE WHEN j.j_deadline_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_deadline_seconds AS SIGNED)
                                    WHEN j.j_deadline_seconds REGEXP '^-?[0-9]+$' THEN -1 END, 0) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          CASE WHEN j.j_delay_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_delay_seconds AS SIGNED)
                                    WHEN j.j_delay_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS delay_seconds,
          CASE WHEN j.j_debounce_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_seconds AS SIGNED)
                                    WHEN j.j_debounce_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_seconds,
          CASE WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_max_seconds AS SIGNED)
                                    WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key', s_queue_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.queue_id',
            s_handler LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler', s_handler_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler_version',
            s_payload_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload_version', s_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
            s_business_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.business_key', s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key',
            s_run_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.run_at',
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t) t
        JOIN orbit_queue q ON q.id = t.queue_id
       ORDER BY t.item;
      SET v_first = LAST_INSERT_ID();
    ELSE
      -- What orbit_task_create does for each task (every key of one holder, its tasks queued),
      -- done for the whole batch, set-based, its keys' rows locked first.
      CALL orbit_task_create_keyed_many(p_tasks, v_application_id, v_namespace_id, v_last_queue, v_slot, v_now,
                                        v_first);
    END IF;
    -- Then every receipt at once, each written once, with its task: the new rows (ids from
    -- v_first on) are read first, each probing the batch's keys. A consistent read: INSERT ...
    -- SELECT in READ COMMITTED locks no row it reads, where an UPDATE joined to the new rows
    -- would wait for every concurrent submit's new rows past v_first. A task's key is unique to
    -- its application, so only this call's tasks carry these keys (a task whose receipt was
    -- purged with it is older), and the read stops at the batch's last task (LIMIT), before
    -- concurrent submits' later rows. The insert waits for a concurrent first submit of any key,
    -- and fails whole when one exists or repeats in the batch: then the batch is undone (its
    -- keys' rows stay locked) and each task takes the single submit's path below.
    INSERT INTO orbit_idempotency (application_id, idempotency_key, request_hash, task_id, created_at)
    SELECT v_application_id, b.idempotency_key, b.request_hash, o.id, v_now
      FROM orbit_task o
      STRAIGHT_JOIN (SELECT t.idempotency_key, UNHEX(SHA2(CONCAT_WS(',', HEX(t.queue_id), HEX(t.handler), HEX(t.handler_version),
                 HEX(t.payload_version), SHA2(t.payload, 256), HEX(t.business_key), HEX(t.concurrency_key),
                 t.priority, t.max_attempts, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
                 t.deadline_seconds, CONCAT('run_at=', t.run_at), CONCAT('delay_seconds=', NULLIF(t.delay_seconds, 0)),
                 CONCAT('debounce_seconds=', NULLIF(t.debounce_seconds, 0)),
                 CONCAT('debounce_max_seconds=', NULLIF(t.debounce_max_seconds, 0))), 256)) AS request_hash
                       FROM (SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          IF(JSON_TYPE(j.j_idempotency_key) = 'STRING', LEFT(CAST(j.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          IF(JSON_TYPE(j.j_handler) = 'STRING', LEFT(j.s_handler, 192), IF(j.j_handler IS NULL, NULL, NULL)) AS handler,
          IF(JSON_TYPE(j.j_handler_version) = 'STRING', LEFT(j.s_handler_version, 65), IF(j.j_handler_version IS NULL, NULL, NULL)) AS handler_version,
          IF(JSON_TYPE(j.j_payload_version) = 'STRING', LEFT(j.s_payload_version, 65), IF(j.j_payload_version IS NULL, NULL, NULL)) AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE(IF(JSON_TYPE(j.j_business_key) = 'STRING', LEFT(j.s_business_key, 192), IF(j.j_business_key IS NULL, NULL, NULL)), '') AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE(CASE WHEN j.j_priority REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_priority AS SIGNED)
                                    WHEN j.j_priority REGEXP '^-?[0-9]+$' THEN -1 END, 5) AS priority,
          COALESCE(CASE WHEN j.j_max_attempts REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_max_attempts AS SIGNED)
                                    WHEN j.j_max_attempts REGEXP '^-?[0-9]+$' THEN -1 END, 3) AS max_attempts,
          COALESCE(CASE WHEN j.j_retry_base_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_base_ms AS SIGNED)
                                    WHEN j.j_retry_base_ms REGEXP '^-?[0-9]+$' THEN -1 END, 1000) AS retry_base_ms,
          COALESCE(CASE WHEN j.j_retry_max_ms REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_retry_max_ms AS SIGNED)
                                    WHEN j.j_retry_max_ms REGEXP '^-?[0-9]+$' THEN -1 END, 300000) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   0) AS retry_unknown,
          COALESCE(CASE WHEN j.j_deadline_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_deadline_seconds AS SIGNED)
                                    WHEN j.j_deadline_seconds REGEXP '^-?[0-9]+$' THEN -1 END, 0) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          CASE WHEN j.j_delay_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_delay_seconds AS SIGNED)
                                    WHEN j.j_delay_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS delay_seconds,
          CASE WHEN j.j_debounce_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_seconds AS SIGNED)
                                    WHEN j.j_debounce_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_seconds,
          CASE WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]{1,9}$' THEN CAST(j.j_debounce_max_seconds AS SIGNED)
                                    WHEN j.j_debounce_max_seconds REGEXP '^-?[0-9]+$' THEN -1 END AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key', s_queue_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.queue_id',
            s_handler LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler', s_handler_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.handler_version',
            s_payload_version LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload_version', s_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
            s_business_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.business_key', s_concurrency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.concurrency_key',
            s_run_at LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.run_at',
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t
                      LIMIT 1000) b ON b.idempotency_key = o.idempotency_key
     WHERE o.id >= v_first AND o.application_id = v_application_id
     ORDER BY o.id
     LIMIT v_count;
    IF v_duplicate THEN
      ROLLBACK TO SAVEPOINT orbit_submit_batch;
      SET v_resent = 1;
    ELSE
      SET v_batched = 1, v_created = v_count;
    END IF;
  END IF;
  IF NOT v_batched THEN
    OPEN c_tasks;
    WHILE v_i < v_count DO
      FETCH c_tasks INTO v_idempotency_key, v_queue_id, v_handler, v_handler_version, v_payload_version, v_payload,
                         v_business_key, v_concurrency_key, v_priority, v_max_attempts, v_retry_base_ms,
                         v_retry_max_ms, v_retry_unknown, v_deadline_seconds, v_run_at, v_debounce_seconds,
                         v_debounce_max_seconds, v_hash;
      SET v_i = v_i + 1, v_duplicate = 0, v_replayed = 0, v_replaced = 0, v_cancelled = 0;
      -- The queue was authorised above; a change of queue looks up its namespace (v_last_queue and
      -- v_namespace_id still hold the last queue checked).
      IF v_queue_id <> v_last_queue THEN
        SELECT q.namespace_id, q.id INTO v_namespace_id, v_last_queue
          FROM orbit_queue q
         WHERE q.id = v_queue_id;
      END IF;
      -- As orbit_task_submit: the task first, then its receipt, written once; a receipt found
      -- taken undoes the task, and the same request is a replay. In a batch sent again, a
      -- receipt that exists is read first, and its task is not created (a plain read: a
      -- concurrent first submit's receipt is met by the insert).
      IF v_resent THEN
        SELECT COUNT(*) INTO v_duplicate
          FROM orbit_idempotency i
         WHERE i.application_id = v_application_id AND i.idempotency_key = v_idempotency_key;
      END IF;
      IF NOT v_duplicate THEN
        SAVEPOINT orbit_submit_task;
        CALL orbit_task_create(v_application_id, v_namespace_id, v_queue_id, v_handler, v_handler_version,
                               v_payload_version, v_payload, v_business_key, v_concurrency_key, v_priority,
                               v_max_attempts, v_retry_base_ms, v_retry_max_ms, v_retry_unknown,
                               v_deadline_seconds, v_run_at, v_debounce_seconds, v_debounce_max_seconds,
                               v_idempotency_key, 0 /* p_plan_id */, 0 /* p_plan_version */, v_now,
                               0 /* p_charge */, v_task_id, v_replaced, v_refusal, v_cancelled);
        IF v_refusal = 'KEY_BUSY' THEN
          SELECT COUNT(*) INTO v_duplicate
            FROM orbit_idempotency i
           WHERE i.application_id = v_application_id AND i.idempotency_key = v_idempotency_key
             FOR UPDATE;
        ELSE
          INSERT INTO orbit_idempotency (application_id, idempotency_key, request_hash, task_id, created_at)
          VALUES (v_application_id, v_idempotency_key, v_hash, v_task_id, v_now);
        END IF;
        IF v_refusal = 'KEY_BUSY' AND NOT v_duplicate THEN
          ROLLBACK;
          SET v_message = CONCAT('KEY_BUSY: tasks[', v_i - 1,
                                 ']: the concurrency_key is held or has waiting tasks, and its key policy rejects new tasks');
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
        END IF;
        IF v_duplicate THEN
          ROLLBACK TO SAVEPOINT orbit_submit_task;
          SET v_replaced = 0, v_cancelled = 0;
        END IF;
      END IF;
      IF v_duplicate THEN
        SELECT i.request_hash, i.task_id INTO v_existing_hash, v_task_id
          FROM orbit_idempotency i
         WHERE i.application_id = v_application_id AND i.idempotency_key = v_idempotency_key
           FOR UPDATE;
        IF v_existing_hash <> v_hash THEN
          ROLLBACK;
          SET v_message = CONCAT('IDEMPOTENCY_CONFLICT: tasks[', v_i - 1,
                                 ']: this idempotency_key was used with a different request');
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
        END IF;
        SET v_replayed = 1;
      ELSE
        SET v_created = v_created + (v_replaced = 0);
      END IF;
      IF v_replayed OR v_replaced <> 0 OR v_cancelled <> 0 THEN
        SET v_noted = 1;
        INSERT INTO orbit_submit_outcome (item, replayed, replaced, cancelled)
        VALUES (v_i, v_replayed, v_replaced <> 0, IF(v_replayed, 0, v_cancelled));
      END IF;
    END WHILE;
    CLOSE c_tasks;
  END IF;
  -- The incomplete-task quota, last and once: the whole batch on the connection's slot when it
  -- fits that slot's share; otherwise each new task exactly, in input order (orbit_task_charge),
  -- and the first that does not fit fails the call.
  IF v_created > 0 THEN
    UPDATE orbit_application_quota q
     SET q.incomplete_tasks = q.incomplete_tasks + v_created, q.updated_at = v_now
   WHERE q.application_id = v_application_id AND q.slot = v_slot
     AND q.checked_max_incomplete_tasks = q.max_incomplete_tasks
     AND q.incomplete_tasks + v_created <= (q.max_incomplete_tasks DIV 16 + (q.slot < q.max_incomplete_tasks % 16));
    IF ROW_COUNT() = 0 THEN
      SET v_i = 0;
      OPEN c_charged;
      WHILE v_i < v_created DO
        FETCH c_charged INTO v_item;
        SET v_i = v_i + 1;
        CALL orbit_task_charge(v_application_id, v_now, v_charged);
        IF NOT v_charged THEN
          ROLLBACK;
          SET v_message = CONCAT('QUOTA_EXCEEDED: tasks[', v_item - 1,
                                 ']: the application has reached its incomplete-task quota');
          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
        END IF;
      END WHILE;
      CLOSE c_charged;
    END IF;
  END IF;
  COMMIT;

  -- Each task through its key's receipt (a receipt lives as long as its task: orbit_task_purge),
  -- the batch first (STRAIGHT_JOIN: never the application's receipts).
  SELECT CAST(b.item - 1 AS SIGNED) AS item, CAST(COALESCE(x.replayed, 0) AS SIGNED) AS replayed,
         t.id AS task_id, t.queue_id, t.namespace_id, t.state,
         t.handler, t.handler_version, t.payload_version, t.payload,
         t.business_key, t.concurrency_key, t.priority, t.max_attempts,
         t.attempt_count, t.retry_base_ms, t.retry_max_ms, t.retry_unknown,
         t.run_at, t.deadline_at,
         IF(t.blocked_reason = '' AND t.lane = 'scheduled' AND t.state = 'WAITING',
            IF(t.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            t.blocked_reason) AS blocked_reason, t.output, t.error,
         t.current_attempt_id, t.plan_id, t.plan_version, t.created_at,
         t.updated_at, t.finished_at,
         CAST(COALESCE(x.cancelled, 0) AS UNSIGNED) AS cancelled_attempt_id,
         CAST(COALESCE(c.session_id, 0) AS UNSIGNED) AS cancelled_session_id
    FROM (SELECT k.item, IF(JSON_TYPE(k.j_idempotency_key) = 'STRING', LEFT(CAST(k.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, j_idempotency_key JSON PATH '$.idempotency_key',
              s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key')) k
      LIMIT 1000) b
    STRAIGHT_JOIN orbit_idempotency i ON i.application_id = v_application_id AND i.idempotency_key = b.idempotency_key
    JOIN orbit_task t ON t.id = i.task_id
    LEFT JOIN orbit_submit_outcome x ON x.item = b.item
    LEFT JOIN orbit_attempt c ON c.id = x.cancelled
   ORDER BY b.item;
  IF v_noted THEN
    DELETE FROM orbit_submit_outcome WHERE item IN (SELECT b.item FROM (SELECT k.item, IF(JSON_TYPE(k.j_idempotency_key) = 'STRING', LEFT(CAST(k.s_idempotency_key AS BINARY), 256), NULL) AS idempotency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, j_idempotency_key JSON PATH '$.idempotency_key',
              s_idempotency_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key')) k
      LIMIT 1000) b);
  END IF;
END$$
DELIMITER ;

-- ---- orbit_task_validate (from templates/procedures/orbit_task_validate.sql) ----
-- orbit_task_validate: Internal: apply the defaults of a task definition and enforce its rules.
--
-- One set of rules for everything that defines a task: orbit_task_submit, orbit_plan_create and
-- orbit_plan_version_create (orbit_task_submit_many checks a batch with the same expression,
-- m::task_definition_error). The defaultable fields are INOUT: NULL becomes the default, so the
-- caller stores (and hashes) the effective values. Checked in parameter order; the first broken
-- rule is reported, its message starting with the field name.
-- Parameters:
--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none
-- Result: none.
-- Signals: INVALID_ARGUMENT (naming the field).
-- Locks: none.
DROP PROCEDURE IF EXISTS orbit_task_validate;
DELIMITER $$
CREATE PROCEDURE orbit_task_validate(
  IN p_handler TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_handler_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload_version TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  INOUT p_business_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  IN p_concurrency_key BLOB,
  INOUT p_priority INT,
  INOUT p_max_attempts INT,
  INOUT p_retry_base_ms BIGINT,
  INOUT p_retry_max_ms BIGINT,
  INOUT p_retry_unknown TINYINT,
  INOUT p_deadline_seconds BIGINT)
  DETERMINISTIC NO SQL
BEGIN
  DECLARE v_message VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  SET p_business_key = COALESCE(p_business_key, ''),
      p_priority = COALESCE(p_priority, 5),
      p_max_attempts = COALESCE(p_max_attempts, 3),
      p_retry_base_ms = COALESCE(p_retry_base_ms, 1000),
      p_retry_max_ms = COALESCE(p_retry_max_ms, 300000),
      p_retry_unknown = COALESCE(p_retry_unknown, 0),
      p_deadline_seconds = COALESCE(p_deadline_seconds, 0);
  SET v_message = COALESCE(CASE
       WHEN p_handler IS NULL OR CHAR_LENGTH(p_handler) NOT BETWEEN 1 AND 191
         THEN 'handler must be 1-191 characters'
       WHEN p_handler_version IS NULL OR CHAR_LENGTH(p_handler_version) NOT BETWEEN 1 AND 64
         THEN 'handler_version must be 1-64 characters'
       WHEN p_payload_version IS NULL OR CHAR_LENGTH(p_payload_version) NOT BETWEEN 1 AND 64
         THEN 'payload_version must be 1-64 characters'
       WHEN p_payload IS NULL OR NOT JSON_VALID(p_payload) THEN 'payload must be valid JSON'
       WHEN CHAR_LENGTH(p_business_key) > 191 THEN 'business_key must be at most 191 characters'
  END, CASE WHEN p_concurrency_key IS NULL THEN 'concurrency_key must be a string or omitted, not null'
       WHEN p_concurrency_key = '' THEN NULL
       WHEN NOT HEX(p_concurrency_key) REGEXP '^([0-7][0-9A-F]|C[2-9A-F][89AB][0-9A-F]|D[0-9A-F][89AB][0-9A-F]|E0[AB][0-9A-F][89AB][0-9A-F]|E[1-9A-CEF][89AB][0-9A-F][89AB][0-9A-F]|ED[89][0-9A-F][89AB][0-9A-F]|F0[9AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F[1-3][89AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F48[0-9A-F][89AB][0-9A-F][89AB][0-9A-F])*$'
         THEN 'concurrency_key must be valid UTF-8'
       WHEN CHAR_LENGTH(CONVERT(p_concurrency_key USING utf8mb4)) > 191
         THEN 'concurrency_key must be at most 191 characters'
       WHEN HEX(p_concurrency_key) REGEXP '^(..)*(0[0-9A-F]|1[0-9A-F]|7F|C2[89][0-9A-F])'
         THEN 'concurrency_key must not contain control characters'
       WHEN HEX(p_concurrency_key) REGEXP '^(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)'
            OR HEX(p_concurrency_key) REGEXP '(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)$'
         THEN 'concurrency_key must not start or end with whitespace'
  END, CASE
       WHEN p_priority NOT BETWEEN 0 AND 9 THEN 'priority must be between 0 and 9'
       WHEN p_max_attempts NOT BETWEEN 1 AND 1000 THEN 'max_attempts must be between 1 and 1000'
       WHEN p_retry_base_ms NOT BETWEEN 0 AND 86400000 OR p_retry_max_ms NOT BETWEEN 0 AND 604800000
         THEN 'retry_base_ms must be 0-86400000 and retry_max_ms 0-604800000'
       WHEN p_retry_unknown NOT IN (0, 1) THEN 'retry_unknown must be true or false'
       WHEN p_deadline_seconds NOT BETWEEN 0 AND 315360000
         THEN 'deadline_seconds must be between 1 and 315360000'
  END);
  IF v_message IS NOT NULL THEN
    SET v_message = CONCAT('INVALID_ARGUMENT: ', v_message);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END$$
DELIMITER ;

-- orbit:catalog
-- The catalog rows come last: a script that stops early never claims its version.
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_application', 1, 'a645b4cae1e4093d773f4964f022e0c6777d0c2ad53dfd5edbbde32881758991', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_application_quota', 2, '588ab088b279e8c27faefeba574f58143b8fba51b100c2c21434f7b5f098a7ea', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_attempt', 2, 'd8067e5e8f94c8307db1260c5fb3c8252f88f9c729040902d36e9cf5229bcd5c', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_credential', 2, 'd78d1cf611d4d1d58020f229a890e3ebda26c12c6de73c6dbf12f356ddc359ef', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_credential_scope', 1, '25b671400ad575be781068519eabb8300eea2f1069dc96a1ea08b88e22dd2ec7', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_environment', 1, '532f3974e8e2e22e847d3e7d7b40ebf05669ad39871ca25719f9fd40eec235e1', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_extension', 2, 'da0e9244bd005340e8d6c377a34aa06f024cb7567576186ceca033587f1cd2b7', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_idempotency', 1, '39f63ce90ae9847dee9c49a012379485803406b77048cfdd176bd087c9756a1b', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_key_policy', 2, '2909ec7c7a8969a3e5cc06bff1f73672e95db0e1bfe644ad4da6a16bafdf2772', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_key_rate_log', 2, '98278b14dfc934a154075efcb36596fa45d226983d89605d76dcb2909897ca57', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_key_slot', 2, '9569e16cf4356ca6ab39549a0729958e2dd7a495917790e6e62b5f839208bd47', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_namespace', 1, 'd741e13933f4df14231f86faf60e59282dd22d3d5a7dbdd0ecf25d15e3e1691a', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_plan', 2, '0130702457762ecb79159152fbcb679838c448088887e3690152d6ca9f771023', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_plan_fire', 2, 'e7bd293c72afbd3a61aecd399e88c917f7c5ee6dc2801506ea2fc573db841bd1', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_plan_version', 2, '79681d825d6d77c756e8b1e5c482952dddbe913beef7f0805022e30940e50af5', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_queue', 2, 'd9c99ed2120160610fce19243eaa73ea2bb58924f02456debbb4cf7800e6c000', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_resource', 2, '6d3a1f62e620c5c095b26f2321221ee567fa56ed73b5bcb295e5c22544e861b8', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_session', 2, '25b6680067ef28ac08492b1052cfe440dde7123a7b6a8d277ab3c38e2b353430', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_session_queue', 1, 'd42706a287d7fd03bd8f1c6975bf515ab69e6bd94be695fcff6b6a850f8698b3', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_task', 2, '51a9af27a056ed2034de3fff958450c440e27d92e269f3fc05a535d442a920de', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_task_event', 2, '2a839cf0317b270166bbb4c37cb03d0ae3520d5f8385f0a75e6f51545fec291e', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_worker', 1, '526721269b2ffd7ebfc6a11e7578c5b246758f08e4f82dc5f915207bbdf3b326', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_admin_bootstrap', 2, '7a6b2dfd502a76d8b777c6a30ff264feaa40c946b39a4775730403e52969c6c6', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_attempt_charge', 2, 'c05e525322261b1486060e36b46526a12af7ffe33c10cb1836dabc0cdf0b18ed', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_attempt_end', 2, 'a70bd46a5264d42c6598d6f0ecb3ea6932616fff74ebc459803616dbd02153b0', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_attempt_finish', 2, '6c9ab3f7d78cc191f52183afb25be6668cc4ccd0d32557987215f1c5dccef37a', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_attempt_get', 1, '86e7f13e2f21849dcfaaa14741b39e5d4c46e5202ef255dc178a714c20806732', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_attempt_grant', 2, 'ec38ce4a35e11d8a96ca95eb80afc81e90ca9615db751a6aabff1989a2df7142', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_attempt_list', 1, '448c91f2b6a2b71af4869116329194d8867365dbdcdabc67a62efae2c7f97738', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_attempt_renew', 2, '3fa7c3b90117bcaef94f8bddcefdabcc1a2462c10f380cf1bfb234cee230ec68', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_attempt_start', 2, 'a078db137036c95ceff892d0b923d2984f5b5e9e9c6c9c81fefb861b540beaa8', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_auth_check', 2, 'c38d3ba1538c9a5d467373b8e4fa680d999fdd94765a5a7f3ee7f96fab586938', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_auth_queue_check', 2, '6639ca3aec945cbd1eafad2d5f9175e1b0dec74e4159a17762c2f2fcc6654f73', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_auth_queue_visible', 2, '2ff5ea93829c8df031ac205dc8e9c0782c169a0e6467f52ff4fecc24521644aa', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_credential_check', 1, '5e302231f5fa23c6880149105bfac1387c1119bd1db6de7af5c8a40013d7698f', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_credential_create', 2, '7fdf96cdafe082b99e129bb3f312d61c801247c7deb47e309b91c31ef5345bc3', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_credential_list', 2, '859642b67403c749555a12bd69b73ea89780e643c255e65c6326cb9cadbb59cb', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_credential_revoke', 2, '28f76a97988514cbea4f89bc4c5b8558d52143c0a742175e4e896f9002d0bd74', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_extension_version', 1, '6f21742aa37b7d0d18e36df36bf0d5e9c70c06475c9201cdc5654eb2c1014feb', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_get', 2, 'cb6c1dad86b5e262912c4152d78b3a3fb4f6459e808f7d2e1a4b64556d285a31', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_list', 2, '03c35edcded3b749e0b28772015b9030eef80992ecf1d51a946c095d6e0a68f5', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_metrics', 2, 'dc124b949ee4592a61a2650dc867b3a07f15dd21061493ba6f233e78b9e8c213', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_policy_delete', 2, '66c24090d7676b513443ce90df4a7c813f45441c83ddde10d638088698d5728d', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_policy_list', 2, 'af34e7a6c2252f8b443a9e76920529c99033c79e12054dbd18302850990087d0', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_policy_set', 2, '0a6b193050f202623eeb9dc51c01d738c11bc2230935b40ce10c96127c942c6b', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_promote', 2, '87f7d11b77a852e88b305408b65975a63ba1646ca32bdd7650e2312b12467db0', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_promote_all', 2, 'cfa1a72d6141189ff17b36975c7240c3f3c0d3038bca601e43077ee443a1a081', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_rate_check', 2, '58046b7f9799dd4ac5e76fbb0f4861790fe353ba3f08bdf70d2feacfeb18798f', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_release', 2, '8d4e0823703c756a3fbc5287343979ddf784bb8fb8e0ac6bec7d771c7dcc220f', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_key_validate', 1, '964746141b2ec3e131ff7eafd52b78304893cb52e44f6c6a8fe5898c3badfa48', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_lease_recover', 2, 'c3537f50ea3c3eea8f70860bb3126ee615d926a594f741aada970a6b9ebbc04a', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_metrics_snapshot', 2, 'db5166b17baa8cbde84266124170169364a04a6fb637d94c989fbc60ae00668f', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_plan_create', 2, '9bf8029eb91909d0477c6211e4b52e80432f0955abfbbbd41ab67ef3c7b4c77c', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_plan_fire_due', 2, '0f267cb12a28a768971105dbe2591e333ee673fd2940140ca070a647a5978090', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_plan_get', 2, '361804f352eff2c3e5a33f7c12ab58980f8b5cce81d7fc1c378444be4f4dc9dc', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_plan_list', 2, '864579f10fa0b307a0de2d1d00c748ae27a1e0b096c5b25f44df8724c58a19a0', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_plan_schedule_due', 2, '9ad4eb02277326e5b19811fce29c3ad2f2d89c430ae404f06ec79e1b840bee1d', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_plan_schedule_set', 2, 'c1327eb98fe5c181e838f670f2250177149b9894202148b262d7f5aba473b544', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_plan_set_paused', 2, 'c7e5dfd4fb357980f33b59480a8e8eddde1ca83deaf7652214dc170dc567a25d', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_plan_version_create', 2, '707070e517a784d99fefa332c63f444eec083ca1e32a4ecd4e6759e523ad7bcc', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_queue_create', 2, 'b502d7bd17c133b76c707b5707835cacfd2ff26781e2b34baaf6843ff2bd43a3', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_queue_get', 2, 'd5ebf844d44a6669ec8a434c9ed1e22e6c3bf7e3557784587982c772947cb604', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_queue_list', 2, '3e2626e0969d517869878036b6f40c75b52d6daa3e3a35e87f1272d127ed548c', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_queue_set_paused', 2, '3c0c0fc0d51527c02d6a71ea00e30cccf6242404da4484cf6ce8ac4180081e99', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_queue_set_retention', 2, '0c28cd7978230e0a9b9e578f7e6e0710fa275191486e567762cc6a76be4a0bf0', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_session_attempts', 2, 'aa9a8adc7950bc10b4091562c03a8ee0501974cbafe4fc5203f6c208b41b9df2', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_session_close', 1, '2498158279c20de6ef27a7f4e6e066ed118b23d551b08bbf1ec05ccbe1391edf', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_session_open', 1, '0db44ac69beced2b2f326108f96736d1b77d50d2c48f3cf1468a56bf5a1abcb6', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_session_sweep', 2, '60e6b4c303f3f5d389c11cad89ffe2275f2ce022f28c208bc77eb8298fc76c2d', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_cancel', 2, '8ac34848059d011b9572033424485e7fed0815de5afe20d6763e94a8d956ba61', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_charge', 2, '21b1b5b134217e48e3b82c8a4978b9d8d2934428e700fe74d35c37a1bbeaecf9', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_claim', 2, 'd601c6a49ff92a26d86a977979ad272f8068445e2afd99f73e35e486047aff56', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_create', 2, 'a1ef4eef66dc5a3b76865cbdff38e1ba3d4a8a3c8c9f24646026eeedb6d3abc2', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_create_keyed_many', 2, 'ec727ec610247d028a4b3300d8e4cdbe1534323b59a6b534c5209777b9ee3ce5', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_event_list', 2, 'f318c98641032222c43d00495820bf09b9d957509e5dab45845d72cc197d5c6c', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_expire_due', 2, 'e0c9a5d7e7542bbece5030c7aa8553d05215fff4d7c9532dd8313e4561b99e6c', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_get', 2, '933459ba122f493d4914798e09b31b7dd6f3a0c90d32643249271ccfc18df716', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_grant', 2, '813a0b5756fac2a58e0dedd63ce4bce22c73a54dd55f187caf411cf1b536062c', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_list', 2, 'c9a209507be5086be77381d07bac30a0c0bbdf33cf3b3452c07eabdfff4d9e55', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_place', 2, '22aab3eb578404bea18033d80a6bcfa25cdccf964211568eb63b33a90ebf0f2f', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_promote_due', 2, 'a008d724a538d3798ff26fe8e537a33bdc2ba2744d106d0e1fb6b04edfa32164', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_purge', 2, 'f4ac58de200d3ef78601cec127b078c642ece35e58397ce537b627f8e51cd3fc', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_ready_queues', 2, 'fd28a0211e4f98caffb2c13e825cf0b301429cd4057bc540d324b721e21eddd4', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_resolve', 2, 'b12477c6af5dc36d9c65af4b497ccf0efef55de518ca73c2af0ce1892cd2e104', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_submit', 2, '60855292dedc025fd3c513c00869558bfb9f77533e263290d72364a955db6ba3', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_submit_many', 2, 'c08546a91c489a03fe9c3a719c1e0afc414c3b56ed696b7b447d6cf16967d9ad', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_task_validate', 2, '9e48bd1f68c6ec090bb509a5204e6255b521c5910f3d2b9ff2c3d6f4376cee42', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('migration', '000001_install', 1, '51750701534980f65e1531b01b62623ecd7e906ac31c7abe4214c273de91dd5e', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('migration', '000002_upgrade', 2, '448e09d845d4e82c9787cb70b822ba6e4fdaecbbd2642a6434e415bfaec55717', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('extension', 'orbit', 2, '448e09d845d4e82c9787cb70b822ba6e4fdaecbbd2642a6434e415bfaec55717', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
