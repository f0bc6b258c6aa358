//! The askama template registry: one struct per file under `templates/`, all sharing [`Consts`].
//!
//! Adding a table or procedure means adding its template file and one line to `registry!` below;
//! `gen` refuses to run while a template file is not registered.

use askama::Template;

use super::Kind;

/// Values the templates share, so a limit is written once (e.g. the key length in the column
/// type, the validation and the error message).
pub struct Consts {
    /// Longest `concurrency_key`, in Unicode characters (SPEC §3).
    pub key_max_chars: u32,
    /// Bytes that many 4-byte UTF-8 characters need: the VARBINARY width of key columns.
    pub key_max_bytes: u32,
    /// Character set and collation for every text parameter and column, spelled once.
    pub utf8: &'static str,
    /// The same for ASCII identifiers (queue ids, states, codes): binary comparison.
    pub ascii: &'static str,
    /// Largest token a key can be granted: `2^64 - 1`, refused rather than wrapped.
    pub token_max: &'static str,
    /// Rows each application's quota counters are split over (`orbit_application_quota.slot`
    /// 0..N-1). A transaction charges one slot, so up to N concurrent submits, claims and finishes
    /// of one application update different rows instead of queueing on one row lock. Each slot
    /// enforces its exact share of a limit L: `L DIV N`, plus 1 for slots below `L MOD N`; the
    /// shares add up to L, so the application's total never exceeds L.
    pub quota_slots: u32,
    /// A result's grant starts its scan of a ready lane where the session's last scan of that
    /// queue stopped (`orbit_session.scan_task_id`), past the entries grants moved out of the
    /// lane that purge has not removed yet; every Nth grant of a session scans from the start,
    /// which bounds how long a task readied behind that point (a retry, a promoted key's task)
    /// can be passed over by hinted scans.
    pub scan_restart_every: u32,
    /// With `catch_up: none`, a plan's slot fires only within this many seconds of its time
    /// ([`crate::schedule::MISSED_GRACE_SECONDS`]).
    pub plan_missed_grace_seconds: i64,
    /// With `catch_up: all`, at most this many missed slots of one plan fire
    /// ([`crate::schedule::CATCH_UP_ALL_MAX`]).
    pub plan_catch_up_all_max: u32,
    /// `orbit_plan_fire_due` fires up to this many unkeyed plans per transaction (one durable
    /// commit), set-based: a handful of statements per batch, not per plan; a keyed plan fires
    /// alone. 100: one call over 2,000 due unkeyed plans took the server 0.12-0.16 s at 100 and
    /// at 200, 0.26-0.35 s at 20, 1.2 s one plan at a time (MariaDB 10.11), and a batch of 100
    /// holds its locks for a few milliseconds.
    pub plan_fire_batch: u32,
    /// How long a finished task is kept, in seconds, for a queue created without a retention
    /// (and for every queue an upgrade from 0.1 finds): 7 days. `orbit_queue.retention_seconds`'s
    /// column default, so every server reads the same value from the database.
    pub retention_default_seconds: u32,
    /// The smallest retention a queue may set: one minute.
    pub retention_min_seconds: u32,
    /// The largest: 3650 days.
    pub retention_max_seconds: u32,
    /// Tasks `orbit_task_purge` deletes per transaction: short enough that no lock is held long,
    /// long enough that a commit is not paid per task.
    pub purge_batch: u32,
    /// How far ahead a task may be delayed or debounced, in seconds: 365 days. The bound of
    /// `run_at`, `delay_seconds`, `debounce_seconds` and `debounce_max_seconds`, so a typo in a
    /// year cannot park a task (and its quota charge) for centuries.
    pub delay_max_seconds: u32,
    /// Key policies a namespace may hold: every keyed submit reads its namespace's policies
    /// (orbit_key_policy), so their number bounds that read.
    pub key_policies_max: u32,
    /// The largest holder limit a key policy may set: a grant of a key with room finds its slot
    /// among at most this many (orbit_key_slot).
    pub key_limit_max: u32,
    /// The largest `rate_grants` of a key policy: a rate-limited key keeps that many grant times
    /// (orbit_key_rate_log), and a grant after a rate change reads that many of the key's
    /// attempts.
    pub rate_grants_max: u32,
    /// The longest rate window, in seconds: one day.
    pub rate_window_max_seconds: u32,
}

pub const CONSTS: Consts = Consts {
    key_max_chars: 191,
    key_max_bytes: 764,
    utf8: "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
    ascii: "CHARACTER SET ascii COLLATE ascii_bin",
    token_max: "18446744073709551615",
    quota_slots: 16,
    scan_restart_every: 16,
    plan_missed_grace_seconds: crate::schedule::MISSED_GRACE_SECONDS,
    plan_catch_up_all_max: crate::schedule::CATCH_UP_ALL_MAX,
    plan_fire_batch: 100,
    retention_default_seconds: 604_800,
    retention_min_seconds: 60,
    retention_max_seconds: 315_360_000,
    purge_batch: 50,
    delay_max_seconds: 31_536_000,
    key_policies_max: 1000,
    key_limit_max: 1000,
    rate_grants_max: 1000,
    rate_window_max_seconds: 86_400,
};

