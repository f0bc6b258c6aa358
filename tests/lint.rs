//! The SQL lint (`orbit::codegen::lint`): each rule catches its planted bad statement under
//! `tests/fixtures/lint/`, a procedure using every construct lints clean, what sqlparser cannot
//! parse is listed, and the real templates lint clean.

use std::path::Path;

use orbit::codegen::lint::{lint, Report, Rule};
use orbit::codegen::{Kind, Object};

fn fixture(kind: Kind, name: &str, file: &str) -> Object {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lint")
        .join(file);
    let sql = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Object {
        set: orbit::codegen::Set::Extension,
        kind,
        name: name.to_string(),
        template: format!("{}/{file}", kind.dir()),
        purpose: "lint fixture".to_string(),
        doc: String::new(),
        sql,
    }
}

/// Lints the two good fixture tables plus `extra`.
fn lint_with(extra: Object) -> Report {
    lint(&[
        fixture(Kind::Table, "lint_job", "fixture_job_table.sql"),
        fixture(Kind::Table, "lint_counter", "fixture_counter_table.sql"),
        extra,
    ])
}

fn table(name: &str, file: &str) -> Report {
    lint_with(fixture(Kind::Table, name, file))
}

fn procedure(name: &str, file: &str) -> Report {
    lint_with(fixture(Kind::Procedure, name, file))
}

/// Lints `file` beside `lint_other`, the procedure it calls (see `calls_read_as_named_arguments`).
fn procedure_calling_other(name: &str, file: &str) -> Report {
    lint(&[
        fixture(Kind::Table, "lint_job", "fixture_job_table.sql"),
        fixture(Kind::Table, "lint_counter", "fixture_counter_table.sql"),
        fixture(Kind::Procedure, "lint_other", "lint_other.sql"),
        fixture(Kind::Procedure, name, file),
    ])
}

/// Asserts that some violation of `rule` is reported for `object` and mentions every `needle`;
/// returns the matching messages.
fn assert_violation(report: &Report, rule: Rule, object: &str, needles: &[&str]) -> Vec<String> {
    let hits: Vec<String> = report
        .violations
        .iter()
        .filter(|v| {
            v.rule == rule && v.object == object && needles.iter().all(|n| v.message.contains(n))
        })
        .map(|v| v.to_string())
        .collect();
    assert!(
        !hits.is_empty(),
        "expected a {rule:?} violation of {object} mentioning {needles:?}; got:\n{}",
        report
            .violations
            .iter()
            .map(|v| format!("  {:?} {v}", v.rule))
            .collect::<Vec<_>>()
            .join("\n")
    );
    hits
}

#[test]
fn fixture_tables_lint_clean() {
    let report = lint(&[
        fixture(Kind::Table, "lint_job", "fixture_job_table.sql"),
        fixture(Kind::Table, "lint_counter", "fixture_counter_table.sql"),
    ]);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    assert!(report.unparsed.is_empty(), "{:#?}", report.unparsed);
}

#[test]
fn column_without_comment() {
    let r = table("lint_no_column_comment", "column_without_comment.sql");
    let hits = assert_violation(
        &r,
        Rule::ColumnComment,
        "lint_no_column_comment",
        &["lint_no_column_comment.note"],
    );
    assert_eq!(hits.len(), 1, "only `note` lacks a comment: {hits:?}");
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
}

#[test]
fn table_without_comment() {
    let r = table("lint_no_table_comment", "table_without_comment.sql");
    assert_violation(
        &r,
        Rule::TableComment,
        "lint_no_table_comment",
        &["table lint_no_table_comment has no COMMENT"],
    );
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
}

#[test]
fn table_foreign_key() {
    let r = table("lint_foreign_key", "foreign_key.sql");
    assert_violation(
        &r,
        Rule::ForeignKey,
        "lint_foreign_key",
        &["FOREIGN KEY", "fk_lint_job", "lint_job"],
    );
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
}

#[test]
fn column_references() {
    let r = table("lint_column_references", "column_references.sql");
    assert_violation(
        &r,
        Rule::ForeignKey,
        "lint_column_references",
        &["lint_column_references.job_id REFERENCES lint_job"],
    );
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
}

#[test]
fn engine_must_be_innodb() {
    let r = table("lint_myisam", "engine_not_innodb.sql");
    assert_violation(&r, Rule::Engine, "lint_myisam", &["ENGINE=MyISAM"]);
}

#[test]
fn table_ddl_must_parse() {
    let r = table("lint_broken_table", "table_does_not_parse.sql");
    assert_violation(&r, Rule::DdlParse, "lint_broken_table", &["does not parse"]);
    assert!(
        r.unparsed.iter().any(|u| u.object == "lint_broken_table"),
        "{:#?}",
        r.unparsed
    );
}

