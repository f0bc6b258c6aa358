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
-- orbit_application_quota: Per-application limits and the live counters checked against them.
-- The active-attempt counter covers LEASED and RUNNING attempts (a keyed attempt counts once
-- although it holds two permits); the incomplete-task counter covers every accepted task that has
-- not reached a terminal state (NEEDS_REVIEW included). Locked FOR UPDATE last in every
-- transaction that changes a counter, so lock order stays acyclic.
CREATE TABLE IF NOT EXISTS orbit_application_quota (
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  max_active_attempts INT UNSIGNED NOT NULL DEFAULT 10000 COMMENT 'limit on LEASED + RUNNING attempts',
  active_attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'current LEASED + RUNNING attempts',
  max_incomplete_tasks BIGINT UNSIGNED NOT NULL DEFAULT 10000000 COMMENT 'limit on accepted, non-terminal tasks',
  incomplete_tasks BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'current accepted, non-terminal tasks',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last counter change',
  PRIMARY KEY (application_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Application quotas and their counters';

-- ---- orbit_attempt (from templates/tables/orbit_attempt.sql) ----
-- orbit_attempt: Attempts: one per grant of a task to a session, with its lease and token.
-- An attempt holds its permits from granted_at until released_at (NULL while it holds them).
-- concurrency_token is the key's token granted with this attempt (0 for a task without a key).
CREATE TABLE IF NOT EXISTS orbit_attempt (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'attempt id',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id',
  attempt_no INT UNSIGNED NOT NULL COMMENT '1 for the first attempt of the task',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id',
  resource_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_resource.id whose permit it holds; 0 = no key',
  concurrency_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'fencing token granted with the key permit; 0 = no key',
  session_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_session.id it was granted to',
  worker_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the worker identity of that session',
  claim_seq BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the session claim batch that granted it',
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
  PRIMARY KEY (id),
  UNIQUE KEY ux_attempt_task (task_id, attempt_no),
  KEY ix_attempt_session (session_id, claim_seq),
  KEY ix_attempt_resource (resource_id, id)
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
  scopes SET('queues:manage','tasks:submit','tasks:read','workers:connect','workers:consume') NOT NULL COMMENT 'granted scopes',
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
-- (checksum of the object's file under generated-sql/). Written last by every migration, so a
-- script that fails part-way never claims its version.
CREATE TABLE IF NOT EXISTS orbit_extension (
  kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'extension, migration, table or procedure',
  name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'object, migration or extension name',
  version INT UNSIGNED NOT NULL COMMENT 'extension version that installed this row',
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

-- ---- orbit_key_permit (from templates/tables/orbit_key_permit.sql) ----
-- orbit_key_permit: Resource-key permits: at most one per key, enforced by the primary key.
-- Granted with the attempt in the claim transaction and deleted in the transaction that releases
-- it, so the database itself refuses a second holder of one key.
CREATE TABLE IF NOT EXISTS orbit_key_permit (
  resource_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_resource.id: one permit per (namespace, key)',
  attempt_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_attempt.id holding the permit',
  concurrency_token BIGINT UNSIGNED NOT NULL COMMENT 'the token granted with it',
  granted_at DATETIME(6) NOT NULL COMMENT 'UTC grant time',
  expires_at DATETIME(6) NOT NULL COMMENT 'UTC lease expiry, kept equal to the attempt lease',
  PRIMARY KEY (resource_id),
  UNIQUE KEY ux_key_permit_attempt (attempt_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Resource-key permits of active attempts';

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
CREATE TABLE IF NOT EXISTS orbit_plan (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'plan id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id the tasks go to',
  name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'name, unique within the namespace',
  current_version INT UNSIGNED NOT NULL COMMENT 'orbit_plan_version.version that fires',
  paused TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1 = does not fire',
  next_fire_at DATETIME(6) NOT NULL COMMENT 'UTC time of the next scheduled slot',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last change',
  PRIMARY KEY (id),
  UNIQUE KEY ux_plan_name (namespace_id, name),
  KEY ix_plan_due (paused, next_fire_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Plans (schedules)';

-- ---- orbit_plan_fire (from templates/tables/orbit_plan_fire.sql) ----
-- orbit_plan_fire: One row per fired plan slot: makes firing idempotent per (plan, scheduled time).
CREATE TABLE IF NOT EXISTS orbit_plan_fire (
  plan_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_plan.id',
  scheduled_for DATETIME(6) NOT NULL COMMENT 'UTC slot time',
  version INT UNSIGNED NOT NULL COMMENT 'orbit_plan_version.version that fired',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id created',
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
  schedule_spec VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'interval seconds, or a cron expression (UTC)',
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
-- A queue permit (orbit_queue_permit) is held by every LEASED or RUNNING attempt; when
-- max_active_attempts > 0 the claim counts the queue's permits under this row's lock.
CREATE TABLE IF NOT EXISTS orbit_queue (
  id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT '32 lowercase hex digits, random',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  environment_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_environment.id',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'name, unique within the namespace',
  paused TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1 = no new claims from this queue; in-flight attempts continue',
  max_active_attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'queue permits available; 0 = unlimited',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last change',
  PRIMARY KEY (id),
  UNIQUE KEY ux_queue_name (namespace_id, name),
  KEY ix_queue_application (application_id, environment_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Queues';

-- ---- orbit_queue_permit (from templates/tables/orbit_queue_permit.sql) ----
-- orbit_queue_permit: Queue permits: one per LEASED or RUNNING attempt, deleted on release.
-- Every active attempt holds exactly one, so ix_queue_permit_expiry is also the index lease
-- recovery scans for expired attempts.
CREATE TABLE IF NOT EXISTS orbit_queue_permit (
  attempt_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_attempt.id holding the permit',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  expires_at DATETIME(6) NOT NULL COMMENT 'UTC lease expiry, kept equal to the attempt lease',
  PRIMARY KEY (attempt_id),
  KEY ix_queue_permit_queue (queue_id),
  KEY ix_queue_permit_expiry (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Queue permits of active attempts';

-- ---- orbit_resource (from templates/tables/orbit_resource.sql) ----
-- orbit_resource: One row per (namespace, concurrency_key): the highest token ever granted.
-- Never deleted or reset, or tokens would stop being monotonic. Every claim and release of the
-- key locks this row FOR UPDATE and advances version; a grant sets highest_token + 1 and is
-- refused at 2^64 - 1 rather than wrapping.
CREATE TABLE IF NOT EXISTS orbit_resource (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'surrogate id referenced by tasks, attempts and permits',
  namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_namespace.id',
  concurrency_key VARBINARY(764) NOT NULL COMMENT 'the key as exact UTF-8 bytes (no collation, no padding)',
  highest_token BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'largest token granted; 0 = never granted',
  version BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'advanced by every claim and release',
  created_at DATETIME(6) NOT NULL COMMENT 'UTC creation time',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last grant or release',
  PRIMARY KEY (id),
  UNIQUE KEY ux_resource_key (namespace_id, concurrency_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Resource keys and their token high-water marks';

-- ---- orbit_session (from templates/tables/orbit_session.sql) ----
-- orbit_session: WebSocket sessions of workers: what they consume and how much.
CREATE TABLE IF NOT EXISTS orbit_session (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'session id',
  worker_row_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_worker.id',
  worker_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'the worker identity (copied for history)',
  credential_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_credential.id that opened it',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  node VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' COMMENT 'the serve process holding the socket',
  capacity INT UNSIGNED NOT NULL COMMENT 'attempts the session runs at once',
  concurrency_keys TINYINT(1) NOT NULL COMMENT '1 = receives keyed tasks (the worker registration)',
  handlers TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'JSON array of handler names it runs; [] = any',
  state ENUM('active','draining','closed') NOT NULL COMMENT 'draining = no new assignments',
  claim_seq BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'claim batches so far; tags the attempts of each',
  connected_at DATETIME(6) NOT NULL COMMENT 'UTC hello time',
  last_seen_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last message',
  closed_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC close time; NULL = open',
  PRIMARY KEY (id),
  KEY ix_session_worker (worker_row_id, state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Worker sessions';

-- ---- orbit_session_queue (from templates/tables/orbit_session_queue.sql) ----
-- orbit_session_queue: The queues a session consumes from (from hello.queue_ids).
CREATE TABLE IF NOT EXISTS orbit_session_queue (
  session_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_session.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id',
  position INT UNSIGNED NOT NULL COMMENT 'order in hello; the claim starts at a rotating position',
  PRIMARY KEY (session_id, queue_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Queues of worker sessions';

-- ---- orbit_task (from templates/tables/orbit_task.sql) ----
-- orbit_task: Accepted tasks: their frozen submission, state, and dispatch lane.
-- `lane` keeps the claim cheap (SPEC §4 "Claim query"): only 'ready' tasks sit in the range the
-- claim scans (ix_task_dispatch). A keyed task whose key is held waits in 'blocked' and is not in
-- that range, so a million blocked tasks cost the claim nothing; releasing a key promotes one
-- blocked task per queue of that key (ix_task_key). Retries wait in 'scheduled' until run_at.
-- States: WAITING (lanes ready, blocked, scheduled), LEASED, RUNNING, RETRY_WAIT (scheduled),
-- NEEDS_REVIEW, and the terminal SUCCEEDED, FAILED, CANCELLED, EXPIRED (lane none).
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
  PRIMARY KEY (id),
  KEY ix_task_dispatch (queue_id, lane, priority, id),
  KEY ix_task_key (resource_id, lane, queue_id, priority, id),
  KEY ix_task_due (lane, run_at),
  KEY ix_task_deadline (lane, deadline_at),
  KEY ix_task_list (queue_id, state, id),
  KEY ix_task_business (namespace_id, business_key, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Tasks';

-- ---- orbit_task_event (from templates/tables/orbit_task_event.sql) ----
-- orbit_task_event: Task history: one row per state change, with the attempt and token involved.
CREATE TABLE IF NOT EXISTS orbit_task_event (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'event id (commit order per task)',
  task_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_task.id',
  attempt_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_attempt.id involved; 0 = none',
  event VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'what happened, e.g. submitted, granted, released',
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

-- orbit:catalog
-- The catalog rows come last: a script that stops early never claims its version.
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_application', 1, 'a645b4cae1e4093d773f4964f022e0c6777d0c2ad53dfd5edbbde32881758991', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_application_quota', 1, 'd84fb59e34a85ebc95826db4ab2acbf99cb49b837968be58054aba8fddbaae80', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_attempt', 1, '51cfe687f013bf3a7c81716cfc59c3f2adffda8daf0e30c1916aa9e07c53a749', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_credential', 1, 'a64428db721d127f6bf86fb5e336dbd3c8b14290fc48a7a1f292b7102be2c055', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_credential_scope', 1, '25b671400ad575be781068519eabb8300eea2f1069dc96a1ea08b88e22dd2ec7', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_environment', 1, '532f3974e8e2e22e847d3e7d7b40ebf05669ad39871ca25719f9fd40eec235e1', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_extension', 1, 'f68b7ad98dd126859fc07f4cf8ee28b595eeb467f798556a1babb2fead69e2db', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_idempotency', 1, '39f63ce90ae9847dee9c49a012379485803406b77048cfdd176bd087c9756a1b', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_key_permit', 1, 'f3405c5f50efd8c316c630d53d531995349982caf6087fa19eb7383f97d7f3e4', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_namespace', 1, 'd741e13933f4df14231f86faf60e59282dd22d3d5a7dbdd0ecf25d15e3e1691a', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_plan', 1, 'a2f8f02b47fef4c54aad61a9ebf9d5bb1aea7e9a20284906ab72f1bfad090d49', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_plan_fire', 1, '330653d2cc1d11b390460d3dcac930f41c3ac14239bde74c3c0af74a25db70c8', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_plan_version', 1, 'e0e9bf089bd0a6acac97e514740f6ef8b11778d2f1cd83d6dd09a11570040947', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_queue', 1, '302f05b00f12002f7f986454435a58f9aa8c0ac7ac9be352feb9fa51185236a4', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_queue_permit', 1, 'd27c1c37129df11fd45a31b3feceaf9f67292f4fb4f3972349ea5de2ae500308', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_resource', 1, '8f2c2ea5e9a3780095537951228c2874815c7ca0dad40a256f8f50488c836644', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_session', 1, '42e4733806cc8d698a982d3ad78bf3cb564fd2ae97b49cb1628f8351f45613c8', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_session_queue', 1, '51979317e0e917620d59fcb0163802fab072b8dda185a6c1e209d1cf020b1302', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_task', 1, '6d02889794f3bbafbf538197922ebe8fca746875343e800f3afd845ae2da8bb1', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_task_event', 1, 'b1059844059410baa79f05636cc54c467e6b51a7c9cce437ce7f433b03272a85', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('table', 'orbit_worker', 1, '526721269b2ffd7ebfc6a11e7578c5b246758f08e4f82dc5f915207bbdf3b326', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('procedure', 'orbit_extension_version', 1, '6f21742aa37b7d0d18e36df36bf0d5e9c70c06475c9201cdc5654eb2c1014feb', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('migration', '000001_install', 1, '262d2c7b9de64858d3272484ede5f05c4938b3518af00ab3cc237534e85b8925', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('extension', 'orbit', 1, 'df5412caf6d76401fe87c3c80e050e301eb17e5be3c7c19b1f49dd1dbbbc775b', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), installed_at = VALUES(installed_at);
