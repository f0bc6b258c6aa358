-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_task.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

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
