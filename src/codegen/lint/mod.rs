//! The SQL lint (SPEC §1, §8): what `gen` proves about the SQL it renders before writing it.
//!
//! **Tables.** Every `CREATE TABLE` must parse with sqlparser (`MySqlDialect`); every column and
//! the table carry a non-empty `COMMENT`; there is no `FOREIGN KEY` constraint and no column
//! `REFERENCES`; the engine is spelled `ENGINE=InnoDB`. The keys of the parsed tables form the
//! schema model the procedure rules check against.
//!
//! **Procedures.** sqlparser cannot parse MySQL compound statements, so the lint splits each body
//! at `;`, strips the procedural wrappers in front of a statement (labels, `BEGIN`,
//! `IF ... THEN`, `WHILE ... DO`, `DECLARE ... HANDLER FOR`, `DECLARE ... CURSOR FOR`, ...) and
//! hands every isolated DML statement to sqlparser, as well as every parenthesised subquery of a
//! procedural statement (`IF EXISTS (SELECT ...) THEN`, `SET v = (SELECT ...)`). Then:
//! - every locking read (`FOR UPDATE`, `FOR SHARE`, `LOCK IN SHARE MODE`) and every UPDATE and
//!   DELETE must pin each table it locks or changes with an equality on the first column of one of
//!   that table's indexes (so InnoDB locks index records, not a scan);
//! - a subquery that reads a table inside a procedural statement (`SET v = (SELECT ...)`,
//!   `IF EXISTS (SELECT ...)`, ...) must carry its own locking clause: without one, MariaDB and
//!   MySQL still run it as a shared-locking read, an invisible lock (MDEV-37832, MySQL bug
//!   #85431; measured here as 1,225 deadlocks in one `orbit bench e2e` run). Read with
//!   `SELECT ... INTO`, a plain consistent read;
//! - DML may only name tables the table templates create;
//! - no dynamic SQL (`PREPARE`/`EXECUTE`) and no `CREATE OR REPLACE` (not portable to MySQL).
//!
//! **Calls.** Every `CALL` between the templates' procedures passes as many arguments as its
//! callee takes, and every argument that is not a plain variable names the parameter it fills,
//! `0 /* p_hinted */`, checked against the callee's parameter list (`calls.rs`): positional
//! flags read as named ones, and a reordered parameter list cannot shift them unseen.
//!
//! Procedural statements (SET, SIGNAL, CALL, ...) are not DML and get only the text rules, but
//! each is read: whole by sqlparser when it has a grammar for it (SET, CALL, START TRANSACTION,
//! COMMIT, ROLLBACK, SAVEPOINT), else by the lint's own grammar (`procedural.rs`: DECLARE,
//! SIGNAL, END, LEAVE, FETCH, ...), with every expression in it and every IF / ELSEIF / WHEN /
//! WHILE condition parsed by sqlparser. A statement read neither way is listed in
//! [`Report::unparsed`] (and in `generated-sql/README.md`, for a DBA to read by hand), never
//! dropped; a DML statement sqlparser cannot parse is also a violation when it locks or writes,
//! because the index rule cannot be proven for it.

use std::fmt;

use super::{Kind, Object};

mod calls;
mod lexer;
mod procedural;
mod rules;
mod schema;

pub(crate) use schema::{index_columns, lower, parse_ddl};
mod statements;

use rules::{lint_procedure, text_rules};
use schema::{lint_table, Schema};

