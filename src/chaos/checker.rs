//! The invariant checker: reads the attempt history, the task table and the fence's records after
//! a run and counts every violation of the guarantees. It trusts no clock: holders of one key are
//! ordered by the resource-row versions their grant and release wrote under that row's lock.
//!
//! - **overlaps**: per key, in grant order, a grant made while as many held the key as its
//!   limit allows (a holder released at or after a grant is still holding it then; never
//!   released counts as holding), or into a slot a live holder has, or outside the limit's
//!   slots. The limit and rate of a key are its policy's (`orbit_key_policy`, the longest
//!   matching pattern) at the end of the run: the runs checked never change policies.
//! - **rate_violations**: per key with a rate of G grants per T seconds, G + 1 grants within T
//!   seconds by the database's grant times (`granted_at`).
//! - **token_regressions**: per key, a grant whose token is not larger than the previous grant's;
//!   and per fenced register, an accepted write whose token is below an earlier accepted one.
//! - **lost_updates**: an element the fence accepted into a register (an `append` operation) that
//!   is missing from the register's final value.
//! - **lost_tasks**: a task the producer was told was accepted (201) that is missing, or not in a
//!   terminal state once the run has drained.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use sqlx::MySqlPool;

/// Task states in which a task has ended. `NEEDS_REVIEW` is an explained end: the outcome of a
/// started attempt could not be known, and a person decides.
pub const TERMINAL_STATES: [&str; 5] = [
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "EXPIRED",
    "NEEDS_REVIEW",
];

/// The one-line result of a run: `tasks=N faults=N overlaps=N token_regressions=N lost_updates=N lost_tasks=N`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub tasks: u64,
    pub faults: u64,
    pub overlaps: u64,
    pub token_regressions: u64,
    pub lost_updates: u64,
    pub lost_tasks: u64,
    pub crossed_answers: u64,
    pub internal_errors: u64,
    pub rate_violations: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tasks={} faults={} overlaps={} token_regressions={} lost_updates={} lost_tasks={} \
             crossed_answers={} internal_errors={} rate_violations={}",
            self.tasks,
            self.faults,
            self.overlaps,
            self.token_regressions,
            self.lost_updates,
            self.lost_tasks,
            self.crossed_answers,
            self.internal_errors,
            self.rate_violations
        )
    }
}

/// What the checker found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Accepted tasks checked.
    pub tasks: u64,
    pub overlaps: u64,
    pub token_regressions: u64,
    pub lost_updates: u64,
    pub lost_tasks: u64,
    /// Grants beyond a key's rate (see the module doc).
    pub rate_violations: u64,
    /// Keys whose permit is still held after the drain (a leak; also a violation).
    pub held_permits: u64,
    /// HTTP answers for another request or tenant ([`super::answers`]; set by the run).
    pub crossed_answers: u64,
    /// HTTP 500s ([`super::answers`]; set by the run).
    pub internal_errors: u64,
    /// Grants checked (attempts of keyed tasks).
    pub grants: u64,
    /// Writes the fence accepted.
    pub fenced_writes: u64,
    /// Accepted tasks by final state.
    pub states: BTreeMap<String, u64>,
    /// The first violations, described (at most [`Report::MAX_DETAILS`]).
    pub details: Vec<String>,
}

impl Report {
    pub const MAX_DETAILS: usize = 20;

    /// No guarantee was broken.
    pub fn ok(&self) -> bool {
        self.overlaps == 0
            && self.token_regressions == 0
            && self.lost_updates == 0
            && self.lost_tasks == 0
            && self.held_permits == 0
            && self.crossed_answers == 0
            && self.internal_errors == 0
            && self.rate_violations == 0
    }

    pub fn summary(&self, faults: u64) -> Summary {
        Summary {
            tasks: self.tasks,
            faults,
            overlaps: self.overlaps,
            token_regressions: self.token_regressions,
            lost_updates: self.lost_updates,
            lost_tasks: self.lost_tasks,
            crossed_answers: self.crossed_answers,
            internal_errors: self.internal_errors,
            rate_violations: self.rate_violations,
        }
    }

    fn violation(&mut self, what: String) {
        if self.details.len() < Self::MAX_DETAILS {
            self.details.push(what);
        }
    }
}

/// The element a fenced append writes for an attempt; the operation id carries it.
pub fn append_operation_id(task_id: u64, attempt_id: u64) -> String {
    format!("append/{task_id}.{attempt_id}")
}

/// The element recorded in the register for an attempt.
pub fn element(task_id: u64, attempt_id: u64) -> String {
    format!("{task_id}.{attempt_id}")
}

