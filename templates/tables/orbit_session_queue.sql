-- orbit_session_queue: The queues a session consumes from (from hello.queue_ids).
CREATE TABLE IF NOT EXISTS orbit_session_queue (
  session_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_session.id',
  queue_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'orbit_queue.id',
  position INT UNSIGNED NOT NULL COMMENT 'order in hello, 0 to n-1 without gaps (a repeated queue id takes none); the claim starts at a rotating position',
  PRIMARY KEY (session_id, queue_id),
  UNIQUE KEY ux_session_queue_position (session_id, position)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Queues of worker sessions';
