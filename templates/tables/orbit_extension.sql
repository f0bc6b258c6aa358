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
