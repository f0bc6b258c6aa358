-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/tables/orbit_task_event.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

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
