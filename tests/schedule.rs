//! Cron schedules (src/schedule.rs): parsing, time zones, the daylight-saving rules the
//! documentation states, and catch_up's bound. Pure computation: no database.

use chrono::{DateTime, TimeZone, Utc};
use orbit::schedule::{CatchUp, CronSchedule, CATCH_UP_ALL_MAX};

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn cron(expr: &str, tz: &str) -> CronSchedule {
    CronSchedule::parse(expr, tz).unwrap()
}

fn run(s: &CronSchedule, from: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let first = s.after(from).unwrap();
    s.upcoming(first, n)
}

#[test]
fn weekday_mornings_in_berlin_are_read_on_berlin_clocks() {
    let s = cron("30 2 * * 1-5", "Europe/Berlin");
    // Friday 2027-01-08 (CET, UTC+1), then Monday, Tuesday; the weekend is skipped.
    assert_eq!(
        run(&s, utc(2027, 1, 7, 12, 0, 0), 3),
        [
            utc(2027, 1, 8, 1, 30, 0),
            utc(2027, 1, 11, 1, 30, 0),
            utc(2027, 1, 12, 1, 30, 0)
        ]
    );
    // In summer (CEST, UTC+2) the same wall-clock time is an hour earlier in UTC.
    assert_eq!(
        s.after(utc(2027, 7, 5, 12, 0, 0)),
        Some(utc(2027, 7, 6, 0, 30, 0))
    );
}

#[test]
fn a_time_in_the_spring_forward_gap_fires_once_at_the_end_of_the_gap() {
    // Europe/Berlin 2027-03-28: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    let s = cron("30 2 * * *", "Europe/Berlin");
    assert_eq!(
        run(&s, utc(2027, 3, 27, 0, 0, 0), 3),
        [
            utc(2027, 3, 27, 1, 30, 0), // 02:30 CET
            utc(2027, 3, 28, 1, 0, 0),  // 03:00 CEST: the first minute after the gap
            utc(2027, 3, 29, 0, 30, 0), // 02:30 CEST
        ]
    );
    // A stepped expression skips the times inside the gap instead.
    let s = cron("*/30 * * * *", "Europe/Berlin");
    assert_eq!(
        run(&s, utc(2027, 3, 28, 0, 15, 0), 3),
        [
            utc(2027, 3, 28, 0, 30, 0), // 01:30 CET
            utc(2027, 3, 28, 1, 0, 0),  // 03:00 CEST
            utc(2027, 3, 28, 1, 30, 0), // 03:30 CEST
        ]
    );
}

#[test]
fn a_time_repeated_at_fall_back_fires_once_at_its_first_occurrence() {
    // America/New_York 2027-11-07: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    let s = cron("30 1 * * *", "America/New_York");
    assert_eq!(
        run(&s, utc(2027, 11, 6, 12, 0, 0), 2),
        [
            utc(2027, 11, 7, 5, 30, 0), // 01:30 EDT; not again at 06:30 UTC (01:30 EST)
            utc(2027, 11, 8, 6, 30, 0), // 01:30 EST the next day
        ]
    );
    // Searching from between the two passes does not fire the second one.
    assert_eq!(
        s.after(utc(2027, 11, 7, 5, 45, 0)),
        Some(utc(2027, 11, 8, 6, 30, 0))
    );
    // Europe/Berlin 2027-10-31: 03:00 CEST falls back to 02:00 CET; 02:30 fires once, in CEST.
    let s = cron("30 2 * * *", "Europe/Berlin");
    assert_eq!(
        run(&s, utc(2027, 10, 30, 12, 0, 0), 2),
        [utc(2027, 10, 31, 0, 30, 0), utc(2027, 11, 1, 1, 30, 0)]
    );
    // A stepped expression fires on both passes of the repeated hour.
    let s = cron("0,30 * * * *", "America/New_York");
    assert_eq!(
        run(&s, utc(2027, 11, 7, 4, 45, 0), 5),
        [
            utc(2027, 11, 7, 5, 0, 0),  // 01:00 EDT
            utc(2027, 11, 7, 5, 30, 0), // 01:30 EDT
            utc(2027, 11, 7, 6, 0, 0),  // 01:00 EST
            utc(2027, 11, 7, 6, 30, 0), // 01:30 EST
            utc(2027, 11, 7, 7, 0, 0),  // 02:00 EST
        ]
    );
}

