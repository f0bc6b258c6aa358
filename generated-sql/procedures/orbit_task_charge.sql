-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_charge.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

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