/// Checks the Orbit database (`orbit`), the fenced registers (`fence`, if the run wrote through
/// one) and the list of task ids the producer saw accepted.
pub async fn check(
    orbit: &MySqlPool,
    fence: Option<&MySqlPool>,
    accepted: &[u64],
) -> Result<Report, sqlx::Error> {
    let mut report = Report {
        tasks: accepted.len() as u64,
        ..Report::default()
    };
    check_grants(orbit, &mut report).await?;
    check_tasks(orbit, accepted, &mut report).await?;
    if let Some(fence) = fence {
        check_fence(fence, &mut report).await?;
    }
    Ok(report)
}

/// One grant of a key, as the attempt row records it.
struct KeyGrant {
    attempt: u64,
    token: u64,
    granted: u64,
    released: u64,
    slot: u32,
    /// `granted_at` in microseconds since the epoch.
    at_us: i64,
}

/// Per key, in grant order: tokens strictly increase; no grant is made while the key's limit is
/// reached or into a live holder's slot; no rate window holds more grants than the rate; no
/// permit is still held.
async fn check_grants(orbit: &MySqlPool, report: &mut Report) -> Result<(), sqlx::Error> {
    // Each key's policy: the longest matching pattern, an exact key before a prefix of the same
    // length (as orbit_key_policy says); none = one holder, no rate.
    let rules: Vec<(u64, u32, u32, u32)> = sqlx::query_as(
        "SELECT r.id, CAST(COALESCE(p.holder_limit, 1) AS UNSIGNED), CAST(COALESCE(p.rate_grants, 0) AS UNSIGNED), \
                CAST(COALESCE(p.rate_per_seconds, 0) AS UNSIGNED) \
           FROM orbit_resource r \
           LEFT JOIN orbit_key_policy p ON p.id = ( \
                SELECT x.id FROM orbit_key_policy x \
                 WHERE x.namespace_id = r.namespace_id \
                   AND ((x.match_kind = 'exact' AND x.key_pattern = r.concurrency_key) \
                        OR (x.match_kind = 'prefix' AND x.key_pattern = LEFT(r.concurrency_key, LENGTH(x.key_pattern)))) \
                 ORDER BY LENGTH(x.key_pattern) DESC, x.match_kind = 'exact' DESC LIMIT 1)",
    )
    .fetch_all(orbit)
    .await?;
    let rules: BTreeMap<u64, (u32, u32, u32)> = rules
        .into_iter()
        .map(|(key, limit, grants, seconds)| (key, (limit, grants, seconds)))
        .collect();
    let rows: Vec<(u64, u64, u64, u64, u64, u32, i64)> = sqlx::query_as(
        "SELECT resource_id, id, concurrency_token, grant_version, release_version, CAST(key_slot AS UNSIGNED), \
                CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', granted_at) AS SIGNED) \
           FROM orbit_attempt WHERE resource_id <> 0 ORDER BY resource_id, grant_version",
    )
    .fetch_all(orbit)
    .await?;
    report.grants = rows.len() as u64;
    let mut per_key: BTreeMap<u64, Vec<KeyGrant>> = BTreeMap::new();
    for (resource, attempt, token, granted, released, slot, at_us) in rows {
        per_key.entry(resource).or_default().push(KeyGrant {
            attempt,
            token,
            granted,
            released,
            slot,
            at_us,
        });
    }
    for (key, grants) in &per_key {
        let (limit, rate_grants, rate_seconds) = rules.get(key).copied().unwrap_or((1, 0, 0));
        // The holders live at each grant: granted before it, released at or after it (or never).
        let mut live: Vec<&KeyGrant> = Vec::new();
        for (i, b) in grants.iter().enumerate() {
            if i > 0 && b.token <= grants[i - 1].token {
                let a = &grants[i - 1];
                report.token_regressions += 1;
                report.violation(format!(
                    "key {key}: token regression: attempt {} got {}, the next grant (attempt {}) got {}",
                    a.attempt, a.token, b.attempt, b.token
                ));
            }
            live.retain(|a| a.released == 0 || a.released >= b.granted);
            if live.len() as u32 >= limit
                || b.slot >= limit
                || live.iter().any(|a| a.slot == b.slot)
            {
                report.overlaps += 1;
                let holders: Vec<String> = live
                    .iter()
                    .map(|a| {
                        format!(
                            "attempt {} (slot {}, granted v{}, released v{})",
                            a.attempt, a.slot, a.granted, a.released
                        )
                    })
                    .collect();
                report.violation(format!(
                    "key {key} (limit {limit}): attempt {} (slot {}) granted at v{} while held by {}",
                    b.attempt,
                    b.slot,
                    b.granted,
                    holders.join(", ")
                ));
            }
            live.push(b);
            let g = rate_grants as usize;
            if g > 0 && i >= g {
                let window_us = i64::from(rate_seconds) * 1_000_000;
                let earlier = &grants[i - g];
                if b.at_us - earlier.at_us < window_us {
                    report.rate_violations += 1;
                    report.violation(format!(
                        "key {key} (rate {rate_grants}/{rate_seconds} s): attempt {} was granted {} us after attempt {}, {rate_grants} grants earlier",
                        b.attempt,
                        b.at_us - earlier.at_us,
                        earlier.attempt
                    ));
                }
            }
        }
    }
    let held: Vec<(u64, u64)> = sqlx::query_as(
        "SELECT id, CAST(holders AS UNSIGNED) FROM orbit_resource WHERE holders <> 0",
    )
    .fetch_all(orbit)
    .await?;
    report.held_permits = held.len() as u64;
    for (key, holders) in held {
        report.violation(format!(
            "key {key}: {holders} permit(s) still held after the drain"
        ));
    }
    Ok(())
}

