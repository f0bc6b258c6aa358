//! The invariant checker: reads the attempt history, the task table and the fence's records after
//! a run and counts every violation of the guarantees. It trusts no clock: holders of one key are
//! ordered by the resource-row versions their grant and release wrote under that row's lock.
//!
//! - **overlaps**: per key, in grant order, a holder released at or after the next grant (or
//!   never released while another was granted).
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
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tasks={} faults={} overlaps={} token_regressions={} lost_updates={} lost_tasks={} \
             crossed_answers={} internal_errors={}",
            self.tasks,
            self.faults,
            self.overlaps,
            self.token_regressions,
            self.lost_updates,
            self.lost_tasks,
            self.crossed_answers,
            self.internal_errors
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

/// Per key, in grant order: tokens strictly increase and each holder released before the next
/// grant; no permit is still held.
async fn check_grants(orbit: &MySqlPool, report: &mut Report) -> Result<(), sqlx::Error> {
    let rows: Vec<(u64, u64, u64, u64, u64)> = sqlx::query_as(
        "SELECT resource_id, id, concurrency_token, grant_version, release_version FROM orbit_attempt \
          WHERE resource_id <> 0 ORDER BY resource_id, grant_version",
    )
    .fetch_all(orbit)
    .await?;
    report.grants = rows.len() as u64;
    let mut per_key: BTreeMap<u64, Vec<(u64, u64, u64, u64)>> = BTreeMap::new();
    for (resource, id, token, granted, released) in rows {
        per_key
            .entry(resource)
            .or_default()
            .push((id, token, granted, released));
    }
    for (key, attempts) in &per_key {
        for pair in attempts.windows(2) {
            let ((a, ta, ga, ra), (b, tb, gb, _)) = (pair[0], pair[1]);
            if tb <= ta {
                report.token_regressions += 1;
                report.violation(format!(
                    "key {key}: token regression: attempt {a} got {ta}, the next grant (attempt {b}) got {tb}"
                ));
            }
            if ra == 0 || ra < ga || ra >= gb {
                report.overlaps += 1;
                report.violation(format!(
                    "key {key}: attempt {a} (granted v{ga}, released v{ra}) overlaps attempt {b} (granted v{gb})"
                ));
            }
        }
    }
    let held: Vec<(u64, u64)> = sqlx::query_as(
        "SELECT id, holder_attempt_id FROM orbit_resource WHERE holder_attempt_id <> 0",
    )
    .fetch_all(orbit)
    .await?;
    report.held_permits = held.len() as u64;
    for (key, attempt) in held {
        report.violation(format!(
            "key {key}: permit still held by attempt {attempt} after the drain"
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