/// Which rule a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A DDL statement sqlparser cannot parse, or a table object holding something else.
    DdlParse,
    /// A column without a (non-empty) COMMENT.
    ColumnComment,
    /// A table without a (non-empty) COMMENT.
    TableComment,
    /// A FOREIGN KEY constraint or a column REFERENCES option.
    ForeignKey,
    /// A table whose ENGINE is not InnoDB (or not spelled out).
    Engine,
    /// PREPARE / EXECUTE / DEALLOCATE PREPARE.
    DynamicSql,
    /// `CREATE OR REPLACE` (MariaDB only).
    CreateOrReplace,
    /// A locking read, UPDATE or DELETE that does not pin a table by the first column of an index.
    IndexFilter,
    /// DML on a table no table template creates.
    UnknownTable,
    /// A locking read, UPDATE or DELETE the lint cannot check: sqlparser cannot parse it, or its
    /// locking clause sits outside any statement or subquery the lint can isolate.
    Unprovable,
    /// A subquery reading a table inside a procedural statement (a SET, DECLARE DEFAULT, IF,
    /// ELSEIF, WHILE, UNTIL or CASE expression) without a locking clause of its own: MariaDB and
    /// MySQL run it as a shared-locking read, which waits for and blocks writers of the rows it
    /// reads (a source of lock waits and deadlocks nothing in the text shows). Read with
    /// `SELECT ... INTO` (a plain consistent read), or say `FOR UPDATE` when a lock is meant.
    ImplicitSharedLock,
    /// A `CALL` of one of the templates' procedures with another argument count than its
    /// parameter list, an argument that is not a plain variable (a literal, an expression)
    /// without a `/* p_name */` comment naming the parameter it fills, a comment naming another
    /// parameter than the one at its position, or a `CALL` of a procedure no template defines
    /// (`calls.rs`).
    CallArguments,
}

#[derive(Debug, Clone)]
pub struct Violation {
    pub object: String,
    pub rule: Rule,
    pub message: String,
}
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.message)
    }
}

/// A statement sqlparser could not parse: listed by every `gen`, so nothing is silently skipped.
#[derive(Debug, Clone)]
pub struct Unparsed {
    pub object: String,
    /// A one-line excerpt of the statement.
    pub statement: String,
    /// Why it was not parsed (usually sqlparser's error).
    pub reason: String,
}
impl fmt::Display for Unparsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.object, self.statement, self.reason)
    }
}

/// How the statements of the procedure bodies were read (those read neither way are in
/// [`Report::unparsed`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    /// Statements sqlparser parsed whole: DML, DDL, and the procedural statements it has a
    /// grammar for (SET, CALL, START TRANSACTION, COMMIT, ROLLBACK, SAVEPOINT, ...).
    pub sqlparser: usize,
    /// Procedural statements sqlparser has no grammar for (DECLARE, SIGNAL, RESIGNAL, END ...,
    /// LEAVE, ITERATE, OPEN, CLOSE, FETCH, GET DIAGNOSTICS, UNTIL), read by the lint's own
    /// grammar, with the expressions in them parsed by sqlparser.
    pub grammar: usize,
}

#[derive(Debug, Default)]
pub struct Report {
    pub violations: Vec<Violation>,
    /// What a DBA must read by hand: statements neither sqlparser nor the lint's procedural
    /// grammar could read, in the order of the objects and their statements.
    pub unparsed: Vec<Unparsed>,
    pub coverage: Coverage,
}

impl Report {
    fn violation(&mut self, object: &str, rule: Rule, message: String) {
        let dup = self
            .violations
            .iter()
            .any(|v| v.object == object && v.message == message);
        if !dup {
            self.violations.push(Violation {
                object: object.to_string(),
                rule,
                message,
            });
        }
    }
    fn unparsed(&mut self, object: &str, statement: String, reason: String) {
        self.unparsed.push(Unparsed {
            object: object.to_string(),
            statement,
            reason,
        });
    }
}

/// Lints every object: tables first (they build the schema model), then procedures.
pub fn lint(objects: &[Object]) -> Report {
    let mut report = Report::default();
    let mut schema = Schema::new();
    for o in objects {
        text_rules(o, &mut report);
    }
    for o in objects.iter().filter(|o| o.kind == Kind::Table) {
        lint_table(o, &mut schema, &mut report);
    }
    for o in objects.iter().filter(|o| o.kind == Kind::Procedure) {
        lint_procedure(o, &schema, &mut report);
    }
    calls::lint_calls(objects, &mut report);
    report
}