#[test]
fn locking_read_without_index() {
    let r = procedure("lint_bad_lock", "locking_read_without_index.sql");
    assert_violation(
        &r,
        Rule::IndexFilter,
        "lint_bad_lock",
        &[
            "locking read (FOR UPDATE) of lint_job",
            "PRIMARY(id)",
            "ix_job_due(state, ...)",
            "SELECT id INTO v_id",
        ],
    );
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
}

#[test]
fn update_without_index() {
    let r = procedure("lint_bad_update", "update_without_index.sql");
    assert_violation(
        &r,
        Rule::IndexFilter,
        "lint_bad_update",
        &[
            "UPDATE lint_job does not filter on the first column of any index",
            "statement: UPDATE lint_job SET",
        ],
    );
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
}

#[test]
fn delete_without_index() {
    let r = procedure("lint_bad_delete", "delete_without_index.sql");
    assert_violation(
        &r,
        Rule::IndexFilter,
        "lint_bad_delete",
        &["DELETE lint_job", "DELETE FROM lint_job WHERE priority = 9"],
    );
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
}

#[test]
fn dynamic_sql() {
    let r = procedure("lint_dynamic", "dynamic_sql.sql");
    assert_violation(&r, Rule::DynamicSql, "lint_dynamic", &["PREPARE s FROM @q"]);
    assert_violation(&r, Rule::DynamicSql, "lint_dynamic", &["EXECUTE s"]);
    assert!(
        r.violations.iter().all(|v| v.rule == Rule::DynamicSql),
        "{:#?}",
        r.violations
    );
}

#[test]
fn create_or_replace() {
    let r = procedure("lint_replace", "create_or_replace.sql");
    assert_violation(
        &r,
        Rule::CreateOrReplace,
        "lint_replace",
        &["CREATE OR REPLACE"],
    );
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
}

#[test]
fn dml_on_unknown_table() {
    let r = procedure("lint_unknown_table", "unknown_table.sql");
    assert_violation(
        &r,
        Rule::UnknownTable,
        "lint_unknown_table",
        &["lint_scratch", "UPDATE lint_scratch"],
    );
    assert!(
        r.violations.iter().all(|v| v.rule == Rule::UnknownTable),
        "{:#?}",
        r.violations
    );
}

#[test]
fn a_temporary_table_the_procedure_creates_is_checked_like_a_table() {
    let r = procedure("lint_temporary", "temporary_table.sql");
    assert_violation(
        &r,
        Rule::IndexFilter,
        "lint_temporary",
        &["UPDATE lint_scratch does not filter on the first column of any index"],
    );
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
    // Its DDL parses.
    assert!(r.unparsed.is_empty(), "{:#?}", r.unparsed);
}

#[test]
fn locking_read_in_a_condition() {
    // Subqueries of IF conditions and SET expressions are isolated and checked like statements.
    let r = procedure("lint_hidden_lock", "locking_read_in_condition.sql");
    assert_violation(
        &r,
        Rule::IndexFilter,
        "lint_hidden_lock",
        &[
            "locking read (FOR UPDATE) of lint_job",
            "statement: SELECT COUNT(*) FROM lint_job WHERE run_at < p_before FOR UPDATE",
        ],
    );
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
}

#[test]
fn subquery_in_set_or_if_is_an_implicit_shared_lock() {
    let r = procedure("lint_shared_lock", "shared_lock_in_condition.sql");
    assert_violation(
        &r,
        Rule::ImplicitSharedLock,
        "lint_shared_lock",
        &["statement: SET v_n = (SELECT COUNT(*) FROM lint_job"],
    );
    assert_violation(
        &r,
        Rule::ImplicitSharedLock,
        "lint_shared_lock",
        &["statement: IF EXISTS (SELECT 1 FROM lint_counter"],
    );
    assert_eq!(r.violations.len(), 2, "{:#?}", r.violations);
}

#[test]
fn good_procedure_lints_clean() {
    let r = procedure_calling_other("lint_good", "good_procedure.sql");
    assert!(
        r.violations.is_empty(),
        "{}",
        r.violations
            .iter()
            .map(|v| format!("{v}\n"))
            .collect::<String>()
    );
    // Every statement is read: the procedural ones by sqlparser (SET, CALL, START TRANSACTION,
    // COMMIT, ROLLBACK) or by the lint's grammar (DECLARE, SIGNAL, RESIGNAL, END, LEAVE, ITERATE,
    // OPEN, CLOSE, FETCH, UNTIL), so nothing is listed for a DBA to read by hand.
    assert!(r.unparsed.is_empty(), "{:#?}", r.unparsed);
    // 13 DML statements, and SET x3, CALL, START TRANSACTION, COMMIT and ROLLBACK x2 by
    // sqlparser; the rest by the grammar (lint_other's empty body has no statement).
    assert_eq!(r.coverage.sqlparser, 13 + 8, "{:?}", r.coverage);
    assert_eq!(r.coverage.grammar, 21, "{:?}", r.coverage);
}

