{#- Shared fragments for procedure templates. Imported with {% import "_macros.sql" as m %}. -#}

{#- Raise a business error: SQLSTATE 45000 with a stable code before the first colon, which the
    Rust side maps onto the HTTP/WS error envelope (src/db/error.rs). Keep messages < 128 chars. -#}
{% macro raise(code, message) %}SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{ code }}: {{ message }}'{% endmacro %}

{#- The active credential a token hash finds, the queue p_queue_id in its application and
    environment, and whether the credential is granted that queue (its whole namespace,
    queue_id '', or the queue listed), INTO the six named variables: one statement, each table an
    eq_ref probe (orbit_auth_queue_check, orbit_auth_queue_visible; a single submit runs it on
    every task). With no such credential every variable is NULL; with no such queue the
    namespace is NULL and the grant 0. The grant is m::queue_in_scope's rule, as two primary-key
    probes instead of an EXISTS (cheaper for the one queue of a call). -#}
{% macro credential_queue_read(id, application, environment, scopes, namespace, granted) %}SELECT c.id, c.application_id, c.environment_id, c.scopes, q.namespace_id,
         whole.credential_id IS NOT NULL OR listed.credential_id IS NOT NULL
    INTO {{ id }}, {{ application }}, {{ environment }}, {{ scopes }}, {{ namespace }}, {{ granted }}
    FROM orbit_credential c
    LEFT JOIN orbit_queue q
      ON q.id = p_queue_id AND q.application_id = c.application_id AND q.environment_id = c.environment_id
    LEFT JOIN orbit_credential_scope whole
      ON whole.credential_id = c.id AND whole.namespace_id = q.namespace_id AND whole.queue_id = ''
    LEFT JOIN orbit_credential_scope listed
      ON listed.credential_id = c.id AND listed.namespace_id = q.namespace_id AND listed.queue_id = p_queue_id
   WHERE c.token_hash = p_token_hash AND c.revoked_at IS NULL{% endmacro %}

{#- What authentication requires of the credential a token hash found (orbit_auth_check,
    orbit_auth_queue_check, orbit_auth_queue_visible): one, active (`id`: its id, NULL when
    none), whose scopes (`scopes`) hold `scope`. The caller declares v_message VARCHAR(128). -#}
{% macro credential_checked(id, scopes, scope) %}IF {{ id }} IS NULL THEN
    {% call raise("UNAUTHENTICATED", "unknown or revoked bearer token") %};
  END IF;
  IF FIND_IN_SET({{ scope }}, {{ scopes }}) = 0 THEN
    SET v_message = CONCAT('PERMISSION_DENIED: the credential lacks the ', {{ scope }}, ' scope');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF{% endmacro %}

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

{#- The task columns every task-returning procedure ends with, in this order (src/db/tasks.rs
    reads them by position). -#}
{% macro task_columns(t) %}{{ t }}.id AS task_id, {{ t }}.queue_id, {{ t }}.namespace_id, {{ t }}.state,
         {{ t }}.handler, {{ t }}.handler_version, {{ t }}.payload_version, {{ t }}.payload,
         {{ t }}.business_key, {{ t }}.concurrency_key, {{ t }}.priority, {{ t }}.max_attempts,
         {{ t }}.attempt_count, {{ t }}.retry_base_ms, {{ t }}.retry_max_ms, {{ t }}.retry_unknown,
         {{ t }}.run_at, {{ t }}.deadline_at,
         IF({{ t }}.blocked_reason = '' AND {{ t }}.lane = 'scheduled' AND {{ t }}.state = 'WAITING',
            IF({{ t }}.debounce_seconds > 0, 'DEBOUNCED: waits for run_at; a later debounced submit for its key replaces it',
               'DELAYED: waits for run_at'),
            {{ t }}.blocked_reason) AS blocked_reason, {{ t }}.output, {{ t }}.error,
         {{ t }}.current_attempt_id, {{ t }}.plan_id, {{ t }}.plan_version, {{ t }}.created_at,
         {{ t }}.updated_at, {{ t }}.finished_at{% endmacro %}

{#- The columns of a grant, as every procedure that hands attempts to a worker returns them
    (orbit_task_claim, orbit_attempt_finish, orbit_session_attempts; src/db/workers.rs Grant::read). -#}
{% macro grant_columns(a, t) %}{{ a }}.id AS attempt_id, {{ a }}.attempt_no, {{ a }}.lease_expires_at, {{ a }}.concurrency_token,
         {{ a }}.key_slot, {% call task_columns(t) %}{% endmacro %}

{#- The rows of the grant orbit_task_grant just made (its p_granted, p_attempt_id and p_seq in
    v_granted, v_granted_id and v_seq), each led by the `lead` columns: a grant of one (every
    hand-off of a hot key) by its attempt's primary key, cheaper than the ix_attempt_session
    lookup; several in attempt order
    (ix_attempt_session's order: no sort). Opens an IF: the caller adds its ELSE for no grant and
    the END IF. -#}
{% macro grants_select(lead) %}IF v_granted = 1 THEN
    SELECT {{ lead }}{% call grant_columns("a", "t") %}
      FROM orbit_attempt a
      JOIN orbit_task t ON t.id = a.task_id
     WHERE a.id = v_granted_id;
  ELSEIF v_granted > 1 THEN
    SELECT {{ lead }}{% call grant_columns("a", "t") %}
      FROM orbit_attempt a
      JOIN orbit_task t ON t.id = a.task_id
     WHERE a.session_id = p_session_id AND a.claim_seq = v_seq
     ORDER BY a.id;{% endmacro %}

{#- The task columns' documentation, for procedure headers. -#}
{% macro task_columns_doc() %}--   task_id BIGINT UNSIGNED, queue_id CHAR(32), namespace_id BIGINT UNSIGNED, state VARCHAR,
--   handler, handler_version, payload_version, payload (JSON text), business_key ('' = none),
--   concurrency_key VARBINARY ('' = none), priority, max_attempts, attempt_count, retry_base_ms,
--   retry_max_ms, retry_unknown, run_at, deadline_at (NULL = none), blocked_reason ('' = none;
--   DELAYED or DEBOUNCED while a new task waits for its run_at),
--   output (JSON or NULL), error (JSON or NULL), current_attempt_id (0 = none), plan_id,
--   plan_version, created_at, updated_at, finished_at (NULL until terminal); all times UTC.{% endmacro %}

{#- The queue columns every queue-returning procedure ends with (src/db/queues.rs reads them by
    position). -#}
{% macro queue_columns(q) %}{{ q }}.id AS queue_id, {{ q }}.namespace_id, {{ q }}.name, {{ q }}.paused,
         {{ q }}.max_active_attempts, {{ q }}.created_at, {{ q }}.updated_at{% endmacro %}

{#- The key policy columns every policy-returning procedure ends with (src/db/keys.rs reads them by
    position). -#}
{% macro key_policy_columns(p) %}{{ p }}.id AS policy_id, {{ p }}.namespace_id, {{ p }}.match_kind, {{ p }}.key_pattern,
         {{ p }}.on_busy, {{ p }}.holder_limit, {{ p }}.rate_grants, {{ p }}.rate_per_seconds,
         {{ p }}.created_at, {{ p }}.updated_at{% endmacro %}

{#- The key policy that applies to key `key` of namespace `ns`, as the FROM ... LIMIT 1 of a
    read of orbit_key_policy p: the longest pattern that matches, an exact key before a prefix of
    the same length (see orbit_key_policy). Reads at most the namespace's policies. -#}
{% macro key_policy_of(ns, key) %}FROM orbit_key_policy p
       WHERE p.namespace_id = {{ ns }}
         AND ((p.match_kind = 'exact' AND p.key_pattern = {{ key }})
              OR (p.match_kind = 'prefix' AND p.key_pattern = LEFT({{ key }}, LENGTH(p.key_pattern))))
       ORDER BY LENGTH(p.key_pattern) DESC, p.match_kind = 'exact' DESC
       LIMIT 1{% endmacro %}

{#- Whether key row `r` has no room for another holder at time `now`: as many hold it as its
    holder_limit allows, or its rate holds its next grant back until rate_wake_at. Exact under the
    row's lock. -#}
{% macro key_full(r, now) %}({{ r }}.holders >= {{ r }}.holder_limit OR COALESCE({{ r }}.rate_wake_at > {{ now }}, 0)){% endmacro %}

{#- The lane a keyed WAITING task due now goes to (an expression over its key's orbit_resource row
    `r`, which the caller has locked; for a plain read, as a subquery of a locking read would take
    locks): 'ready' only while the key has room and the task's queue `queue` has no ready task of
    the key yet (at most one per key and queue), otherwise 'blocked'. orbit_task_place's decision,
    also made by orbit_task_create before its insert. -#}
{% macro keyed_lane(r, queue, now) %}IF({% call key_full(r, now) %}
              OR EXISTS (SELECT 1 FROM orbit_task h FORCE INDEX (ix_task_key)
                          WHERE h.resource_id = {{ r }}.id AND h.lane = 'ready' AND h.queue_id = {{ queue }}),
              'blocked', 'ready'){% endmacro %}

{#- Into `into`: the oldest holder of key `resource` (the lowest attempt id among slot 0's, the
    resource row's holder_attempt_id, and its orbit_key_slot rows'); NULL when nobody holds it. -#}
{% macro key_oldest_holder(resource, into) %}SELECT MIN(h.attempt_id) INTO {{ into }}
    FROM (SELECT r.holder_attempt_id AS attempt_id FROM orbit_resource r
           WHERE r.id = {{ resource }} AND r.holder_attempt_id <> 0
          UNION ALL
          SELECT s.attempt_id FROM orbit_key_slot s
           WHERE s.resource_id = {{ resource }} AND s.attempt_id <> 0) h{% endmacro %}

{#- Whether namespace `ns` is the caller's tenant's and in the credential's scope as a whole (a
    namespace-wide grant, not a queue of it): the condition for what spans a namespace's keys.
    Needs v_application_id, v_environment_id and v_credential_id from orbit_auth_check. -#}
{% macro namespace_whole(ns) %}EXISTS (SELECT 1 FROM orbit_namespace n
                 WHERE n.id = {{ ns }} AND n.application_id = v_application_id AND n.environment_id = v_environment_id
                   AND EXISTS (SELECT 1 FROM orbit_credential_scope s
                                WHERE s.credential_id = v_credential_id AND s.namespace_id = n.id AND s.queue_id = '')){% endmacro %}

{#- A consistent read of several statements (a listing that merges index ranges): one snapshot,
    so a row that changes state meanwhile is seen exactly once. -#}
{% macro begin_snapshot() %}SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION READ ONLY{% endmacro %}

{#- Whether a queue (its namespace and id expressions) is within the credential's queue scope: a
    namespace-wide grant (queue_id = '') or the queue listed. Callers also match the
    credential's application and environment when the namespace is not already known to be in
    scope. m::credential_queue_read reads the same rule for one queue. -#}
{% macro queue_in_scope(namespace_id, queue_id, credential) %}EXISTS (SELECT 1 FROM orbit_credential_scope s
                WHERE s.credential_id = {{ credential }} AND s.namespace_id = {{ namespace_id }}
                  AND s.queue_id IN ('', {{ queue_id }})){% endmacro %}

{#- The attempt columns every attempt-returning procedure ends with (src/db/attempts.rs reads
    them by position). -#}
{% macro attempt_columns(a) %}{{ a }}.id AS attempt_id, {{ a }}.task_id, {{ a }}.attempt_no, {{ a }}.queue_id,
         {{ a }}.state, {{ a }}.worker_id, {{ a }}.session_id, {{ a }}.concurrency_token, {{ a }}.granted_at,
         {{ a }}.lease_expires_at, {{ a }}.started_at, {{ a }}.released_at, {{ a }}.outcome, {{ a }}.retryable,
         {{ a }}.output, {{ a }}.error, {{ a }}.late_result{% endmacro %}

{#- The attempt columns' documentation, for procedure headers. -#}
{% macro attempt_columns_doc() %}--   attempt_id, task_id, attempt_no, queue_id, state VARCHAR, worker_id, session_id,
--   concurrency_token BIGINT UNSIGNED (0 = the task has no key), granted_at, lease_expires_at,
--   started_at (NULL = never started), released_at (NULL = still holds its permits), outcome
--   ('' while active), retryable, output (JSON or NULL), error (JSON or NULL), late_result
--   ('' = none); all times UTC.{% endmacro %}

{#- The plan columns every plan-returning procedure ends with: the plan `p` and its current
    version `v` (src/db/plans.rs reads them by position). -#}
{% macro plan_columns(p, v) %}{{ p }}.id AS plan_id, {{ p }}.queue_id, {{ p }}.namespace_id, {{ p }}.name,
         {{ p }}.current_version, {{ p }}.paused, {{ p }}.next_fire_at, {{ p }}.created_at, {{ p }}.updated_at,
         {{ v }}.schedule_kind, {{ v }}.schedule_spec, {{ v }}.handler, {{ v }}.handler_version,
         {{ v }}.payload_version, {{ v }}.payload, {{ v }}.business_key, {{ v }}.concurrency_key,
         {{ v }}.priority, {{ v }}.max_attempts, {{ v }}.retry_base_ms, {{ v }}.retry_max_ms,
         {{ v }}.retry_unknown, {{ v }}.deadline_seconds, {{ p }}.schedule_after, {{ v }}.timezone, {{ v }}.catch_up,
         {{ v }}.on_busy{% endmacro %}

{#- The plan columns' documentation, for procedure headers. -#}
{% macro plan_columns_doc() %}--   plan_id, queue_id, namespace_id, name, current_version, paused, next_fire_at (UTC; NULL while
--   the server computes a cron plan's next slot), created_at, updated_at, then the current
--   version's schedule_kind ('interval' or 'cron'), schedule_spec (interval seconds, or the cron
--   expression), handler, handler_version, payload_version, payload (JSON text), business_key
--   ('' = none), concurrency_key VARBINARY ('' = none), priority, max_attempts, retry_base_ms,
--   retry_max_ms, retry_unknown, deadline_seconds (0 = none), then the plan's schedule_after (UTC,
--   cron plans; NULL for interval plans) and the version's timezone ('' for interval plans),
--   catch_up ('none', 'one', 'all') and on_busy ('queue', 'skip', 'replace_waiting').{% endmacro %}

{#- The schedule parameters orbit_plan_create and orbit_plan_version_create take before the task
    definition, and their documentation. -#}
{% macro plan_schedule_params() %}IN p_interval_seconds BIGINT,
  IN p_cron TEXT {{ c.ascii }},
  IN p_timezone TEXT {{ c.ascii }},
  IN p_catch_up TEXT {{ c.ascii }},
  IN p_on_busy TEXT {{ c.ascii }}{% endmacro %}
{% macro plan_schedule_doc() %}--   p_interval_seconds        1-31536000 for an interval plan; NULL for a cron plan
--   p_cron                    a cron plan's expression, 1-191 ASCII characters, parsed and checked by
--                             the server (src/schedule.rs), which computes its fire times; NULL for
--                             an interval plan. Exactly one of p_interval_seconds, p_cron is given.
--   p_timezone                a cron plan's IANA time zone, 1-64 characters; NULL = 'UTC'. Must be
--                             NULL or '' for an interval plan.
--   p_catch_up                'none' | 'one' | 'all' (NULL = 'one'): missed slots after a stop
--   p_on_busy                 'queue' | 'skip' | 'replace_waiting' (NULL = 'queue'): a slot while
--                             the key is busy; other than 'queue' needs a concurrency_key{% endmacro %}

{#- Checks the schedule parameters (after orbit_task_validate) and sets v_kind, v_spec, v_timezone,
    v_catch_up, v_on_busy, which the calling procedure declares. -#}
{% macro plan_schedule_validate() %}IF (p_interval_seconds IS NULL) = (p_cron IS NULL) THEN
    {% call raise("INVALID_ARGUMENT", "schedule needs exactly one of interval_seconds and cron") %};
  END IF;
  IF p_interval_seconds IS NOT NULL THEN
    IF p_interval_seconds NOT BETWEEN 1 AND 31536000 THEN
      {% call raise("INVALID_ARGUMENT", "interval_seconds must be between 1 and 31536000") %};
    END IF;
    IF p_timezone IS NOT NULL AND p_timezone <> '' THEN
      {% call raise("INVALID_ARGUMENT", "timezone is for cron schedules only") %};
    END IF;
    SET v_kind = 'interval', v_spec = CAST(p_interval_seconds AS CHAR), v_timezone = '';
  ELSE
    IF CHAR_LENGTH(p_cron) NOT BETWEEN 1 AND 191 THEN
      {% call raise("INVALID_ARGUMENT", "cron must be 1-191 characters") %};
    END IF;
    IF p_timezone IS NOT NULL AND CHAR_LENGTH(p_timezone) NOT BETWEEN 1 AND 64 THEN
      {% call raise("INVALID_ARGUMENT", "timezone must be 1-64 characters") %};
    END IF;
    SET v_kind = 'cron', v_spec = p_cron, v_timezone = COALESCE(p_timezone, 'UTC');
  END IF;
  SET v_catch_up = COALESCE(p_catch_up, 'one'), v_on_busy = COALESCE(p_on_busy, 'queue');
  IF v_catch_up NOT IN ('none', 'one', 'all') THEN
    {% call raise("INVALID_ARGUMENT", "catch_up must be none, one or all") %};
  END IF;
  IF v_on_busy NOT IN ('queue', 'skip', 'replace_waiting') THEN
    {% call raise("INVALID_ARGUMENT", "on_busy must be queue, skip or replace_waiting") %};
  END IF;
  IF v_on_busy <> 'queue' AND p_concurrency_key = '' THEN
    {% call raise("INVALID_ARGUMENT", "on_busy skip and replace_waiting need a concurrency_key") %};
  END IF{% endmacro %}
{% macro plan_schedule_declare() %}DECLARE v_kind VARCHAR(16) {{ c.ascii }};
  DECLARE v_spec VARCHAR(191) {{ c.ascii }};
  DECLARE v_timezone VARCHAR(64) {{ c.ascii }};
  DECLARE v_catch_up VARCHAR(16) {{ c.ascii }};
  DECLARE v_on_busy VARCHAR(16) {{ c.ascii }}{% endmacro %}

{#- The task definition parameters orbit_task_submit, orbit_plan_create and
    orbit_plan_version_create take, in this order (validated by orbit_task_validate). -#}
{% macro task_definition_params() %}IN p_handler TEXT {{ c.utf8 }},
  IN p_handler_version TEXT {{ c.utf8 }},
  IN p_payload_version TEXT {{ c.utf8 }},
  IN p_payload MEDIUMTEXT {{ c.utf8 }},
  IN p_business_key TEXT {{ c.utf8 }},
  IN p_concurrency_key BLOB,
  IN p_priority INT,
  IN p_max_attempts INT,
  IN p_retry_base_ms BIGINT,
  IN p_retry_max_ms BIGINT,
  IN p_retry_unknown TINYINT,
  IN p_deadline_seconds BIGINT{% endmacro %}

{#- Their documentation, for procedure headers. -#}
{% macro task_definition_doc() %}--   p_handler                 1-191 characters
--   p_handler_version, p_payload_version   1-64 characters
--   p_payload                 JSON text
--   p_business_key            0-191 characters (NULL = '')
--   p_concurrency_key         exact bytes; '' = no key; NULL is invalid (see orbit_key_validate)
--   p_priority                0 (first) - 9; default 5
--   p_max_attempts            1-1000; default 3
--   p_retry_base_ms           0-86400000; default 1000 (doubles per attempt)
--   p_retry_max_ms            0-604800000; default 300000
--   p_retry_unknown           0/1; default 0 (1 = safe to retry after an unknown outcome)
--   p_deadline_seconds        total deadline from acceptance, 1-315360000; NULL or 0 = none{% endmacro %}

{#- The default of a task definition's optional field `f`: the one list of defaults. -#}
{% macro task_default(f) %}{% if f == "business_key" %}''{% elif f == "priority" %}5{% elif f == "max_attempts" %}3{% elif f == "retry_base_ms" %}1000{% elif f == "retry_max_ms" %}300000{% elif f == "retry_unknown" %}0{% elif f == "deadline_seconds" %}0{% endif %}{% endmacro %}

{#- The defaults applied to variables, as assignments of one SET: `p` is their prefix (p_ in
    orbit_task_validate; orbit_task_submit_many applies task_default to its columns). -#}
{% macro task_defaults(p) %}{{ p }}business_key = COALESCE({{ p }}business_key, {% call task_default("business_key") %}),
      {{ p }}priority = COALESCE({{ p }}priority, {% call task_default("priority") %}),
      {{ p }}max_attempts = COALESCE({{ p }}max_attempts, {% call task_default("max_attempts") %}),
      {{ p }}retry_base_ms = COALESCE({{ p }}retry_base_ms, {% call task_default("retry_base_ms") %}),
      {{ p }}retry_max_ms = COALESCE({{ p }}retry_max_ms, {% call task_default("retry_max_ms") %}),
      {{ p }}retry_unknown = COALESCE({{ p }}retry_unknown, {% call task_default("retry_unknown") %}),
      {{ p }}deadline_seconds = COALESCE({{ p }}deadline_seconds, {% call task_default("deadline_seconds") %}){% endmacro %}

{#- The first rule of SPEC §3 that concurrency key `k` (exact bytes, '' = no key) breaks, as the
    message that follows "INVALID_ARGUMENT: ", or NULL when it keeps them all: valid UTF-8,
    1-{{ c.key_max_chars }} characters, no control characters (Unicode Cc: U+0000-U+001F,
    U+007F-U+009F), no leading or trailing Unicode White_Space (U+0020, U+00A0, U+1680,
    U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000; the other White_Space characters are
    Cc). Checked on the hex of the exact bytes, so no collation, case folding or normalisation is
    involved; `^(..)*` keeps a match on a byte boundary of the hex string. UTF-8 is checked by the
    table of well-formed byte sequences (Unicode 15, Table 3-7: no overlong forms, no surrogates
    ED A0-BF, nothing above U+10FFFF), not by converting: a conversion of bad bytes is a warning
    that an assignment turns into an error. One expression for orbit_key_validate and the
    set-based checks of orbit_task_submit_many. -#}
{% macro key_error(k) %}CASE WHEN {{ k }} IS NULL THEN 'concurrency_key must be a string or omitted, not null'
       WHEN {{ k }} = '' THEN NULL
       WHEN NOT HEX({{ k }}) REGEXP '^([0-7][0-9A-F]|C[2-9A-F][89AB][0-9A-F]|D[0-9A-F][89AB][0-9A-F]|E0[AB][0-9A-F][89AB][0-9A-F]|E[1-9A-CEF][89AB][0-9A-F][89AB][0-9A-F]|ED[89][0-9A-F][89AB][0-9A-F]|F0[9AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F[1-3][89AB][0-9A-F][89AB][0-9A-F][89AB][0-9A-F]|F48[0-9A-F][89AB][0-9A-F][89AB][0-9A-F])*$'
         THEN 'concurrency_key must be valid UTF-8'
       WHEN CHAR_LENGTH(CONVERT({{ k }} USING utf8mb4)) > {{ c.key_max_chars }}
         THEN 'concurrency_key must be at most {{ c.key_max_chars }} characters'
       WHEN HEX({{ k }}) REGEXP '^(..)*(0[0-9A-F]|1[0-9A-F]|7F|C2[89][0-9A-F])'
         THEN 'concurrency_key must not contain control characters'
       WHEN HEX({{ k }}) REGEXP '^(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)'
            OR HEX({{ k }}) REGEXP '(20|C2A0|E19A80|E2808[0-9A]|E280A[89F]|E2819F|E38080)$'
         THEN 'concurrency_key must not start or end with whitespace'
  END{% endmacro %}

{#- The first rule a task definition breaks, in parameter order, as the message that follows
    "INVALID_ARGUMENT: " (it starts with the field's name), or NULL when it keeps them all. `p` is
    the prefix of the effective (defaulted, see task_defaults) values: p_ in orbit_task_validate,
    t. in the set-based checks of orbit_task_submit_many. One set of rules for every way a task is
    defined. COALESCE stops at its first non-NULL argument, so the key's rules (key_error, a
    CASE of its own) are evaluated once, and only when the fields before it pass. -#}
{% macro task_definition_error(p) %}COALESCE(CASE
       WHEN {{ p }}handler IS NULL OR CHAR_LENGTH({{ p }}handler) NOT BETWEEN 1 AND 191
         THEN 'handler must be 1-191 characters'
       WHEN {{ p }}handler_version IS NULL OR CHAR_LENGTH({{ p }}handler_version) NOT BETWEEN 1 AND 64
         THEN 'handler_version must be 1-64 characters'
       WHEN {{ p }}payload_version IS NULL OR CHAR_LENGTH({{ p }}payload_version) NOT BETWEEN 1 AND 64
         THEN 'payload_version must be 1-64 characters'
       WHEN {{ p }}payload IS NULL OR NOT JSON_VALID({{ p }}payload) THEN 'payload must be valid JSON'
       WHEN CHAR_LENGTH({{ p }}business_key) > 191 THEN 'business_key must be at most 191 characters'
  END, {% call key_error(p ~ "concurrency_key") %}, CASE
       WHEN {{ p }}priority NOT BETWEEN 0 AND 9 THEN 'priority must be between 0 and 9'
       WHEN {{ p }}max_attempts NOT BETWEEN 1 AND 1000 THEN 'max_attempts must be between 1 and 1000'
       WHEN {{ p }}retry_base_ms NOT BETWEEN 0 AND 86400000 OR {{ p }}retry_max_ms NOT BETWEEN 0 AND 604800000
         THEN 'retry_base_ms must be 0-86400000 and retry_max_ms 0-604800000'
       WHEN {{ p }}retry_unknown NOT IN (0, 1) THEN 'retry_unknown must be true or false'
       WHEN {{ p }}deadline_seconds NOT BETWEEN 0 AND 315360000
         THEN 'deadline_seconds must be between 1 and 315360000'
  END){% endmacro %}

{#- A submit's timing: when its task may first be claimed. Not part of a task definition (a plan's
    task runs when its slot fires), so a separate list, for orbit_task_submit. -#}
{% macro task_timing_params() %}IN p_run_at DATETIME(6),
  IN p_delay_seconds BIGINT,
  IN p_debounce_seconds BIGINT,
  IN p_debounce_max_seconds BIGINT{% endmacro %}

{#- Their documentation, for procedure headers. -#}
{% macro task_timing_doc() %}--   p_run_at                  UTC time before which the task is not claimed; a past time runs at
--                             once; at most {{ c.delay_max_seconds }} s (365 days) ahead; NULL = now
--   p_delay_seconds           0-{{ c.delay_max_seconds }}: run_at is acceptance + this; NULL or 0 = none;
--                             not with p_run_at
--   p_debounce_seconds        0-{{ c.delay_max_seconds }}, keyed tasks only, not with p_run_at or
--                             p_delay_seconds: the task runs this long after acceptance unless a
--                             later debounced submit for its key and queue replaces it first (it
--                             ends CANCELLED, error code REPLACED naming its successor); NULL or 0 = none
--   p_debounce_max_seconds    0-{{ c.delay_max_seconds }}, with p_debounce_seconds and at least it: the
--                             latest run_at a burst of replacements may reach, counted from the
--                             burst's first submit; NULL or 0 = no bound{% endmacro %}

{#- The first timing rule a submit breaks, as the message after "INVALID_ARGUMENT: ", or NULL:
    prefix `p` (p_ in orbit_task_submit, t. in orbit_task_submit_many), acceptance time `now`. -#}
{% macro task_timing_error(p, now) %}CASE
       WHEN {{ p }}run_at IS NOT NULL AND {{ p }}delay_seconds IS NOT NULL
         THEN 'run_at and delay_seconds cannot both be given'
       WHEN {{ p }}delay_seconds NOT BETWEEN 0 AND {{ c.delay_max_seconds }}
         THEN 'delay_seconds must be between 0 and {{ c.delay_max_seconds }} (365 days)'
       WHEN {{ p }}run_at > DATE_ADD({{ now }}, INTERVAL {{ c.delay_max_seconds }} SECOND)
         THEN 'run_at must be at most 365 days ahead'
       WHEN {{ p }}debounce_seconds NOT BETWEEN 0 AND {{ c.delay_max_seconds }}
         THEN 'debounce_seconds must be between 0 and {{ c.delay_max_seconds }} (365 days)'
       WHEN {{ p }}debounce_max_seconds NOT BETWEEN 0 AND {{ c.delay_max_seconds }}
         THEN 'debounce_max_seconds must be between 0 and {{ c.delay_max_seconds }} (365 days)'
       WHEN {{ p }}debounce_seconds > 0 AND {{ p }}concurrency_key = ''
         THEN 'debounce_seconds needs a concurrency_key'
       WHEN {{ p }}debounce_seconds > 0 AND ({{ p }}run_at IS NOT NULL OR {{ p }}delay_seconds > 0)
         THEN 'debounce_seconds cannot be combined with run_at or delay_seconds'
       WHEN {{ p }}debounce_max_seconds > 0 AND {{ p }}debounce_max_seconds < COALESCE({{ p }}debounce_seconds, 0)
         THEN 'debounce_max_seconds must be at least debounce_seconds'
       WHEN {{ p }}debounce_max_seconds > 0 AND NOT COALESCE({{ p }}debounce_seconds, 0) > 0
         THEN 'debounce_max_seconds needs debounce_seconds'
  END{% endmacro %}

{#- A new task's orbit_task row, as orbit_task_create writes it; the batch inserts of
    orbit_task_submit_many and orbit_plan_fire_due write it with the same two macros, so no
    procedure restates it. task_insert_columns(indent) names the columns and task_insert_values(...)
    gives their values in that order: the tenancy, the definition (the values of handler ..
    deadline_seconds, variables or columns with prefix `d`), then the placement. -#}
{% macro task_insert_columns(indent) %}(application_id, namespace_id, queue_id, handler, handler_version, payload_version,
{{ indent }}payload, business_key, concurrency_key, resource_id, state, lane, priority,
{{ indent }}max_attempts, attempt_count, retry_base_ms, retry_max_ms, retry_unknown, run_at,
{{ indent }}deadline_at, idempotency_key, plan_id, plan_version, quota_slot, created_at, updated_at,
{{ indent }}debounce_seconds, debounce_until){% endmacro %}
{% macro task_insert_values(application_id, namespace_id, queue_id, d, concurrency_key, resource_id, lane, run_at, idempotency_key, plan_id, plan_version, quota_slot, now, debounce_seconds, debounce_until, indent) %}{{ application_id }}, {{ namespace_id }}, {{ queue_id }}, {{ d }}handler, {{ d }}handler_version, {{ d }}payload_version,
{{ indent }}{{ d }}payload, {{ d }}business_key, {{ concurrency_key }}, {{ resource_id }}, 'WAITING', {{ lane }}, {{ d }}priority,
{{ indent }}{{ d }}max_attempts, 0, {{ d }}retry_base_ms, {{ d }}retry_max_ms, {{ d }}retry_unknown, {{ run_at }},
{{ indent }}IF({{ d }}deadline_seconds > 0, DATE_ADD({{ now }}, INTERVAL {{ d }}deadline_seconds SECOND), NULL),
{{ indent }}{{ idempotency_key }}, {{ plan_id }}, {{ plan_version }}, {{ quota_slot }}, {{ now }}, {{ now }},
{{ indent }}{{ debounce_seconds }}, {{ debounce_until }}{% endmacro %}

{#- The time a new task may first be claimed, from its (valid) timing with prefix `p`. A debounced
    task's is computed by orbit_task_create, which sees the burst it joins. -#}
{% macro task_run_at(p, now) %}CASE WHEN {{ p }}run_at IS NOT NULL THEN GREATEST({{ p }}run_at, {{ now }})
            WHEN {{ p }}delay_seconds > 0 THEN DATE_ADD({{ now }}, INTERVAL {{ p }}delay_seconds SECOND)
            ELSE {{ now }} END{% endmacro %}

{#- A submitted task's receipt, written once, after orbit_task_create created the task (v_task_id,
    v_refusal) under its key's row: inserted naming the task, or, for a task its key's policy
    refused (KEY_BUSY), looked for (a locking read, which waits for a concurrent first submit), so
    that a replay is decided before the policy. v_duplicate = 1 when the Idempotency-Key `key` has
    a receipt already (the insert's 1062 handler sets it): the caller then rolls back to its
    savepoint, undoing the task, and replays (m::receipt_read). Uses v_application_id and v_now;
    `ind` indents the statement's inner lines. -#}
{% macro receipt_insert(key, hash, ind) %}IF v_refusal = 'KEY_BUSY' THEN
{{ ind }}  {% call receipt_count("v_duplicate", key, true, ind ~ "  ") %};
{{ ind }}ELSE
{{ ind }}  INSERT INTO orbit_idempotency (application_id, idempotency_key, request_hash, task_id, created_at)
{{ ind }}  VALUES (v_application_id, {{ key }}, {{ hash }}, v_task_id, v_now);
{{ ind }}END IF{% endmacro %}

{#- Whether Idempotency-Key `key` has a receipt, INTO `into` (0 or 1): a plain read, or with
    `lock` a locking one, which waits for a concurrent first submit's. `ind` indents the
    statement's inner lines. -#}
{% macro receipt_count(into, key, lock, ind) %}SELECT COUNT(*) INTO {{ into }}
{{ ind }}  FROM orbit_idempotency i
{{ ind }} WHERE i.application_id = v_application_id AND i.idempotency_key = {{ key }}{% if lock %}
{{ ind }}   FOR UPDATE{% endif %}{% endmacro %}

{#- The receipt of Idempotency-Key `key`, found taken: its request hash and task, locked, INTO
    v_existing_hash and v_task_id. -#}
{% macro receipt_read(key, ind) %}SELECT i.request_hash, i.task_id INTO v_existing_hash, v_task_id
{{ ind }}  FROM orbit_idempotency i
{{ ind }} WHERE i.application_id = v_application_id AND i.idempotency_key = {{ key }}
{{ ind }}   FOR UPDATE{% endmacro %}

{#- The request hash of a submit, over the effective (defaulted) values of the variables with
    prefix `p`: the same expression in orbit_task_submit and orbit_task_submit_many, so a single
    submit and a batch item with the same Idempotency-Key and request replay each other. Every
    field is hex-encoded, so no separator can be forged by a value. The timing fields (run_at as
    given, not the effective time) come last and each only when given: CONCAT_WS skips a NULL,
    so a request without them hashes as it did in 0.1 and an upgrade keeps every receipt. -#}
{% macro request_hash(p) %}UNHEX(SHA2(CONCAT_WS(',', HEX({{ p }}queue_id), HEX({{ p }}handler), HEX({{ p }}handler_version),
                 HEX({{ p }}payload_version), SHA2({{ p }}payload, 256), HEX({{ p }}business_key), HEX({{ p }}concurrency_key),
                 {{ p }}priority, {{ p }}max_attempts, {{ p }}retry_base_ms, {{ p }}retry_max_ms, {{ p }}retry_unknown,
                 {{ p }}deadline_seconds, CONCAT('run_at=', {{ p }}run_at), CONCAT('delay_seconds=', NULLIF({{ p }}delay_seconds, 0)),
                 CONCAT('debounce_seconds=', NULLIF({{ p }}debounce_seconds, 0)),
                 CONCAT('debounce_max_seconds=', NULLIF({{ p }}debounce_max_seconds, 0))), 256)){% endmacro %}

{#- The first time slot + k * interval seconds (k >= 0) that is after now; a slot already after
    now is kept. Plans advance by whole intervals, so slots missed while the scheduler was down
    (or the plan paused) are skipped, never fired in a burst. -#}
{% macro next_slot(slot, interval, now) %}DATE_ADD({{ slot }}, INTERVAL {{ interval }} * GREATEST(FLOOR(TIMESTAMPDIFF(MICROSECOND, {{ slot }}, {{ now }}) / ({{ interval }} * 1000000)) + 1, 0) SECOND){% endmacro %}

{#- Quota slots: each application's quota counters are split over c.quota_slots rows of
    orbit_application_quota (slot 0..N-1). The slot a transaction tries first is its connection id
    modulo N: concurrent transactions run on different connections, so they mostly charge different
    rows and stop queueing on one row lock. -#}
{% macro quota_slot() %}(CONNECTION_ID() % {{ c.quota_slots }}){% endmacro %}

{#- The slot a session's attempts charge first: its id modulo N. A session's grants and results
    (which its session row lock already serialises) then charge and give back the same row, and two
    sessions meet on a slot row only when their ids share the slot, not whenever a pooled
    connection granted attempts of both. -#}
{% macro session_slot(session_id) %}({{ session_id }} % {{ c.quota_slots }}){% endmacro %}

{#- A slot's exact share of the application limit held in column `col` of quota row `q` (every slot
    row holds the application's whole limit L): L DIV N, plus 1 for the slots below L MOD N. The
    shares add up to L, and a slot is charged on its own only within its share, so the
    application's total never exceeds L; a charge its slot refuses locks every slot and checks the
    exact total (see orbit_application_quota). -#}
{% macro quota_share(q, col) %}({{ q }}.{{ col }} DIV {{ c.quota_slots }} + ({{ q }}.slot < {{ q }}.{{ col }} % {{ c.quota_slots }})){% endmacro %}

{#- Gives back the quota charges of attempts just ended, read from their rows: `ended` is a FROM
    item, alias a, with each ended attempt once (its quota_slot and task_id). An attempt's active
    attempt goes back to the slot it charged, so that counter never goes below zero, and its task's
    incomplete task too when the task ended (SUCCEEDED, FAILED or CANCELLED; a task in review or
    waiting for a retry still counts). One statement, locking only the slot rows with something to
    give back: the grouped charges drive the join (STRAIGHT_JOIN) and each slot row is found by
    its primary key; were q to drive it, every slot row it scanned would stay locked (MariaDB keeps
    the rows a multi-table UPDATE read), and a caller already holding one (its grant's charge)
    would deadlock with another doing the same. Last in the transaction's quota work, as every
    quota lock. -#}
{% macro quota_give_back_ended(app, ended, now) %}UPDATE (SELECT a.quota_slot AS slot, COUNT(*) AS active,
                 CAST(SUM(t.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) AS SIGNED) AS incomplete
            FROM {{ ended }}
            JOIN orbit_task t ON t.id = a.task_id
           GROUP BY a.quota_slot) g
    STRAIGHT_JOIN orbit_application_quota q ON q.application_id = {{ app }} AND q.slot = g.slot
     SET q.active_attempts = q.active_attempts - g.active,
         q.incomplete_tasks = q.incomplete_tasks - g.incomplete,
         q.updated_at = {{ now }}{% endmacro %}

{#- Expires waiting task `task` (state `from_state`) whose total deadline has passed: the task
    row and its history row, `detail` saying where it was found. The caller holds the task row
    (and, for a ready keyed task, its key's row: it promotes the key's next task after), and the
    transaction gives back the task's incomplete-task charge with its quota work. Shared by
    orbit_task_expire_due and orbit_attempt_grant (a candidate found past its deadline, whose
    charge orbit_task_grant gives back). -#}
{% macro task_expire(task, from_state, detail, now) %}UPDATE orbit_task t
     SET t.state = 'EXPIRED', t.lane = 'none', t.finished_at = {{ now }}, t.updated_at = {{ now }}
   WHERE t.id = {{ task }};
  INSERT INTO orbit_task_event (task_id, event, from_state, to_state, detail, created_at)
  VALUES ({{ task }}, 'deadline_expired', {{ from_state }}, 'EXPIRED', {{ detail }}, {{ now }}){% endmacro %}

{#- A submit_many batch (p_tasks: a JSON array of task objects, see orbit_task_submit_many) read
    as tables, and the member values they are made of. -#}
{#- A member's value as text: a JSON_TABLE column of utf8mb4 text at the member's path, beside
    its JSON text j_<member> (JSON PATH) that tells its type. Not JSON_UNQUOTE: on MariaDB 10.6
    it returns utf8mb3, which turns every character beyond the Basic Multilingual Plane (an
    emoji) into '?'. -#}
{% macro text_column(member) %}s_{{ member }} LONGTEXT {{ c.utf8 }} PATH '$.{{ member }}'{% endmacro %}
{#- The value of string member j (its JSON text; s: its text_column): at most `len` characters
    are kept (every rule allows fewer, so a longer value still fails its rule, and never
    overflows a variable); a missing member is `absent`, JSON null is NULL (the default). -#}
{% macro string_value(j, s, len, absent) %}IF(JSON_TYPE({{ j }}) = 'STRING', LEFT({{ s }}, {{ len }}), IF({{ j }} IS NULL, {{ absent }}, NULL)){% endmacro %}
{#- The value of integer member j: plain JSON digits; more than 9 digits is -1, which every integer
    rule refuses with its own message; missing or null is NULL (the default). -#}
{% macro integer_value(j) %}CASE WHEN {{ j }} REGEXP '^-?[0-9]{1,9}$' THEN CAST({{ j }} AS SIGNED)
                                    WHEN {{ j }} REGEXP '^-?[0-9]+$' THEN -1 END{% endmacro %}
{#- The Idempotency-Key of a task, from its member's JSON text j and its text_column s: exact
    bytes (NULL unless a string; more than 255 bytes fails its rule). Cut to 256 bytes, not
    characters: a derived table's key on it stays within a temporary table's key length, so a
    join probes it. -#}
{% macro idempotency_key(j, s) %}IF(JSON_TYPE({{ j }}) = 'STRING', LEFT(CAST({{ s }} AS BINARY), 256), NULL){% endmacro %}
{#- The Idempotency-Keys of the batch's tasks at `path` ('$[*]': every task) as a derived table b,
    a row per task: item (1-based), and the key, materialised once (LIMIT: not merged) so that a
    join probes it by its index instead of evaluating the key's JSON expression for every pair. -#}
{% macro batch_keys(path) %}(SELECT k.item, {% call idempotency_key("k.j_idempotency_key", "k.s_idempotency_key") %} AS idempotency_key
       FROM JSON_TABLE(p_tasks, '{{ path }}' COLUMNS (item FOR ORDINALITY, j_idempotency_key JSON PATH '$.idempotency_key',
              {% call text_column("idempotency_key") %})) k
      LIMIT 1000) b{% endmacro %}
{#- The batch's concurrency keys, each once, in key order, as a derived table k (materialised: LIMIT). -#}
{% macro batch_concurrency_keys() %}(SELECT DISTINCT CAST({% call string_value("j.j_concurrency_key", "j.s_concurrency_key", 192, "''") %} AS BINARY) AS concurrency_key
       FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (j_concurrency_key JSON PATH '$.concurrency_key',
              {% call text_column("concurrency_key") %})) j
      WHERE JSON_TYPE(j.j_concurrency_key) = 'STRING' AND j.s_concurrency_key <> ''
      ORDER BY 1
      LIMIT 1000) k{% endmacro %}
{#- The batch as a derived table, a row per task in input order: item (1-based), the task object,
    each member's JSON text j_<member> (NULL when missing), and the effective values (defaults
    applied: task_default) that the single submit's parameters would carry, so both hash
    and store the same values. -#}
{% macro batch_tasks() %}(SELECT j.item, j.task, j.j_idempotency_key, j.j_queue_id, j.j_handler, j.j_handler_version,
          j.j_payload_version, j.j_payload, j.j_business_key, j.j_concurrency_key, j.j_priority, j.j_max_attempts,
          j.j_retry_base_ms, j.j_retry_max_ms, j.j_retry_unknown, j.j_deadline_seconds, j.j_run_at,
          j.j_delay_seconds, j.j_debounce_seconds, j.j_debounce_max_seconds,
          {% call idempotency_key("j.j_idempotency_key", "j.s_idempotency_key") %} AS idempotency_key,
          -- Not ASCII (or absurdly long): no queue has that id.
          IF(JSON_TYPE(j.j_queue_id) = 'STRING' AND LENGTH(j.s_queue_id) <= 255
             AND LENGTH(j.s_queue_id) = CHAR_LENGTH(j.s_queue_id), j.s_queue_id, '') AS queue_id,
          {% call string_value("j.j_handler", "j.s_handler", 192, "NULL") %} AS handler,
          {% call string_value("j.j_handler_version", "j.s_handler_version", 65, "NULL") %} AS handler_version,
          {% call string_value("j.j_payload_version", "j.s_payload_version", 65, "NULL") %} AS payload_version,
          IF(JSON_TYPE(j.j_payload) = 'STRING', j.s_payload, NULL) AS payload,
          COALESCE({% call string_value("j.j_business_key", "j.s_business_key", 192, "NULL") %}, {% call task_default("business_key") %}) AS business_key,
          -- Missing is none; null is refused (key_error). e_concurrency_key tells them apart: MySQL's
          -- JSON_TABLE reads a JSON null as SQL NULL, as it reads a missing member (MariaDB: 'null').
          CAST(IF(JSON_TYPE(j.j_concurrency_key) = 'STRING', LEFT(j.s_concurrency_key, 192),
                  IF(j.e_concurrency_key, NULL, '')) AS BINARY) AS concurrency_key,
          COALESCE({% call integer_value("j.j_priority") %}, {% call task_default("priority") %}) AS priority,
          COALESCE({% call integer_value("j.j_max_attempts") %}, {% call task_default("max_attempts") %}) AS max_attempts,
          COALESCE({% call integer_value("j.j_retry_base_ms") %}, {% call task_default("retry_base_ms") %}) AS retry_base_ms,
          COALESCE({% call integer_value("j.j_retry_max_ms") %}, {% call task_default("retry_max_ms") %}) AS retry_max_ms,
          COALESCE(IF(JSON_TYPE(j.j_retry_unknown) = 'BOOLEAN', JSON_UNQUOTE(j.j_retry_unknown) = 'true', NULL),
                   {% call task_default("retry_unknown") %}) AS retry_unknown,
          COALESCE({% call integer_value("j.j_deadline_seconds") %}, {% call task_default("deadline_seconds") %}) AS deadline_seconds,
          -- A string of the SQL form (the HTTP API converts RFC 3339); the pattern first, so only a
          -- well-formed string is converted (an impossible date is NULL with a warning).
          IF(JSON_TYPE(j.j_run_at) = 'STRING'
             AND j.s_run_at REGEXP '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?$',
             CAST(j.s_run_at AS DATETIME(6)), NULL) AS run_at,
          {% call integer_value("j.j_delay_seconds") %} AS delay_seconds,
          {% call integer_value("j.j_debounce_seconds") %} AS debounce_seconds,
          {% call integer_value("j.j_debounce_max_seconds") %} AS debounce_max_seconds
     FROM JSON_TABLE(p_tasks, '$[*]' COLUMNS (item FOR ORDINALITY, task JSON PATH '$',
            j_idempotency_key JSON PATH '$.idempotency_key', j_queue_id JSON PATH '$.queue_id',
            j_handler JSON PATH '$.handler', j_handler_version JSON PATH '$.handler_version',
            j_payload_version JSON PATH '$.payload_version', j_payload JSON PATH '$.payload',
            j_business_key JSON PATH '$.business_key', j_concurrency_key JSON PATH '$.concurrency_key',
            {% call text_column("idempotency_key") %}, {% call text_column("queue_id") %},
            {% call text_column("handler") %}, {% call text_column("handler_version") %},
            {% call text_column("payload_version") %}, {% call text_column("payload") %},
            {% call text_column("business_key") %}, {% call text_column("concurrency_key") %},
            {% call text_column("run_at") %},
            e_concurrency_key INT EXISTS PATH '$.concurrency_key',
            j_priority JSON PATH '$.priority', j_max_attempts JSON PATH '$.max_attempts',
            j_retry_base_ms JSON PATH '$.retry_base_ms', j_retry_max_ms JSON PATH '$.retry_max_ms',
            j_retry_unknown JSON PATH '$.retry_unknown', j_deadline_seconds JSON PATH '$.deadline_seconds',
            j_run_at JSON PATH '$.run_at', j_delay_seconds JSON PATH '$.delay_seconds',
            j_debounce_seconds JSON PATH '$.debounce_seconds',
            j_debounce_max_seconds JSON PATH '$.debounce_max_seconds')) j) t{% endmacro %}
{#- The history of the attempts a caller has just ended with orbit_attempt_end, which writes none:
    one 'attempt_<outcome>' row per attempt of derived table `ended` (aliased e, column id: the
    attempt), in attempt order, read from the rows orbit_attempt_end wrote: the attempt's outcome,
    new state and token, its state before (RUNNING once started: started_at), and its task's new
    state. One insert for all the attempts a call ends, run before anything else moves their tasks
    (a grant). -#}
{% macro attempt_end_events(ended, now) %}INSERT INTO orbit_task_event (task_id, attempt_id, event, from_state, to_state, concurrency_token, detail, created_at)
    SELECT a.task_id, a.id, CONCAT('attempt_', a.outcome), IF(a.started_at IS NULL, 'LEASED', 'RUNNING'), t.state,
           a.concurrency_token, CONCAT('attempt ', a.state, '; permits released'), {{ now }}
      FROM {{ ended }}
      STRAIGHT_JOIN orbit_attempt a FORCE INDEX (PRIMARY) ON a.id = e.id
      STRAIGHT_JOIN orbit_task t FORCE INDEX (PRIMARY) ON t.id = a.task_id
     ORDER BY a.id{% endmacro %}

{#- Whether slot row `q` may take charges on its own for limit column `col`: the limit is the one
    last verified (checked_<col>) to have every slot of the application within its share. After a
    limit change the shares may be below what slots already hold, so charges lock every slot and
    check the exact total until a charge finds every slot within its share again. -#}
{% macro quota_checked(q, col) %}{{ q }}.checked_{{ col }} = {{ q }}.{{ col }}{% endmacro %}

{#- The one-slot charge: adds n to counter column `counter` of slot `slot` of application `app`,
    only while that slot stays within its share of limit column `limit` and the limit is the
    checked one (see orbit_application_quota). ROW_COUNT() = 0: not charged, and READ COMMITTED
    released the row; the caller takes the every-slot path. -#}
{% macro quota_charge_slot(app, slot, counter, limit, n, now) %}{% call quota_charge_slot_credit(app, slot, counter, limit, n, "0", now) %}{% endmacro %}

{#- quota_charge_slot, for a caller that gives back `credit` charges of this slot later in its
    transaction: they count as room. -#}
{% macro quota_charge_slot_credit(app, slot, counter, limit, n, credit, now) %}UPDATE orbit_application_quota q
     SET q.{{ counter }} = q.{{ counter }} + {{ n }}, q.updated_at = {{ now }}
   WHERE q.application_id = {{ app }} AND q.slot = {{ slot }}
     AND {% call quota_checked("q", limit) %}
     AND q.{{ counter }} + {{ n }} <= {% call quota_share("q", limit) %}{% if credit != "0" %} + {{ credit }}{% endif %}{% endmacro %}

{#- Checks that `list` (attempt_ids) is a JSON array of 1-1000 positive integer ids (before anything is written);
    leaves its length in `count`; `i` is a scratch counter. -#}
{% macro check_id_list(list, count, i) %}IF {{ list }} IS NULL OR NOT JSON_VALID({{ list }}) OR JSON_TYPE({{ list }}) <> 'ARRAY'
     OR JSON_LENGTH({{ list }}) NOT BETWEEN 1 AND 1000 THEN
    {% call raise("INVALID_ARGUMENT", "attempt_ids must be a JSON array of 1-1000 ids") %};
  END IF;
  SET {{ count }} = JSON_LENGTH({{ list }}), {{ i }} = 0;
  WHILE {{ i }} < {{ count }} DO
    IF COALESCE(JSON_TYPE(JSON_EXTRACT({{ list }}, CONCAT('$[', {{ i }}, ']'))), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
       OR JSON_EXTRACT({{ list }}, CONCAT('$[', {{ i }}, ']')) < 1 THEN
      {% call raise("INVALID_ARGUMENT", "attempt_ids must be positive integers") %};
    END IF;
    SET {{ i }} = {{ i }} + 1;
  END WHILE;{% endmacro %}

{#- Id i (0-based) of a list checked by check_id_list. CAST, not a plain assignment: MySQL
    assigns a JSON integer above 2^63 - 1 through a signed integer (error 1264, out of range). -#}
{% macro id_at(list, i) %}CAST(JSON_EXTRACT({{ list }}, CONCAT('$[', {{ i }}, ']')) AS UNSIGNED){% endmacro %}

{#- A DATETIME(6) as an RFC 3339 UTC string for a JSON answer (NULL stays NULL). -#}
{% macro json_time(v) %}DATE_FORMAT({{ v }}, '%Y-%m-%dT%H:%i:%s.%fZ'){% endmacro %}

{#- Whether queue `q` has a ready task: one probe of ix_task_dispatch that stops at the first entry.
    A scalar subquery with LIMIT 1, not EXISTS: MariaDB turns `EXISTS (SELECT ... WHERE t.queue_id
    = q.id ...)` into a semi-join and may materialise it, scanning the whole of ix_task_dispatch
    (every task of every queue) on each call; that was most of a keyed task's row reads. -#}
{% macro queue_has_ready(q) %}(SELECT 1 FROM orbit_task t FORCE INDEX (ix_task_dispatch)
             WHERE t.queue_id = {{ q }}.id AND t.lane = 'ready' LIMIT 1) IS NOT NULL{% endmacro %}

{#- Sets {{ out }} to the JSON array (text) of the unpaused queues among {{ queues }} (a FROM clause
    whose rows have a queue_id column, ascii_bin) that have a ready task: the queues whose worker
    sessions a change should wake. One index probe per queue (ix_task_dispatch); '[]' when none.
    (SELECT ... INTO: a plain read.) -#}
{% macro ready_queues_into(out, queues) %}SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO {{ out }}
      FROM {{ queues }}
      STRAIGHT_JOIN orbit_queue q FORCE INDEX (PRIMARY) ON q.id = w.queue_id
     WHERE q.paused = 0
       AND {% call queue_has_ready("q") %}{% endmacro %}

{#- ready_queues_into over the queues of application {{ app }} (ix_queue_application). -#}
{% macro application_ready_queues_into(out, app) %}SELECT COALESCE(JSON_ARRAYAGG(q.id), '[]') INTO {{ out }}
      FROM orbit_queue q FORCE INDEX (ix_queue_application)
     WHERE q.application_id = {{ app }} AND q.paused = 0
       AND {% call queue_has_ready("q") %}{% endmacro %}

{#- Refuses a frame of a worker session that is closed (its socket went away, the sweep closed it
    after silence, or its credential was revoked: orbit_credential_revoke closes the credential's
    sessions) or does not exist: UNAUTHENTICATED, and the server ends the socket. A plain primary
    key read; {{ state }} is a scratch variable. -#}
{% macro session_open_check(session_id, state) %}SET {{ state }} = NULL;
  SELECT s.state INTO {{ state }} FROM orbit_session s WHERE s.id = {{ session_id }};
  IF {{ state }} IS NULL OR {{ state }} = 'closed' THEN
    {% call raise("UNAUTHENTICATED", "the session is closed") %};
  END IF{% endmacro %}

{#- The oldest waiting task (smallest id in lanes ready and blocked) of one key in one queue, into
    `out` (NULL = none): one ordered probe of ix_task_key per lane and priority (0-9), 20 index
    entries whatever the number of waiting tasks. Not a GROUP BY: MariaDB plans that loose index
    scan inside a procedure as a full range scan on some executions. Uses the INT `p` and the
    BIGINT UNSIGNED `id` as scratch variables. -#}
{% macro key_queue_oldest(resource, queue, out, p, id) %}SET {{ out }} = NULL, {{ p }} = 0;
    WHILE {{ p }} <= 9 DO
      SET {{ id }} = NULL;
      SELECT t.id INTO {{ id }} FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = {{ resource }} AND t.lane = 'blocked' AND t.queue_id = {{ queue }} AND t.priority = {{ p }}
       ORDER BY t.id LIMIT 1;
      IF {{ id }} IS NOT NULL AND ({{ out }} IS NULL OR {{ id }} < {{ out }}) THEN
        SET {{ out }} = {{ id }};
      END IF;
      SET {{ id }} = NULL;
      SELECT t.id INTO {{ id }} FROM orbit_task t FORCE INDEX (ix_task_key)
       WHERE t.resource_id = {{ resource }} AND t.lane = 'ready' AND t.queue_id = {{ queue }} AND t.priority = {{ p }}
       ORDER BY t.id LIMIT 1;
      IF {{ id }} IS NOT NULL AND ({{ out }} IS NULL OR {{ id }} < {{ out }}) THEN
        SET {{ out }} = {{ id }};
      END IF;
      SET {{ p }} = {{ p }} + 1;
    END WHILE{% endmacro %}

{#- The next queue id after `after` with a waiting task of the key (lanes ready or blocked), into
    `out` (NULL = none): one ordered probe per lane (MIN(queue_id) would read the rest of the
    range). -#}
{% macro key_next_queue(resource, after, out, a, b) %}SET {{ a }} = NULL, {{ b }} = NULL;
    SELECT t.queue_id INTO {{ a }} FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = {{ resource }} AND t.lane = 'ready' AND t.queue_id > {{ after }}
     ORDER BY t.queue_id LIMIT 1;
    SELECT t.queue_id INTO {{ b }} FROM orbit_task t FORCE INDEX (ix_task_key)
     WHERE t.resource_id = {{ resource }} AND t.lane = 'blocked' AND t.queue_id > {{ after }}
     ORDER BY t.queue_id LIMIT 1;
    SET {{ out }} = LEAST(COALESCE({{ a }}, {{ b }}), COALESCE({{ b }}, {{ a }})){% endmacro %}

{#- The fence's register of slot p_slot of key p_key (orbit_fence_write_slot): the key, byte 0x1F,
    the slot in decimal digits; and the checks its callers make first (their p_slot, p_key). -#}
{% macro fence_slot_register() %}CONCAT(p_key, X'1F', p_slot){% endmacro %}
{% macro fence_slot_register_check() %}IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND 999 THEN
    {% call raise("INVALID_ARGUMENT", "slot must be 0-999 (the key_slot of the grant)") %};
  END IF;
  IF p_key IS NULL OR LENGTH(p_key) = 0 THEN
    {% call raise("INVALID_ARGUMENT", "key must be 1-764 bytes") %};
  END IF;
  IF LENGTH(p_key) + 1 + LENGTH(p_slot) > {{ c.key_max_bytes }} THEN
    {% call raise("INVALID_ARGUMENT", "key too long for a slot register: key bytes + 1 + slot digits must be at most 764") %};
  END IF{% endmacro %}
