//! Plan schedules computed in Rust: cron expressions in an IANA time zone, the next fire time
//! after a fired slot under a plan's `catch_up`, and the upcoming fire times a plan view shows.
//!
//! The server computes a cron plan's next UTC fire time and stores it on the plan row
//! (`orbit_plan_schedule_set`); the firing itself stays in `orbit_plan_fire_due`. Interval plans
//! are computed entirely in SQL (`templates/procedures/orbit_plan_fire_due.sql`); this module
//! mirrors that rule only to list a view's upcoming times.
//!
//! # Daylight-saving time (the rules `croner` follows, tested in `tests/schedule.rs`)
//!
//! A cron expression is read on the wall clock of its time zone.
//! - **Gap (spring forward).** A fixed time that does not exist that day (02:30 in
//!   Europe/Berlin on 2027-03-28, when 02:00 jumps to 03:00) fires once at the first minute after
//!   the gap, 03:00 local (01:00 UTC). Times of an expression with a wildcard or step in its
//!   second, minute or hour field that fall in the gap are skipped.
//! - **Repeat (fall back).** A fixed time that happens twice (01:30 in America/New_York on
//!   2027-11-07) fires once, at its first occurrence (01:30 EDT, 05:30 UTC). An expression with a
//!   wildcard or step there fires on both passes of the repeated hour.

use std::str::FromStr;

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::{Cron, Direction};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a plan does about ticks missed while no server ran (or while it was behind).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Missed ticks are not fired: a tick fires only within [`MISSED_GRACE_SECONDS`] of its time.
    None,
    /// The missed ticks fire once together: the oldest fires, the others are skipped (the
    /// behaviour of plans before cron plans existed, and the default).
    #[default]
    One,
    /// Every missed tick fires, oldest first, but at most the [`CATCH_UP_ALL_MAX`] most recent.
    All,
}

impl CatchUp {
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::None => "none",
            CatchUp::One => "one",
            CatchUp::All => "all",
        }
    }
}

impl FromStr for CatchUp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(CatchUp::None),
            "one" => Ok(CatchUp::One),
            "all" => Ok(CatchUp::All),
            other => Err(format!("unknown catch_up {other:?}")),
        }
    }
}

/// What a plan's tick does when its `concurrency_key` is busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnBusy {
    /// Create the task anyway; it waits its turn on the key (the default).
    #[default]
    Queue,
    /// Create nothing while a task holds the key or waits for it; the plan's history records the
    /// tick as `skipped`.
    Skip,
    /// At most one waiting task per plan and key: while one this plan fired still waits, the
    /// tick keeps it (recorded as `kept`, naming that task) instead of adding another.
    ReplaceWaiting,
}

impl OnBusy {
    pub fn as_str(self) -> &'static str {
        match self {
            OnBusy::Queue => "queue",
            OnBusy::Skip => "skip",
            OnBusy::ReplaceWaiting => "replace_waiting",
        }
    }
}

impl FromStr for OnBusy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "queue" => Ok(OnBusy::Queue),
            "skip" => Ok(OnBusy::Skip),
            "replace_waiting" => Ok(OnBusy::ReplaceWaiting),
            other => Err(format!("unknown on_busy {other:?}")),
        }
    }
}

/// With `catch_up: all`, at most this many missed ticks of one plan fire after a stop (the most
/// recent ones); older ones are skipped. The same bound is written in
/// `orbit_plan_fire_due` for interval plans.
pub const CATCH_UP_ALL_MAX: u32 = 100;

/// With `catch_up: none`, a tick fires only if the scheduler reaches it within this many seconds
/// of its time; later it counts as missed. The same constant is written in `orbit_plan_fire_due`.
pub const MISSED_GRACE_SECONDS: i64 = 60;

/// A cron expression is 1-191 ASCII characters (the column), a time zone 1-64.
pub const CRON_MAX_LEN: usize = 191;
pub const TIMEZONE_MAX_LEN: usize = 64;

/// Why a cron schedule was refused; `field` is `cron` or `timezone`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError {
    pub field: &'static str,
    pub message: String,
}

/// A parsed cron expression and its time zone.
#[derive(Clone, Debug)]
pub struct CronSchedule {
    cron: Cron,
    tz: Tz,
}