#[test]
fn unreadable_procedural_statements_are_listed() {
    let r = procedure_calling_other("lint_unparsed_procedural", "unparsed_procedural.sql");
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let listed: Vec<(&str, &str)> = r
        .unparsed
        .iter()
        .map(|u| (u.statement.as_str(), u.reason.as_str()))
        .collect();
    assert_eq!(listed.len(), 3, "{listed:#?}");
    assert_eq!(listed[0].0, "DECLARE v_odd INT DEFAULT p_id MOD 2");
    assert!(
        listed[0].1.starts_with("DECLARE expression `p_id MOD 2`: "),
        "{listed:#?}"
    );
    assert!(listed[1].0.starts_with("IF p_id MOD 3 = 1 THEN SIGNAL"));
    assert!(
        listed[1].1.starts_with("condition `p_id MOD 3 = 1`: "),
        "{listed:#?}"
    );
    // The argument's `/* p_id */` (the call rule's name for it) is a gap in the excerpt.
    assert_eq!(listed[2].0, "CALL lint_other(p_id MOD 5 )");
    assert!(!listed[2].1.is_empty());
    assert!(r
        .unparsed
        .iter()
        .all(|u| u.object == "lint_unparsed_procedural"));
    // The SIGNAL behind the unreadable condition, the other DECLARE, END IF and SET are read.
    assert_eq!(r.coverage.grammar, 3, "{:?}", r.coverage);
    assert_eq!(r.coverage.sqlparser, 1, "{:?}", r.coverage);
}

#[test]
fn calls_read_as_named_arguments() {
    let r = lint(&[
        fixture(Kind::Procedure, "lint_callee", "call_callee.sql"),
        fixture(Kind::Procedure, "lint_calls", "call_arguments.sql"),
    ]);
    let bare = assert_violation(
        &r,
        Rule::CallArguments,
        "lint_calls",
        &["argument 2 of lint_callee, `1`, fills p_flag: name it, `1 /* p_flag */`"],
    );
    assert!(
        bare[0].contains("CALL lint_callee(p_id, 1, v_state)"),
        "{bare:?}"
    );
    assert_violation(
        &r,
        Rule::CallArguments,
        "lint_calls",
        &["argument 2 of lint_callee, `1`, is named o_state but fills p_flag"],
    );
    assert_violation(
        &r,
        Rule::CallArguments,
        "lint_calls",
        &["passes 2 arguments to lint_callee, which takes 3"],
    );
    assert_violation(
        &r,
        Rule::CallArguments,
        "lint_calls",
        &["calls lint_nowhere, which no template defines"],
    );
    // The four planted calls and nothing else: the named expression, the named variable and the
    // string literal read well.
    assert_eq!(r.violations.len(), 4, "{:#?}", r.violations);
}

#[test]
fn unparseable_dml_is_listed() {
    let r = procedure("lint_unparsed", "unparsed_dml.sql");
    // The DECLARE, the SIGNAL and END IF are read by the lint's procedural grammar: not listed;
    // nor is the SET whose subquery is listed.
    let listed: Vec<&str> = r.unparsed.iter().map(|u| u.statement.as_str()).collect();
    assert_eq!(
        listed,
        [
            "SELECT id MOD 2 INTO v_odd FROM lint_job WHERE id = p_id",
            "SELECT COUNT(*) FROM lint_job WHERE queue = 'a' AND id MOD 2 = 1",
            "UPDATE lint_job SET WHERE id = p_id",
        ],
        "{:#?}",
        r.unparsed
    );
    assert!(r
        .unparsed
        .iter()
        .all(|u| u.object == "lint_unparsed" && !u.reason.is_empty()));
    assert!(r.unparsed[0]
        .to_string()
        .starts_with("lint_unparsed: SELECT id MOD 2"));
    // The plain read is only listed; the UPDATE's index filter cannot be proven, so it also fails;
    // the SET's subquery is an implicit shared lock whether or not it parses.
    assert_eq!(r.violations.len(), 2, "{:#?}", r.violations);
    assert_violation(
        &r,
        Rule::ImplicitSharedLock,
        "lint_unparsed",
        &["SET v_odd = (SELECT COUNT(*)"],
    );
    assert_violation(
        &r,
        Rule::Unprovable,
        "lint_unparsed",
        &["UPDATE lint_job SET WHERE"],
    );
}