#[test]
fn six_fields_put_seconds_first() {
    let s = cron("*/15 * * * * *", "UTC");
    assert_eq!(
        run(&s, utc(2027, 1, 1, 0, 0, 1), 3),
        [
            utc(2027, 1, 1, 0, 0, 15),
            utc(2027, 1, 1, 0, 0, 30),
            utc(2027, 1, 1, 0, 0, 45)
        ]
    );
    // Names and nicknames.
    assert_eq!(
        cron("0 9 * JAN MON", "UTC").after(utc(2027, 1, 1, 0, 0, 0)),
        Some(utc(2027, 1, 4, 9, 0, 0))
    );
    assert_eq!(
        cron("@daily", "Asia/Tokyo").after(utc(2027, 1, 1, 0, 0, 0)),
        Some(utc(2027, 1, 1, 15, 0, 0))
    );
}

#[test]
fn invalid_expressions_and_zones_name_their_field() {
    for bad in [
        "",
        "* * * *",
        "* * * * * * *",
        "61 * * * *",
        "* 25 * * *",
        "nope * * * *",
        "*/0 * * * *",
        "é * * * *",
    ] {
        let e = CronSchedule::parse(bad, "UTC").unwrap_err();
        assert_eq!(e.field, "cron", "{bad:?}: {e:?}");
    }
    for bad in ["", "Mars/Olympus", "europe/berlin", "UTC+1"] {
        let e = CronSchedule::parse("0 * * * *", bad).unwrap_err();
        assert_eq!(e.field, "timezone", "{bad:?}: {e:?}");
    }
    // February 30th never comes.
    let e = CronSchedule::parse_new("0 0 30 2 *", "UTC").unwrap_err();
    assert_eq!(e.field, "cron", "{e:?}");
}

#[test]
fn catch_up_all_fires_at_most_the_most_recent_missed_slots() {
    let s = cron("* * * * *", "UTC");
    let now = utc(2027, 6, 1, 12, 0, 30);
    // A short stop: every missed minute, oldest first.
    let fired = utc(2027, 6, 1, 11, 50, 0);
    assert_eq!(
        s.next(fired, now, CatchUp::All),
        Some(utc(2027, 6, 1, 11, 51, 0))
    );
    // A long stop: the next one is the CATCH_UP_ALL_MAX-th most recent, so that many fire.
    let fired = utc(2027, 5, 1, 0, 0, 0);
    let next = s.next(fired, now, CatchUp::All).unwrap();
    assert_eq!(
        next,
        utc(2027, 6, 1, 12, 0, 0) - chrono::Duration::minutes(i64::from(CATCH_UP_ALL_MAX) - 1)
    );
    // one and none: the first fire time after the anchor (the procedure anchors them at the
    // firing time, so the missed ones are behind it).
    assert_eq!(
        s.next(now, now, CatchUp::One),
        Some(utc(2027, 6, 1, 12, 1, 0))
    );
    assert_eq!(
        s.next(now, now, CatchUp::None),
        Some(utc(2027, 6, 1, 12, 1, 0))
    );
}

#[test]
fn weekdays_follow_vixie_cron() {
    use chrono::Datelike;
    // 0 and 7 are Sunday.
    for expr in ["0 0 * * 0", "0 0 * * 7", "0 0 * * SUN"] {
        let t = cron(expr, "UTC").after(utc(2027, 1, 1, 0, 0, 0)).unwrap();
        assert_eq!(t, utc(2027, 1, 3, 0, 0, 0), "{expr}");
        assert_eq!(t.weekday(), chrono::Weekday::Sun);
    }
    // Both day fields restricted: either matching fires (the 13th, or any Friday).
    let s = cron("0 0 13 * 5", "UTC");
    assert_eq!(
        run(&s, utc(2027, 1, 1, 0, 0, 0), 3),
        [
            utc(2027, 1, 8, 0, 0, 0),
            utc(2027, 1, 13, 0, 0, 0),
            utc(2027, 1, 15, 0, 0, 0)
        ]
    );
}