/// One registered template.
pub struct Registered {
    pub kind: Kind,
    pub name: &'static str,
    pub template: &'static str,
    pub render: fn(&Consts) -> askama::Result<String>,
    /// The template's text as compiled into this binary, so `gen --check` can tell when a
    /// template on disk changed since the binary was built.
    pub source: &'static str,
}

macro_rules! registry {
    ($( $kind:ident $name:ident => $path:literal ),* $(,)?) => {
        $(
            #[allow(non_camel_case_types, dead_code)]
            #[derive(Template)]
            #[template(path = $path, escape = "none")]
            struct $name<'a> {
                c: &'a Consts,
            }
        )*

        /// Every template, tables first, each group in name order.
        pub static REGISTRY: &[Registered] = &[
            $(
                Registered {
                    kind: Kind::$kind,
                    name: stringify!($name),
                    template: $path,
                    render: |c| $name { c }.render(),
                    source: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/templates/", $path)),
                },
            )*
        ];
    };
}

registry! {
    Table orbit_fence_operation => "fence/tables/orbit_fence_operation.sql",
    Table orbit_fence_register => "fence/tables/orbit_fence_register.sql",
    Procedure orbit_fence_read => "fence/procedures/orbit_fence_read.sql",
    Procedure orbit_fence_read_slot => "fence/procedures/orbit_fence_read_slot.sql",
    Procedure orbit_fence_write => "fence/procedures/orbit_fence_write.sql",
    Procedure orbit_fence_write_slot => "fence/procedures/orbit_fence_write_slot.sql",
    Table orbit_application => "tables/orbit_application.sql",
    Table orbit_application_quota => "tables/orbit_application_quota.sql",
    Table orbit_attempt => "tables/orbit_attempt.sql",
    Table orbit_credential => "tables/orbit_credential.sql",
    Table orbit_credential_scope => "tables/orbit_credential_scope.sql",
    Table orbit_environment => "tables/orbit_environment.sql",
    Table orbit_extension => "tables/orbit_extension.sql",
    Table orbit_idempotency => "tables/orbit_idempotency.sql",
    Table orbit_key_policy => "tables/orbit_key_policy.sql",
    Table orbit_key_rate_log => "tables/orbit_key_rate_log.sql",
    Table orbit_key_slot => "tables/orbit_key_slot.sql",
    Table orbit_namespace => "tables/orbit_namespace.sql",
    Table orbit_plan => "tables/orbit_plan.sql",
    Table orbit_plan_fire => "tables/orbit_plan_fire.sql",
    Table orbit_plan_version => "tables/orbit_plan_version.sql",
    Table orbit_queue => "tables/orbit_queue.sql",
    Table orbit_resource => "tables/orbit_resource.sql",
    Table orbit_session => "tables/orbit_session.sql",
    Table orbit_session_queue => "tables/orbit_session_queue.sql",
    Table orbit_task => "tables/orbit_task.sql",
    Table orbit_task_event => "tables/orbit_task_event.sql",
    Table orbit_worker => "tables/orbit_worker.sql",
    Procedure orbit_admin_bootstrap => "procedures/orbit_admin_bootstrap.sql",
    Procedure orbit_attempt_charge => "procedures/orbit_attempt_charge.sql",
    Procedure orbit_attempt_end => "procedures/orbit_attempt_end.sql",
    Procedure orbit_attempt_finish => "procedures/orbit_attempt_finish.sql",
    Procedure orbit_attempt_get => "procedures/orbit_attempt_get.sql",
    Procedure orbit_attempt_grant => "procedures/orbit_attempt_grant.sql",
    Procedure orbit_attempt_list => "procedures/orbit_attempt_list.sql",
    Procedure orbit_attempt_renew => "procedures/orbit_attempt_renew.sql",
    Procedure orbit_attempt_start => "procedures/orbit_attempt_start.sql",
    Procedure orbit_auth_check => "procedures/orbit_auth_check.sql",
    Procedure orbit_auth_queue_check => "procedures/orbit_auth_queue_check.sql",
    Procedure orbit_auth_queue_visible => "procedures/orbit_auth_queue_visible.sql",
    Procedure orbit_credential_check => "procedures/orbit_credential_check.sql",
    Procedure orbit_credential_create => "procedures/orbit_credential_create.sql",
    Procedure orbit_credential_list => "procedures/orbit_credential_list.sql",
    Procedure orbit_credential_revoke => "procedures/orbit_credential_revoke.sql",
    Procedure orbit_extension_version => "procedures/orbit_extension_version.sql",
    Procedure orbit_key_get => "procedures/orbit_key_get.sql",
    Procedure orbit_key_list => "procedures/orbit_key_list.sql",
    Procedure orbit_key_metrics => "procedures/orbit_key_metrics.sql",
    Procedure orbit_key_policy_delete => "procedures/orbit_key_policy_delete.sql",
    Procedure orbit_key_policy_list => "procedures/orbit_key_policy_list.sql",
    Procedure orbit_key_policy_set => "procedures/orbit_key_policy_set.sql",
    Procedure orbit_key_promote => "procedures/orbit_key_promote.sql",
    Procedure orbit_key_promote_all => "procedures/orbit_key_promote_all.sql",
    Procedure orbit_key_rate_check => "procedures/orbit_key_rate_check.sql",
    Procedure orbit_key_release => "procedures/orbit_key_release.sql",
    Procedure orbit_key_validate => "procedures/orbit_key_validate.sql",
    Procedure orbit_lease_recover => "procedures/orbit_lease_recover.sql",
    Procedure orbit_metrics_snapshot => "procedures/orbit_metrics_snapshot.sql",
    Procedure orbit_plan_create => "procedures/orbit_plan_create.sql",
    Procedure orbit_plan_fire_due => "procedures/orbit_plan_fire_due.sql",
    Procedure orbit_plan_get => "procedures/orbit_plan_get.sql",
    Procedure orbit_plan_list => "procedures/orbit_plan_list.sql",
    Procedure orbit_plan_schedule_due => "procedures/orbit_plan_schedule_due.sql",
    Procedure orbit_plan_schedule_set => "procedures/orbit_plan_schedule_set.sql",
    Procedure orbit_plan_set_paused => "procedures/orbit_plan_set_paused.sql",
    Procedure orbit_plan_version_create => "procedures/orbit_plan_version_create.sql",
    Procedure orbit_queue_create => "procedures/orbit_queue_create.sql",
    Procedure orbit_queue_get => "procedures/orbit_queue_get.sql",
    Procedure orbit_queue_list => "procedures/orbit_queue_list.sql",
    Procedure orbit_queue_set_paused => "procedures/orbit_queue_set_paused.sql",
    Procedure orbit_queue_set_retention => "procedures/orbit_queue_set_retention.sql",
    Procedure orbit_session_attempts => "procedures/orbit_session_attempts.sql",
    Procedure orbit_session_close => "procedures/orbit_session_close.sql",
    Procedure orbit_session_open => "procedures/orbit_session_open.sql",
    Procedure orbit_session_sweep => "procedures/orbit_session_sweep.sql",
    Procedure orbit_task_cancel => "procedures/orbit_task_cancel.sql",
    Procedure orbit_task_charge => "procedures/orbit_task_charge.sql",
    Procedure orbit_task_claim => "procedures/orbit_task_claim.sql",
    Procedure orbit_task_create => "procedures/orbit_task_create.sql",
    Procedure orbit_task_create_keyed_many => "procedures/orbit_task_create_keyed_many.sql",
    Procedure orbit_task_event_list => "procedures/orbit_task_event_list.sql",
    Procedure orbit_task_expire_due => "procedures/orbit_task_expire_due.sql",
    Procedure orbit_task_get => "procedures/orbit_task_get.sql",
    Procedure orbit_task_grant => "procedures/orbit_task_grant.sql",
    Procedure orbit_task_list => "procedures/orbit_task_list.sql",
    Procedure orbit_task_place => "procedures/orbit_task_place.sql",
    Procedure orbit_task_promote_due => "procedures/orbit_task_promote_due.sql",
    Procedure orbit_task_purge => "procedures/orbit_task_purge.sql",
    Procedure orbit_task_ready_queues => "procedures/orbit_task_ready_queues.sql",
    Procedure orbit_task_resolve => "procedures/orbit_task_resolve.sql",
    Procedure orbit_task_submit => "procedures/orbit_task_submit.sql",
    Procedure orbit_task_submit_many => "procedures/orbit_task_submit_many.sql",
    Procedure orbit_task_validate => "procedures/orbit_task_validate.sql",
}

/// One registered upgrade template: the reviewed table changes and data migrations of the
/// migration to `version` (see [`super::upgrade`]).
pub struct RegisteredUpgrade {
    pub version: u32,
    pub template: &'static str,
    pub render: fn(&Consts) -> askama::Result<String>,
    pub source: &'static str,
}

macro_rules! upgrades {
    ($( $version:literal $name:ident => $path:literal ),* $(,)?) => {
        $(
            #[allow(non_camel_case_types, dead_code)]
            #[derive(Template)]
            #[template(path = $path, escape = "none")]
            struct $name<'a> {
                c: &'a Consts,
            }
        )*

        /// Every upgrade template, in version order.
        pub static UPGRADES: &[RegisteredUpgrade] = &[
            $(
                RegisteredUpgrade {
                    version: $version,
                    template: $path,
                    render: |c| $name { c }.render(),
                    source: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/templates/", $path)),
                },
            )*
        ];
    };
}

upgrades! {
    2 upgrade_000002 => "upgrades/000002.sql",
}
