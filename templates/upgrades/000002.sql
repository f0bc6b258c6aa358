-- 000002: orbit 0.2 (extension 2), upgrading orbit 0.1.0 (extension 1).
--
-- Data rewritten: none. Every task, attempt, permit, session, plan, idempotency receipt and
-- credential keeps its row as it is; only the orbit_extension catalog rows of the changed objects
-- are rewritten (by the migration's catalog section, which gen writes).
--
-- Tables altered, each by a statement that is safe to run again (a `migrate up` stopped part-way
-- is completed by running it again):
-- - orbit_extension.version: the column comment now says what the value means once upgrades
--   exist: the extension version that last created or changed the object, not the one that first
--   installed it. A comment change only: no row is copied and nothing waits on it.
--
-- Procedures re-created (gen lists them from the templates' difference; no signature changes):
-- their SQL comments no longer carry benchmark timings or development history. BENCHMARKS.md holds
-- the figures.
--
-- Rules for this file: one statement per change, each idempotent as written (ALTER TABLE ...
-- MODIFY with the full new definition, CREATE ... IF NOT EXISTS, data rewrites whose WHERE skips
-- rows already rewritten); a comment before each saying why; no DROP of data without saying where
-- it went.

-- The column's definition exactly as templates/tables/orbit_extension.sql now writes it.
ALTER TABLE orbit_extension
  MODIFY version INT UNSIGNED NOT NULL COMMENT 'extension version that last created or changed the object (migration: its own version)';
