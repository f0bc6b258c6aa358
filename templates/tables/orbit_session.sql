-- orbit_session: WebSocket sessions of workers: what they consume and how much.
-- ix_session_seen serves the sweep of silent sessions (orbit_session_sweep); ix_session_credential
-- lets a revocation close the credential's sessions (orbit_credential_revoke).
CREATE TABLE IF NOT EXISTS orbit_session (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'session id',
  worker_row_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_worker.id',
  worker_id VARCHAR(191) {{ c.utf8 }} NOT NULL COMMENT 'the worker identity (copied for history)',
  credential_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_credential.id that opened it',
  application_id BIGINT UNSIGNED NOT NULL COMMENT 'orbit_application.id',
  node VARCHAR(191) {{ c.utf8 }} NOT NULL DEFAULT '' COMMENT 'the serve process holding the socket',
  capacity INT UNSIGNED NOT NULL COMMENT 'attempts the session runs at once',
  concurrency_keys TINYINT(1) NOT NULL COMMENT '1 = receives keyed tasks (the worker registration)',
  start_on_assign TINYINT(1) NOT NULL DEFAULT 0 COMMENT '1 = grants start at once (RUNNING), no task.start round trip',
  handlers TEXT {{ c.utf8 }} NOT NULL COMMENT 'JSON array of handler names it runs; [] = any',
  state ENUM('active','draining','closed') NOT NULL COMMENT 'draining = no new assignments',
  claim_seq BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'claim batches so far; tags the attempts of each',
  scan_position INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'orbit_session_queue.position of the queue that scan_priority and scan_task_id describe',
  scan_priority TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'with scan_task_id: the last candidate the last scan of that queue took out of its ready lane (see orbit_task_grant)',
  scan_task_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the id of that candidate; 0 = none',
  connected_at DATETIME(6) NOT NULL COMMENT 'UTC hello time',
  last_seen_at DATETIME(6) NOT NULL COMMENT 'UTC time the worker was last heard from (hello, lease.renew at most once per lease); orbit_session_sweep closes an open session silent for too long',
  closed_at DATETIME(6) NULL DEFAULT NULL COMMENT 'UTC close time; NULL = open',
  PRIMARY KEY (id),
  KEY ix_session_worker (worker_row_id, state),
  KEY ix_session_seen (state, last_seen_at),
  KEY ix_session_credential (credential_id, state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Worker sessions';