#[test]
fn real_templates_lint_clean() {
    match orbit::codegen::render() {
        Ok(rendered) => {
            eprintln!(
                "{} objects linted; {} unparsed",
                rendered.objects.len(),
                rendered.unparsed.len()
            );
            // The README lists exactly what was not read, grouped by procedure.
            let readme = &rendered.files[std::path::Path::new("generated-sql/README.md")];
            let section = readme
                .split("## What the lint could not parse")
                .nth(1)
                .and_then(|s| s.split("\n## ").next())
                .expect("README has the could-not-parse section");
            for u in &rendered.unparsed {
                eprintln!("unparsed: {u}");
                assert!(section.contains(&format!("- `{}`\n", u.object)), "{u}");
            }
            let items = section.lines().filter(|l| l.starts_with("  - ")).count();
            assert_eq!(items, rendered.unparsed.len(), "{section}");
            if rendered.unparsed.is_empty() {
                assert!(section.contains("Nothing: every statement was read."));
            }
            assert!(rendered.coverage.sqlparser > 0 && rendered.coverage.grammar > 0);
        }
        Err(e) => panic!("{e}"),
    }
}

/// The tables a procedure header's `Locks` paragraph names, in order of first mention, as ranks
/// in the lock order; a row it only inserts (`new …`, `… (insert`), rows it takes SKIP LOCKED
/// and an AUTO-INC lock are not waits and are skipped, as are names outside the order (procedures, tables nobody waits on).
fn documented_lock_ranks(doc: &str, order: &[&str]) -> Vec<(usize, String)> {
    let Some(at) = doc.find("Locks") else {
        return Vec::new();
    };
    let text = &doc[at..];
    let mut seen = Vec::new();
    let mut ranks = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(off) = text[i..].find("orbit_") {
        let start = i + off;
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        let name = &text[start..end];
        let before = text[..start].trim_end();
        let after = &text[end..];
        let inserted = before.ends_with("new")
            || before.ends_with("AUTO-INC lock of")
            || before.ends_with("AUTO-INC locks of")
            || after.trim_start().starts_with("row (insert")
            || after.trim_start().starts_with("rows (insert")
            || after.trim_start().starts_with("rows (SKIP LOCKED")
            || after
                .trim_start()
                .starts_with("rows (FOR UPDATE SKIP LOCKED");
        if let Some(rank) = order.iter().position(|t| *t == name) {
            if !inserted && !seen.contains(&name) {
                seen.push(name);
                ranks.push((rank, name.to_string()));
            }
        }
        i = end;
    }
    ranks
}

fn lock_order_violation(doc: &str, order: &[&str]) -> Option<String> {
    let ranks = documented_lock_ranks(doc, order);
    ranks
        .windows(2)
        .find(|w| w[1].0 < w[0].0)
        .map(|w| format!("{} is locked after {}", w[1].1, w[0].1))
}

#[test]
fn every_procedure_documents_its_locks_in_the_one_lock_order() {
    let order = orbit::codegen::lock_order_tables();
    assert_eq!(order.first(), Some(&"orbit_credential"));
    assert_eq!(order.last(), Some(&"orbit_application_quota"));
    assert!(orbit::codegen::LOCK_ORDER.contains("## Lock order"));
    let objects = orbit::codegen::render_objects().unwrap();
    let mut checked = 0;
    for o in objects.iter().filter(|o| o.kind == Kind::Procedure) {
        assert!(o.doc.contains("Locks"), "{} documents no locks", o.name);
        if let Some(v) = lock_order_violation(&o.doc, &order) {
            panic!("{}: {v} (templates/lock_order.md)", o.name);
        }
        checked += usize::from(documented_lock_ranks(&o.doc, &order).len() > 1);
    }
    assert!(
        checked >= 10,
        "only {checked} headers name two ordered tables"
    );
    // The check itself: a header that takes the key's row before the task's is refused.
    let reversed = "Locks, in order: orbit_resource row, then the orbit_task row.";
    assert_eq!(
        lock_order_violation(reversed, &order).as_deref(),
        Some("orbit_task is locked after orbit_resource")
    );
    // A row only inserted is not a wait.
    assert_eq!(
        lock_order_violation("Locks: orbit_resource row, the new orbit_task row.", &order),
        None
    );
    // And the order is in the DBA's README.
    let readme = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("generated-sql/README.md"),
    )
    .unwrap();
    assert!(readme.contains(orbit::codegen::LOCK_ORDER.trim()));
}
