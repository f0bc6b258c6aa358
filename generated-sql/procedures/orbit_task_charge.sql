-- GENERATED FILE: do not edit. Rendered by `orbit gen` from templates/procedures/orbit_task_charge.sql.
-- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.

-- orbit_task_charge: Internal: charge one new task to its application's incomplete-task quota, in the caller's transaction.
--
-- The one exact charge (see orbit_application_quota): the connection's slot when it stays within
-- its share, otherwise, under a lock on every slot and an exact check of the total, the lowest slot
-- below its share; the task row records the slot it charged. Used by orbit_task_create for each
-- task, and by orbit_task_submit_many for each task of a batch that its connection's slot cannot
-- take whole.
-- Parameters: p_application_id; p_task_id (the new task, inserted with the connection's slot);
--   p_now.
-- Out: o_charged (1 = charged; 0 = the quota is full: nothing was charged, the caller rolls back).
-- Result: none. Signals: none.
-- Locks: orbit_application_quota slot rows: the connection's slot; or, when it cannot take the
--   charge alone, every slot of the application in ascending slot order (one locking read).
DROP PROCEDURE IF EXISTS orbit_task_charge;
DELIMITER $$
CREATE PROCEDURE orbit_task_charge(
  IN p_application_id BIGINT UNSIGNED,
  IN p_task_id BIGINT UNSIGNED,
  IN p_now DATETIME(6),
  OUT o_charged TINYINT)
  MODIFIES SQL DATA
BEGIN
  DECLARE v_slot TINYINT UNSIGNED DEFAULT (CONNECTION_ID() % 16);
  DECLARE v_limit BIGINT UNSIGNED;
  DECLARE v_total BIGINT UNSIGNED;
  DECLARE v_over INT;
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
    SET v_slot = NULL;
    IF v_total < v_limit THEN
      SELECT q.slot INTO v_slot
        FROM orbit_application_quota q
       WHERE q.application_id = p_application_id
         AND q.incomplete_tasks < (q.max_incomplete_tasks DIV 16 + (q.slot < q.max_incomplete_tasks % 16))
       ORDER BY q.slot
       LIMIT 1;
    END IF;
    IF v_slot IS NULL THEN
      SET o_charged = 0;
    ELSE
      UPDATE orbit_application_quota q
         SET q.incomplete_tasks = q.incomplete_tasks + 1, q.updated_at = p_now
       WHERE q.application_id = p_application_id AND q.slot = v_slot;
      UPDATE orbit_task t SET t.quota_slot = v_slot WHERE t.id = p_task_id;
      SELECT COUNT(*) INTO v_over
        FROM orbit_application_quota q
       WHERE q.application_id = p_application_id
         AND q.incomplete_tasks > (q.max_incomplete_tasks DIV 16 + (q.slot < q.max_incomplete_tasks % 16));
      IF v_over = 0 THEN
        -- Every slot is within its share of the current limit: one-slot charges may resume.
        UPDATE orbit_application_quota q
           SET q.checked_max_incomplete_tasks = q.max_incomplete_tasks
         WHERE q.application_id = p_application_id;
      END IF;
    END IF;
  END IF;
END$$
DELIMITER ;
