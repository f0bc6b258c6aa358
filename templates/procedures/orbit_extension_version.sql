-- orbit_extension_version: Report the installed extension version (what `serve` and /readyz check).
--
-- Parameters: none.
-- Result (one row): version BIGINT UNSIGNED (0 when the catalog has no extension row),
--                   checksum CHAR(64) (of the migration that installed it; '' when none).
-- Signals: none.
-- Locks: none (a plain consistent read).
CREATE PROCEDURE orbit_extension_version()
  READS SQL DATA
BEGIN
  SELECT CAST(COALESCE(MAX(e.version), 0) AS UNSIGNED) AS version,
         CAST(COALESCE(MAX(e.checksum), '') AS CHAR(64)) AS checksum
    FROM orbit_extension e
   WHERE e.kind = 'extension' AND e.name = 'orbit';
END
