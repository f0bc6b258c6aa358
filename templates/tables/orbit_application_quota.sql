-- orbit_application_quota: Per-application limits and live counters, in {{ c.quota_slots }} slot rows per application.
-- Slots 0..{{ c.quota_slots - 1 }} are all created with the application (orbit_admin_bootstrap); concurrent
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
  slot TINYINT UNSIGNED NOT NULL COMMENT 'quota slot, 0..{{ c.quota_slots - 1 }}; the counters below count the charges made to this slot',
  max_active_attempts INT UNSIGNED NOT NULL DEFAULT 10000 COMMENT 'application limit on LEASED + RUNNING attempts (same in every slot row)',
  checked_max_active_attempts INT UNSIGNED NOT NULL DEFAULT 10000 COMMENT 'the max_active_attempts every slot was last seen within its share of; one-slot charges only while equal',
  active_attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'LEASED + RUNNING attempts charged to this slot',
  max_incomplete_tasks BIGINT UNSIGNED NOT NULL DEFAULT 10000000 COMMENT 'application limit on accepted, non-terminal tasks (same in every slot row)',
  checked_max_incomplete_tasks BIGINT UNSIGNED NOT NULL DEFAULT 10000000 COMMENT 'the max_incomplete_tasks every slot was last seen within its share of; one-slot charges only while equal',
  incomplete_tasks BIGINT NOT NULL DEFAULT 0 COMMENT 'accepted, non-terminal tasks charged to this slot less those given back to it (signed: only the sum counts)',
  updated_at DATETIME(6) NOT NULL COMMENT 'UTC time of the last counter change',
  PRIMARY KEY (application_id, slot)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Application quotas and their counters, in slots';