impl CronSchedule {
    /// Parses a 5-field (minute granularity) or 6-field (seconds first) expression, with the
    /// names (`MON`, `JAN`), ranges, steps, lists, `L`, `W`, `#` and `@daily`-style nicknames
    /// croner reads; a year field is refused. `timezone` is an IANA name (`Europe/Berlin`,
    /// `UTC`).
    pub fn parse(expr: &str, timezone: &str) -> Result<CronSchedule, ScheduleError> {
        let cron_err = |message: String| ScheduleError {
            field: "cron",
            message,
        };
        if expr.trim().is_empty() || expr.len() > CRON_MAX_LEN || !expr.is_ascii() {
            return Err(cron_err(format!(
                "cron must be 1-{CRON_MAX_LEN} ASCII characters"
            )));
        }
        let fields = expr.split_whitespace().count();
        if !expr.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
            return Err(cron_err(format!(
                "cron must have 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), not {fields}"
            )));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| cron_err(format!("invalid cron expression: {e}")))?;
        if timezone.is_empty() || timezone.len() > TIMEZONE_MAX_LEN {
            return Err(ScheduleError {
                field: "timezone",
                message: format!(
                    "timezone must be an IANA time zone name of 1-{TIMEZONE_MAX_LEN} characters"
                ),
            });
        }
        let tz = Tz::from_str(timezone).map_err(|_| ScheduleError {
            field: "timezone",
            message: format!("unknown IANA time zone {timezone:?}"),
        })?;
        Ok(CronSchedule { cron, tz })
    }

    /// [`CronSchedule::parse`] for a new plan or version: an expression that never fires after
    /// now (`0 0 30 2 *`) is refused too.
    pub fn parse_new(expr: &str, timezone: &str) -> Result<CronSchedule, ScheduleError> {
        let s = CronSchedule::parse(expr, timezone)?;
        if s.after(Utc::now()).is_none() {
            return Err(ScheduleError {
                field: "cron",
                message: "cron expression never fires".into(),
            });
        }
        Ok(s)
    }

    /// The first fire time strictly after `t`; `None` when there is none (croner searches up to
    /// the year 5000).
    pub fn after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&t.with_timezone(&self.tz), false)
            .ok()
            .map(|d| d.with_timezone(&Utc))
    }

    /// The latest fire time at or before `t`.
    fn at_or_before(&self, t: DateTime<Utc>, skip: usize) -> Option<DateTime<Utc>> {
        self.cron
            .iter_from(t.with_timezone(&self.tz), Direction::Backward)
            .nth(skip)
            .map(|d| d.with_timezone(&Utc))
    }

    /// The plan's next fire time once the slot `after` is behind it (`after` is the fired slot,
    /// or the moment a plan was created, resumed or given a new version): the first fire time
    /// after it. With `catch_up: all`, when more than [`CATCH_UP_ALL_MAX`] fire times lie between
    /// `after` and `now`, the older ones are skipped. (`none` and `one` need nothing here: the
    /// procedure anchors them at the firing time, and `none` skips a late tick when it fires.)
    pub fn next(
        &self,
        after: DateTime<Utc>,
        now: DateTime<Utc>,
        catch_up: CatchUp,
    ) -> Option<DateTime<Utc>> {
        let next = self.after(after)?;
        if catch_up == CatchUp::All && next <= now {
            let bound = self.at_or_before(now, CATCH_UP_ALL_MAX as usize - 1);
            return Some(bound.map_or(next, |b| b.max(next)));
        }
        Some(next)
    }

    /// `n` fire times from `first` on (inclusive when `first` is a fire time).
    pub fn upcoming(&self, first: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(n);
        let mut t = first;
        out.push(t);
        while out.len() < n {
            match self.after(t) {
                Some(next) => {
                    out.push(next);
                    t = next;
                }
                None => break,
            }
        }
        out
    }
}

/// `n` fire times of an interval plan from its next slot on.
pub fn interval_upcoming(first: DateTime<Utc>, seconds: i64, n: usize) -> Vec<DateTime<Utc>> {
    (0..n as i32)
        .map(|i| first + Duration::seconds(seconds * i64::from(i)))
        .collect()
}
