{#- Shared fragments for procedure templates. Imported with {% import "_macros.sql" as m %}. -#}

{#- Raise a business error: SQLSTATE 45000 with a stable code before the first colon, which the
    Rust side maps onto the HTTP/WS error envelope (src/db/error.rs). Keep messages < 128 chars. -#}
{% macro raise(code, message) %}SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{ code }}: {{ message }}'{% endmacro %}

{#- Every procedure that writes runs one transaction: any SQL error rolls it back and is
    re-raised unchanged, so the caller never sees a half-applied change. -#}
{% macro rollback_on_error() %}DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END{% endmacro %}

{#- READ COMMITTED: plain reads see the latest committed rows (not a snapshot from before a lock
    was taken), and no gap locks, which a queue's insert/claim traffic would otherwise fight over. -#}
{% macro begin() %}SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION{% endmacro %}

{#- The task columns every task-returning procedure ends with, in this order (src/db/task.rs
    reads them by position). -#}
{% macro task_columns(t) %}{{ t }}.id AS task_id, {{ t }}.queue_id, {{ t }}.namespace_id, {{ t }}.state,
         {{ t }}.handler, {{ t }}.handler_version, {{ t }}.payload_version, {{ t }}.payload,
         {{ t }}.business_key, {{ t }}.concurrency_key, {{ t }}.priority, {{ t }}.max_attempts,
         {{ t }}.attempt_count, {{ t }}.retry_base_ms, {{ t }}.retry_max_ms, {{ t }}.retry_unknown,
         {{ t }}.run_at, {{ t }}.deadline_at, {{ t }}.blocked_reason, {{ t }}.output, {{ t }}.error,
         {{ t }}.current_attempt_id, {{ t }}.plan_id, {{ t }}.plan_version, {{ t }}.created_at,
         {{ t }}.updated_at, {{ t }}.finished_at{% endmacro %}

{#- The task columns' documentation, for procedure headers. -#}
{% macro task_columns_doc() %}--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.{% endmacro %}

{#- The queue columns every queue-returning procedure ends with (src/db/queue.rs reads them by
    position). -#}
{% macro queue_columns(q) %}{{ q }}.id AS queue_id, {{ q }}.namespace_id, {{ q }}.name, {{ q }}.paused,
         {{ q }}.max_active_attempts, {{ q }}.created_at, {{ q }}.updated_at{% endmacro %}