/// Every accepted task exists and has ended.
async fn check_tasks(
    orbit: &MySqlPool,
    accepted: &[u64],
    report: &mut Report,
) -> Result<(), sqlx::Error> {
    let mut found: BTreeMap<u64, String> = BTreeMap::new();
    for chunk in accepted.chunks(500) {
        let list = chunk
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        // The ids are integers this process produced; no text from outside reaches the query.
        let rows: Vec<(u64, String)> = sqlx::query_as(&format!(
            "SELECT id, CAST(state AS CHAR) FROM orbit_task WHERE id IN ({list})"
        ))
        .fetch_all(orbit)
        .await?;
        found.extend(rows);
    }
    for id in accepted {
        match found.get(id) {
            None => {
                report.lost_tasks += 1;
                report.violation(format!("task {id} was accepted but is missing"));
            }
            Some(state) => {
                *report.states.entry(state.clone()).or_default() += 1;
                if !TERMINAL_STATES.contains(&state.as_str()) {
                    report.lost_tasks += 1;
                    report.violation(format!("task {id} never ended: still {state}"));
                }
            }
        }
    }
    Ok(())
}

/// Accepted fenced writes: tokens never go back per register, and every appended element is in
/// the register's final value.
async fn check_fence(fence: &MySqlPool, report: &mut Report) -> Result<(), sqlx::Error> {
    // Binary collations arrive as bytes.
    let writes: Vec<(Vec<u8>, Vec<u8>, Vec<u8>, u64)> = sqlx::query_as(
        "SELECT CAST(fence_namespace AS BINARY), resource_key, operation_id, token \
           FROM orbit_fence_operation ORDER BY id",
    )
    .fetch_all(fence)
    .await?;
    report.fenced_writes = writes.len() as u64;
    let registers: Vec<(Vec<u8>, Vec<u8>, Option<Vec<u8>>)> = sqlx::query_as(
        "SELECT CAST(fence_namespace AS BINARY), resource_key, value FROM orbit_fence_register",
    )
    .fetch_all(fence)
    .await?;
    let finals: BTreeMap<(Vec<u8>, Vec<u8>), HashSet<String>> = registers
        .into_iter()
        .map(|(ns, key, value)| {
            let elements = String::from_utf8_lossy(&value.unwrap_or_default())
                .split_whitespace()
                .map(str::to_string)
                .collect();
            ((ns, key), elements)
        })
        .collect();
    let mut highest: BTreeMap<(Vec<u8>, Vec<u8>), u64> = BTreeMap::new();
    for (ns, key, operation, token) in writes {
        let register = (ns, key);
        let name = String::from_utf8_lossy(&register.1).into_owned();
        let previous = highest.entry(register.clone()).or_default();
        if token < *previous {
            report.token_regressions += 1;
            report.violation(format!(
                "register {name}: the fence accepted token {token} after {previous}"
            ));
        }
        *previous = (*previous).max(token);
        let operation = String::from_utf8_lossy(&operation);
        if let Some(element) = operation.strip_prefix("append/") {
            let present = finals
                .get(&register)
                .is_some_and(|elements| elements.contains(element));
            if !present {
                report.lost_updates += 1;
                report.violation(format!(
                    "register {name}: element {element} was accepted (token {token}) but is missing from the final value"
                ));
            }
        }
    }
    Ok(())
}
