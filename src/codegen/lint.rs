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
//! Procedural statements (SET, SIGNAL, CALL, ...) are not DML and get only the text rules. A DML
//! statement sqlparser cannot parse is listed in [`Report::unparsed`], never dropped, and is also
//! a violation when it locks or writes, because the index rule cannot be proven for it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use sqlparser::ast::BinaryOperator;
use sqlparser::ast::{
    ColumnOption, CreateTable, CreateTableOptions, Expr, FromTable, FunctionArg, FunctionArgExpr,
    FunctionArguments, JoinConstraint, JoinOperator, LockClause, LockType, ObjectName,
    ObjectNamePart, Query, Select, SelectItem, SetExpr, SqlOption, Statement, TableConstraint,
    TableFactor, TableObject, TableWithJoins, UpdateTableFromKind,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::{Kind, Object};

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

#[derive(Debug, Default)]
pub struct Report {
    pub violations: Vec<Violation>,
    pub unparsed: Vec<Unparsed>,
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
    report
}

// ---------------------------------------------------------------------------------------------
// Schema model
// ---------------------------------------------------------------------------------------------

/// One index of a table: its name (`PRIMARY` for the primary key) and ordered columns.
#[derive(Debug, Clone)]
struct Index {
    name: String,
    columns: Vec<String>,
}

#[derive(Debug, Default)]
struct TableModel {
    columns: BTreeSet<String>,
    indexes: Vec<Index>,
}

impl TableModel {
    /// `PRIMARY(id), ix_task_dispatch(queue_id, ...)`: what an index filter could have used.
    fn describe_indexes(&self) -> String {
        if self.indexes.is_empty() {
            return "the table has no index".to_string();
        }
        let list: Vec<String> = self
            .indexes
            .iter()
            .map(|ix| {
                let more = if ix.columns.len() > 1 { ", ..." } else { "" };
                format!(
                    "{}({}{more})",
                    ix.name,
                    ix.columns.first().map_or("", |c| c.as_str())
                )
            })
            .collect();
        list.join(", ")
    }
}

/// Tables by lower-case name.
type Schema = BTreeMap<String, TableModel>;

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

/// The last part of a (possibly qualified) name, lower-cased.
fn last_name(name: &ObjectName) -> String {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(i)) => lower(&i.value),
        Some(other) => lower(&other.to_string()),
        None => String::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Text rules (every object)
// ---------------------------------------------------------------------------------------------

fn text_rules(o: &Object, report: &mut Report) {
    let tokens = lex(&o.sql);
    for w in tokens.windows(3) {
        if w[0].is("CREATE") && w[1].is("OR") && w[2].is("REPLACE") {
            report.violation(
                &o.name,
                Rule::CreateOrReplace,
                "uses CREATE OR REPLACE, which MySQL does not support; use DROP ... IF EXISTS + CREATE"
                    .to_string(),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------------

fn lint_table(o: &Object, schema: &mut Schema, report: &mut Report) {
    let ddl = blank_comment_lines(&o.sql);
    let statements = match Parser::parse_sql(&MySqlDialect {}, &ddl) {
        Ok(s) => s,
        Err(e) => {
            let statement = excerpt_text(&ddl);
            report.unparsed(&o.name, statement.clone(), e.to_string());
            report.violation(
                &o.name,
                Rule::DdlParse,
                format!("the table DDL does not parse with sqlparser (MySqlDialect): {e}; statement: {statement}"),
            );
            return;
        }
    };
    for s in &statements {
        match s {
            Statement::CreateTable(ct) => {
                let (name, model) = table_model(o, ct, report);
                schema.insert(name, model);
            }
            other => report.violation(
                &o.name,
                Rule::DdlParse,
                format!(
                    "a table object may only hold CREATE TABLE; found: {}",
                    excerpt_text(&other.to_string())
                ),
            ),
        }
    }
}

/// Checks one CREATE TABLE and returns its schema model entry.
fn table_model(o: &Object, ct: &CreateTable, report: &mut Report) -> (String, TableModel) {
    let table = last_name(&ct.name);
    let mut model = TableModel::default();
    let nonempty = |s: &str| !s.trim().is_empty();

    for col in &ct.columns {
        let name = lower(&col.name.value);
        let mut commented = false;
        for opt in &col.options {
            match &opt.option {
                ColumnOption::Comment(c) if nonempty(c) => commented = true,
                ColumnOption::ForeignKey { foreign_table, .. } => report.violation(
                    &o.name,
                    Rule::ForeignKey,
                    format!(
                        "column {table}.{name} REFERENCES {foreign_table}: foreign keys are not allowed"
                    ),
                ),
                ColumnOption::Unique { is_primary, .. } => model.indexes.push(Index {
                    name: if *is_primary { "PRIMARY".into() } else { name.clone() },
                    columns: vec![name.clone()],
                }),
                _ => {}
            }
        }
        if !commented {
            report.violation(
                &o.name,
                Rule::ColumnComment,
                format!("column {table}.{name} has no COMMENT"),
            );
        }
        model.columns.insert(name);
    }

    let index_columns = |cols: &[sqlparser::ast::IndexColumn]| -> Vec<String> {
        cols.iter()
            .map(|c| match &c.column.expr {
                Expr::Identifier(i) => lower(&i.value),
                // A prefix index `col(10)` parses as a call; its first column is still `col`.
                Expr::Function(f) => last_name(&f.name),
                other => lower(&other.to_string()),
            })
            .collect()
    };
    for c in &ct.constraints {
        match c {
            TableConstraint::PrimaryKey { columns, .. } => model.indexes.push(Index {
                name: "PRIMARY".into(),
                columns: index_columns(columns),
            }),
            TableConstraint::Unique {
                name,
                index_name,
                columns,
                ..
            } => model.indexes.push(Index {
                name: index_name
                    .as_ref()
                    .or(name.as_ref())
                    .map_or("UNIQUE".into(), |i| i.value.clone()),
                columns: index_columns(columns),
            }),
            TableConstraint::Index { name, columns, .. } => model.indexes.push(Index {
                name: name.as_ref().map_or("KEY".into(), |i| i.value.clone()),
                columns: index_columns(columns),
            }),
            TableConstraint::ForeignKey {
                name,
                columns,
                foreign_table,
                ..
            } => {
                let cols: Vec<String> = columns.iter().map(|c| c.value.clone()).collect();
                let named = name.as_ref().map_or(String::new(), |n| format!(" {n}"));
                report.violation(
                    &o.name,
                    Rule::ForeignKey,
                    format!(
                        "table {table} declares FOREIGN KEY{named} ({}) REFERENCES {foreign_table}: foreign keys are not allowed",
                        cols.join(", ")
                    ),
                );
            }
            _ => {}
        }
    }

    // MySqlDialect puts ENGINE and COMMENT among the plain table options; older spellings land
    // in `CreateTable::comment`.
    let options: &[SqlOption] = match &ct.table_options {
        CreateTableOptions::Plain(v)
        | CreateTableOptions::With(v)
        | CreateTableOptions::Options(v)
        | CreateTableOptions::TableProperties(v) => v,
        CreateTableOptions::None => &[],
    };
    let mut engine = None;
    let mut comment = ct.comment.as_ref().map(|c| c.to_string());
    for opt in options {
        match opt {
            SqlOption::Comment(c) => comment = Some(c.to_string()),
            SqlOption::NamedParenthesizedList(l) if l.key.value.eq_ignore_ascii_case("ENGINE") => {
                engine = l.name.as_ref().map(|n| n.value.clone())
            }
            SqlOption::KeyValue { key, value } if key.value.eq_ignore_ascii_case("ENGINE") => {
                engine = Some(value.to_string())
            }
            _ => {}
        }
    }
    if !comment.as_deref().is_some_and(nonempty) {
        report.violation(
            &o.name,
            Rule::TableComment,
            format!("table {table} has no COMMENT"),
        );
    }
    match engine {
        Some(e) if e.eq_ignore_ascii_case("InnoDB") => {}
        Some(e) => report.violation(
            &o.name,
            Rule::Engine,
            format!("table {table} uses ENGINE={e}; only InnoDB is allowed"),
        ),
        None => report.violation(
            &o.name,
            Rule::Engine,
            format!("table {table} does not state ENGINE=InnoDB"),
        ),
    }
    (table, model)
}

/// Blanks whole-line `--` comments (keeping line numbers): sqlparser's MySQL tokenizer rejects a
/// bare `--` line, which the mysql client and the doc blocks of the templates use.
fn blank_comment_lines(sql: &str) -> String {
    sql.lines()
        .map(|l| {
            if l.trim_start().starts_with("--") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------------------
// Lexing and statement isolation (procedure bodies)
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tk {
    /// Keyword or bare identifier (also `@var`).
    Word,
    /// `` `identifier` ``: never a keyword.
    QuotedIdent,
    Str,
    Num,
    Punct,
}

/// A token with its byte range in the source, so excerpts and parser input are the real text.
#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    kind: Tk,
    text: &'a str,
    start: usize,
    end: usize,
}

impl Token<'_> {
    fn is(&self, keyword: &str) -> bool {
        self.kind == Tk::Word && self.text.eq_ignore_ascii_case(keyword)
    }
    fn is_any(&self, keywords: &[&str]) -> bool {
        keywords.iter().any(|k| self.is(k))
    }
    fn is_punct(&self, p: &str) -> bool {
        self.kind == Tk::Punct && self.text == p
    }
}

/// A small MySQL lexer: enough to find statement boundaries and keywords without being fooled
/// by quotes (`'..'`, `".."`, `` `..` ``, with doubling and backslash escapes) or comments
/// (`-- `, `#`, `/* */`), which it drops.
fn lex(src: &str) -> Vec<Token<'_>> {
    const MULTI: [&str; 12] = [
        "<=>", "->>", ":=", "<=", ">=", "<>", "!=", "->", "||", "&&", "<<", ">>",
    ];
    let b = src.as_bytes();
    let word_char =
        |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'@' || c >= 0x80;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let kind = if c.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if (c == b'-'
            && b.get(i + 1) == Some(&b'-')
            && b.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()))
            || c == b'#'
        {
            i = src[i..].find('\n').map_or(b.len(), |n| i + n + 1);
            continue;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i = src[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
            continue;
        } else if c == b'\'' || c == b'"' || c == b'`' {
            i += 1;
            while i < b.len() {
                // A backslash escape, or the quote doubled.
                let escaped = b[i] == b'\\' && c != b'`';
                if escaped || (b[i] == c && b.get(i + 1) == Some(&c)) {
                    i += 2;
                } else if b[i] == c {
                    i += 1;
                    break;
                } else {
                    i += 1;
                }
            }
            i = i.min(b.len());
            if c == b'`' {
                Tk::QuotedIdent
            } else {
                Tk::Str
            }
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_') {
                i += 1;
            }
            Tk::Num
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'@' || c >= 0x80 {
            while i < b.len() && word_char(b[i]) {
                i += 1;
            }
            Tk::Word
        } else {
            i += MULTI
                .iter()
                .find(|m| src[i..].starts_with(*m))
                .map_or(1, |m| m.len());
            Tk::Punct
        };
        out.push(Token {
            kind,
            text: &src[start..i],
            start,
            end: i,
        });
    }
    out
}

/// Splits a body into its `;`-terminated pieces (the lexer already skipped quotes and comments,
/// and `;` is never valid inside parentheses).
fn split_statements<'t, 'a>(tokens: &'t [Token<'a>]) -> Vec<&'t [Token<'a>]> {
    tokens
        .split(|t| t.is_punct(";"))
        .filter(|s| !s.is_empty())
        .collect()
}

/// What is left of a piece once its procedural wrappers are stripped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StmtKind {
    /// SELECT / INSERT / UPDATE / DELETE / REPLACE / WITH / TRUNCATE: parsed and linted.
    Dml,
    /// CREATE / DROP / ALTER / RENAME inside a body: parsed.
    Ddl,
    /// PREPARE / EXECUTE / DEALLOCATE: always a violation.
    Dynamic,
    /// SET, SIGNAL, CALL, COMMIT, LEAVE, END IF, ...: not DML, text rules only.
    Procedural,
    /// Anything the lint does not recognise: listed as unparsed.
    Unknown,
}

/// One statement isolated from a `;`-terminated piece of a body.
#[derive(Debug)]
struct Isolated<'t, 'a> {
    kind: StmtKind,
    /// The wrapper tokens stripped in front of the statement (labels, `IF ... THEN`, ...).
    wrapper: &'t [Token<'a>],
    statement: &'t [Token<'a>],
}

/// The index of the first `keyword` at the top level of `t[from..]`: outside parentheses and
/// outside `CASE ... END` expressions (whose THEN/WHEN belong to the expression).
fn find_top(t: &[Token], from: usize, keyword: &str) -> Option<usize> {
    let (mut parens, mut cases) = (0i32, 0i32);
    for (i, tok) in t.iter().enumerate().skip(from) {
        if parens == 0 && cases == 0 && tok.is(keyword) {
            return Some(i);
        }
        if tok.is_punct("(") {
            parens += 1;
        } else if tok.is_punct(")") {
            parens -= 1;
        } else if tok.is("CASE") {
            cases += 1;
        } else if tok.is("END") && cases > 0 {
            cases -= 1;
        }
    }
    None
}

/// Skips a handler's condition list (`SQLSTATE [VALUE] '..'`, `NOT FOUND`, `SQLEXCEPTION`, error
/// numbers, condition names, comma-separated) and returns where its statement starts.
fn skip_handler_conditions(t: &[Token], mut i: usize) -> usize {
    while i < t.len() {
        if t[i].is("SQLSTATE") {
            i += 1;
            if t.get(i).is_some_and(|x| x.is("VALUE")) {
                i += 1;
            }
            i += 1;
        } else if t[i].is("NOT") {
            i += 2;
        } else {
            i += 1;
        }
        if t.get(i).is_some_and(|x| x.is_punct(",")) {
            i += 1;
        } else {
            break;
        }
    }
    i.min(t.len())
}

/// Strips the procedural wrappers in front of one piece and classifies what remains.
fn isolate<'t, 'a>(piece: &'t [Token<'a>]) -> Isolated<'t, 'a> {
    let t = piece;
    let mut i = 0;
    let unknown = |i: usize| Isolated {
        kind: StmtKind::Unknown,
        wrapper: &t[..i],
        statement: &t[i..],
    };
    while i < t.len() {
        let w = &t[i];
        // `label:` in front of BEGIN / LOOP / WHILE / REPEAT.
        if matches!(w.kind, Tk::Word | Tk::QuotedIdent)
            && t.get(i + 1).is_some_and(|n| n.is_punct(":"))
        {
            i += 2;
        } else if w.is("BEGIN") {
            i += 1;
            if t.get(i).is_some_and(|x| x.is("NOT")) && t.get(i + 1).is_some_and(|x| x.is("ATOMIC"))
            {
                i += 2;
            }
        } else if w.is_any(&["IF", "ELSEIF", "WHEN"]) {
            match find_top(t, i + 1, "THEN") {
                Some(then) => i = then + 1,
                None => return unknown(i),
            }
        } else if w.is("WHILE") {
            match find_top(t, i + 1, "DO") {
                Some(d) => i = d + 1,
                None => return unknown(i),
            }
        } else if w.is("CASE") {
            // A CASE statement: skip its operand up to the first WHEN.
            match find_top(t, i + 1, "WHEN") {
                Some(when) => i = when,
                None => return unknown(i),
            }
        } else if w.is_any(&["ELSE", "LOOP", "REPEAT"]) {
            i += 1;
        } else if w.is("DECLARE") && t.get(i + 2).is_some_and(|x| x.is("CURSOR")) {
            // DECLARE name CURSOR FOR <select>: the select is DML.
            i += 3;
            if t.get(i).is_some_and(|x| x.is("FOR")) {
                i += 1;
            }
        } else if w.is("DECLARE")
            && t.get(i + 1)
                .is_some_and(|x| x.is_any(&["CONTINUE", "EXIT", "UNDO"]))
            && t.get(i + 2).is_some_and(|x| x.is("HANDLER"))
            && t.get(i + 3).is_some_and(|x| x.is("FOR"))
        {
            i = skip_handler_conditions(t, i + 4);
        } else {
            break;
        }
    }
    let statement = &t[i..];
    let kind = match statement.first() {
        None => StmtKind::Procedural,
        Some(f) if f.is_punct("(") => StmtKind::Dml,
        Some(f)
            if f.is_any(&[
                "SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "REPLACE", "TRUNCATE",
            ]) =>
        {
            StmtKind::Dml
        }
        Some(f) if f.is_any(&["CREATE", "DROP", "ALTER", "RENAME"]) => StmtKind::Ddl,
        Some(f) if f.is_any(&["PREPARE", "EXECUTE", "DEALLOCATE"]) => StmtKind::Dynamic,
        Some(f)
            if f.is_any(&[
                "SET",
                "SIGNAL",
                "RESIGNAL",
                "CALL",
                "START",
                "COMMIT",
                "ROLLBACK",
                "SAVEPOINT",
                "RELEASE",
                "LEAVE",
                "ITERATE",
                "OPEN",
                "CLOSE",
                "FETCH",
                "RETURN",
                "GET",
                "DO",
                "DECLARE",
                "END",
                "UNTIL",
            ]) =>
        {
            StmtKind::Procedural
        }
        Some(_) => StmtKind::Unknown,
    };
    Isolated {
        kind,
        wrapper: &t[..i],
        statement,
    }
}

/// The outermost parenthesised queries `( SELECT ... )` / `( WITH ... )` in `t`, without their
/// parentheses.
fn subqueries<'t, 'a>(t: &'t [Token<'a>]) -> Vec<&'t [Token<'a>]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < t.len() {
        if t[i].is_punct("(") && t[i + 1].is_any(&["SELECT", "WITH"]) {
            let mut depth = 0;
            let close = (i..t.len()).find(|&j| {
                depth += i32::from(t[j].is_punct("(")) - i32::from(t[j].is_punct(")"));
                depth == 0
            });
            let end = close.unwrap_or(t.len());
            out.push(&t[i + 1..end]);
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The number of locking clauses written in `t`.
/// Whether a query reads a stored table (`FROM x` other than `JSON_TABLE(...)` or `DUAL`).
fn reads_a_table(t: &[Token]) -> bool {
    t.windows(2).any(|w| {
        w[0].is("FROM")
            && matches!(w[1].kind, Tk::Word | Tk::QuotedIdent)
            && !w[1].is_any(&["JSON_TABLE", "DUAL"])
    })
}

fn count_lock_clauses(t: &[Token]) -> usize {
    (0..t.len())
        .filter(|&i| {
            (t[i].is("FOR") && t.get(i + 1).is_some_and(|x| x.is_any(&["UPDATE", "SHARE"])))
                || (t[i].is("LOCK")
                    && t.get(i + 1).is_some_and(|x| x.is("IN"))
                    && t.get(i + 2).is_some_and(|x| x.is("SHARE")))
        })
        .count()
}

/// Whether `t` writes rows: an UPDATE or DELETE keyword that is not `FOR UPDATE` or
/// `ON DUPLICATE KEY UPDATE`.
fn writes(t: &[Token]) -> bool {
    (0..t.len()).any(|i| {
        t[i].is("DELETE") || (t[i].is("UPDATE") && !(i > 0 && t[i - 1].is_any(&["FOR", "KEY"])))
    })
}

/// A token run as one line: tokens joined by one space where the source had any gap, so
/// comments and line breaks disappear.
fn joined(t: &[Token]) -> String {
    let mut s = String::new();
    let mut prev_end = None;
    for tok in t {
        if prev_end.is_some_and(|e| e < tok.start) {
            s.push(' ');
        }
        s.push_str(tok.text);
        prev_end = Some(tok.end);
    }
    s
}

/// A one-line excerpt of a token run, cut when long.
fn excerpt(t: &[Token]) -> String {
    cut(joined(t))
}

fn excerpt_text(s: &str) -> String {
    cut(s.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn cut(s: String) -> String {
    const MAX: usize = 160;
    if s.chars().count() <= MAX {
        s
    } else {
        s.chars().take(MAX - 3).collect::<String>() + "..."
    }
}

/// Rewrites the MySQL-only clauses sqlparser 0.58 rejects into text the index rule reads the
/// same way: a SELECT's `INTO var[, var]` is dropped (it only names where the row goes);
/// `LOCK IN SHARE MODE` becomes `FOR SHARE`; an UPDATE's trailing `ORDER BY` / `LIMIT` is
/// dropped (they bound the rows the WHERE already selected). Comments and line breaks become
/// single spaces, so sqlparser's error positions point into the one-line excerpt.
fn normalize(t: &[Token]) -> String {
    let mut replace: Vec<Option<&str>> = vec![None; t.len()];
    let first = t.first();
    let top_level = |from: usize, stop: &dyn Fn(usize) -> bool| -> Option<usize> {
        let mut depth = 0i32;
        for (i, tok) in t.iter().enumerate().skip(from) {
            if depth == 0 && stop(i) {
                return Some(i);
            }
            depth += i32::from(tok.is_punct("(")) - i32::from(tok.is_punct(")"));
        }
        None
    };
    if first.is_some_and(|f| f.is_any(&["SELECT", "WITH"])) {
        let mut from = 0;
        while let Some(into) = top_level(from, &|i| t[i].is("INTO")) {
            replace[into] = Some("");
            let mut j = into + 1;
            while j < t.len() && matches!(t[j].kind, Tk::Word | Tk::QuotedIdent) {
                replace[j] = Some("");
                if t.get(j + 1).is_some_and(|x| x.is_punct(",")) {
                    replace[j + 1] = Some("");
                    j += 2;
                } else {
                    j += 1;
                    break;
                }
            }
            from = j;
        }
    }
    for i in 0..t.len().saturating_sub(3) {
        if t[i].is("LOCK") && t[i + 1].is("IN") && t[i + 2].is("SHARE") && t[i + 3].is("MODE") {
            replace[i] = Some("FOR");
            replace[i + 1] = Some("");
            replace[i + 3] = Some("");
        }
    }
    if first.is_some_and(|f| f.is("UPDATE")) {
        let tail = top_level(0, &|i| {
            t[i].is("LIMIT") || (t[i].is("ORDER") && t.get(i + 1).is_some_and(|x| x.is("BY")))
        });
        if let Some(tail) = tail {
            replace[tail..].iter_mut().for_each(|r| *r = Some(""));
        }
    }
    let mut out = String::new();
    let mut prev_end = None;
    for (tok, r) in t.iter().zip(&replace) {
        let r = r.unwrap_or(tok.text);
        if r.is_empty() {
            continue;
        }
        if prev_end.is_some_and(|e| e < tok.start) {
            out.push(' ');
        }
        out.push_str(r);
        prev_end = Some(tok.end);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Procedures
// ---------------------------------------------------------------------------------------------

fn lint_procedure(o: &Object, schema: &Schema, report: &mut Report) {
    let sql = o.sql.as_str();
    let tokens = lex(sql);
    let Some(create) = tokens.iter().position(|t| t.is("CREATE")) else {
        report.violation(
            &o.name,
            Rule::Unprovable,
            "no CREATE PROCEDURE statement found".into(),
        );
        return;
    };
    // The DROP PROCEDURE IF EXISTS (and anything else) in front of the definition is plain DDL.
    let prelude = blank_comment_lines(&sql[..tokens[create].start])
        .lines()
        .filter(|l| !l.trim_start().to_ascii_uppercase().starts_with("DELIMITER"))
        .collect::<Vec<_>>()
        .join("\n");
    if let Err(e) = Parser::parse_sql(&MySqlDialect {}, &prelude) {
        report.unparsed(&o.name, excerpt_text(&prelude), e.to_string());
    }
    // The definition runs to the install delimiter `$$` (which it may not contain).
    let def_end = sql[tokens[create].start..]
        .find("$$")
        .map_or(sql.len(), |n| tokens[create].start + n);
    let def: Vec<Token> = tokens[create..]
        .iter()
        .copied()
        .take_while(|t| t.end <= def_end)
        .collect();
    // The body is the first top-level BEGIN after the parameter list.
    let body_start = def.iter().position(|t| t.is_punct("(")).and_then(|open| {
        let mut depth = 0;
        let close = (open..def.len()).find(|&i| {
            depth += i32::from(def[i].is_punct("(")) - i32::from(def[i].is_punct(")"));
            depth == 0
        })?;
        (close..def.len()).find(|&i| def[i].is("BEGIN"))
    });
    let Some(body_start) = body_start else {
        report.violation(
            &o.name,
            Rule::Unprovable,
            "cannot find the procedure's BEGIN ... END body".into(),
        );
        report.unparsed(
            &o.name,
            excerpt(&def),
            "no BEGIN ... END body after the parameter list".into(),
        );
        return;
    };
    // sqlparser has no grammar for MySQL's procedural statements: count them by keyword and list
    // them once per procedure, so what was not parsed is said, never skipped silently.
    let mut procedural: std::collections::BTreeMap<String, usize> = Default::default();
    for piece in split_statements(&def[body_start..]) {
        if let Some(keyword) = lint_piece(o, schema, piece, report) {
            *procedural.entry(keyword).or_default() += 1;
        }
    }
    if !procedural.is_empty() {
        let counts: Vec<String> = procedural.iter().map(|(k, n)| format!("{k}x{n}")).collect();
        report.unparsed(
            &o.name,
            format!("procedural statements {}", counts.join(" ")),
            "MySQL procedural grammar, which sqlparser cannot parse: text rules only; their subqueries are parsed".into(),
        );
    }
}

/// Lints one `;`-terminated piece of a body; returns the leading keyword of a procedural
/// statement (SET, SIGNAL, CALL, ...) that was not parsed.
fn lint_piece(o: &Object, schema: &Schema, piece: &[Token], report: &mut Report) -> Option<String> {
    if piece
        .iter()
        .any(|t| t.is_any(&["PREPARE", "EXECUTE", "DEALLOCATE"]))
    {
        report.violation(
            &o.name,
            Rule::DynamicSql,
            format!(
                "dynamic SQL (PREPARE/EXECUTE) is not allowed; statement: {}",
                excerpt(piece)
            ),
        );
        return None;
    }
    let iso = isolate(piece);
    // The procedural parts (IF/WHILE/UNTIL conditions, SET and DECLARE DEFAULT expressions, ...)
    // are not parsed, but the subqueries in them are DML the lint can isolate: each is
    // parenthesised, so it is parsed and checked like a statement.
    let mut procedural = vec![iso.wrapper];
    if iso.kind != StmtKind::Dml {
        procedural.push(iso.statement);
    }
    let mut hidden_locks = 0;
    for part in procedural {
        hidden_locks += count_lock_clauses(part);
        for sub in subqueries(part) {
            let locks = count_lock_clauses(sub);
            hidden_locks -= locks;
            if locks == 0 && reads_a_table(sub) {
                report.violation(
                    &o.name,
                    Rule::ImplicitSharedLock,
                    format!(
                        "a subquery in a procedural statement is a shared-locking read; use SELECT ... INTO; statement: {}",
                        excerpt(piece)
                    ),
                );
            }
            lint_dml(o, schema, sub, report);
        }
    }
    if hidden_locks > 0 {
        let statement = excerpt(piece);
        report.unparsed(
            &o.name,
            statement.clone(),
            "locking clause outside any statement the lint can isolate".into(),
        );
        report.violation(
            &o.name,
            Rule::Unprovable,
            format!("a locking clause sits where the lint cannot check it; statement: {statement}"),
        );
    }
    match iso.kind {
        StmtKind::Dml => lint_dml(o, schema, iso.statement, report),
        StmtKind::Ddl => {
            if let Err(e) = Parser::parse_sql(&MySqlDialect {}, &joined(iso.statement)) {
                report.unparsed(&o.name, excerpt(iso.statement), e.to_string());
            }
        }
        StmtKind::Unknown => report.unparsed(
            &o.name,
            excerpt(iso.statement),
            "not a statement the lint recognises; checked by text rules only".into(),
        ),
        StmtKind::Dynamic => {}
        StmtKind::Procedural => {
            return iso
                .statement
                .first()
                .filter(|t| t.kind == Tk::Word)
                .map(|t| t.text.to_ascii_uppercase())
        }
    }
    None
}

fn lint_dml(o: &Object, schema: &Schema, t: &[Token], report: &mut Report) {
    let statement = excerpt(t);
    let text = normalize(t);
    let locks_written = count_lock_clauses(t);
    let parsed = Parser::parse_sql(&MySqlDialect {}, &text)
        .map_err(|e| e.to_string())
        .and_then(|mut v| {
            if v.len() == 1 {
                Ok(v.remove(0))
            } else {
                Err(format!(
                    "expected one statement, sqlparser read {}",
                    v.len()
                ))
            }
        });
    let parsed = match parsed {
        Ok(s) => s,
        Err(reason) => {
            report.unparsed(&o.name, statement.clone(), reason.clone());
            if locks_written > 0 || writes(t) {
                report.violation(
                    &o.name,
                    Rule::Unprovable,
                    format!("sqlparser cannot parse this locking read/UPDATE/DELETE, so its index filter cannot be proven ({reason}); statement: {statement}"),
                );
            }
            return;
        }
    };
    let mut checker = Checker {
        schema,
        statement: &statement,
        findings: Vec::new(),
        locks_seen: 0,
        ctes: Vec::new(),
    };
    checker.statement(&parsed);
    if checker.locks_seen < locks_written {
        checker.findings.push((
            Rule::Unprovable,
            format!("a locking clause sits where the lint cannot check it; statement: {statement}"),
        ));
    }
    for (rule, message) in checker.findings {
        report.violation(&o.name, rule, message);
    }
}

/// A table reference in a FROM / UPDATE / DELETE clause.
struct Rel {
    /// The table's lower-case name.
    table: String,
    /// What columns are qualified with: the alias if any, else the table name.
    qualifier: String,
}

/// A column the statement pins by equality (`col = expr`, `expr = col`, `col IN (...)`,
/// `JOIN ... USING (col)`); `other` is the compared expression, when there is one.
struct Pin<'e> {
    qualifier: Option<String>,
    column: String,
    other: Option<&'e Expr>,
}

/// Walks one parsed DML statement, collecting rule findings.
struct Checker<'s> {
    schema: &'s Schema,
    statement: &'s str,
    findings: Vec<(Rule, String)>,
    /// Locking clauses found in the AST, compared with the ones written in the text.
    locks_seen: usize,
    /// CTE names in scope: not base tables.
    ctes: Vec<String>,
}

impl Checker<'_> {
    fn statement(&mut self, s: &Statement) {
        match s {
            Statement::Query(q) => self.query(q),
            Statement::Insert(ins) => {
                if let TableObject::TableName(name) = &ins.table {
                    self.require_known(name);
                }
                if let Some(src) = &ins.source {
                    self.query(src);
                }
                for a in &ins.assignments {
                    self.expr(&a.value);
                }
            }
            Statement::Update { table, assignments, from, selection, .. } => {
                let mut twjs = vec![table.clone()];
                if let Some(UpdateTableFromKind::BeforeSet(v) | UpdateTableFromKind::AfterSet(v)) = from {
                    twjs.extend(v.iter().cloned());
                }
                self.write(&twjs, selection.as_ref(), "UPDATE");
                for a in assignments {
                    self.expr(&a.value);
                }
            }
            Statement::Delete(d) => {
                let mut twjs = match &d.from {
                    FromTable::WithFromKeyword(v) | FromTable::WithoutKeyword(v) => v.clone(),
                };
                twjs.extend(d.using.iter().flatten().cloned());
                self.write(&twjs, d.selection.as_ref(), "DELETE");
            }
            Statement::Truncate { table_names, .. } => {
                for t in table_names {
                    self.findings.push((
                        Rule::IndexFilter,
                        format!(
                            "TRUNCATE {} removes every row without an index filter; statement: {}",
                            last_name(&t.name),
                            self.statement
                        ),
                    ));
                }
            }
            other => self.findings.push((
                Rule::Unprovable,
                format!(
                    "sqlparser read this DML as a {} statement the lint does not check; statement: {}",
                    other.to_string().split_whitespace().next().unwrap_or("?"),
                    self.statement
                ),
            )),
        }
    }

    /// UPDATE / DELETE: every table in the statement is locked, so every one must be pinned.
    fn write(&mut self, twjs: &[TableWithJoins], selection: Option<&Expr>, verb: &str) {
        let rels = self.relations(twjs);
        let pins = pins_of(twjs, selection);
        for rel in &rels {
            self.require_index(verb, rel, &pins);
        }
        self.join_exprs(twjs);
        if let Some(e) = selection {
            self.expr(e);
        }
    }

    fn query(&mut self, q: &Query) {
        let scope = self.ctes.len();
        if let Some(with) = &q.with {
            for cte in &with.cte_tables {
                self.ctes.push(lower(&cte.alias.name.value));
                self.query(&cte.query);
            }
        }
        self.locks_seen += q.locks.len();
        self.set_expr(&q.body, &q.locks);
        self.ctes.truncate(scope);
    }

    fn set_expr(&mut self, body: &SetExpr, locks: &[LockClause]) {
        match body {
            SetExpr::Select(s) => self.select(s, locks),
            SetExpr::Query(q) => self.query(q),
            SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left, locks);
                self.set_expr(right, locks);
            }
            SetExpr::Insert(s) | SetExpr::Update(s) | SetExpr::Delete(s) => self.statement(s),
            SetExpr::Values(v) => {
                for e in v.rows.iter().flatten() {
                    self.expr(e);
                }
            }
            _ => {}
        }
    }

    fn select(&mut self, s: &Select, locks: &[LockClause]) {
        let rels = self.relations(&s.from);
        if !locks.is_empty() {
            let pins = pins_of(&s.from, s.selection.as_ref());
            for lock in locks {
                let verb = match lock.lock_type {
                    LockType::Update => "locking read (FOR UPDATE) of",
                    LockType::Share => "locking read (FOR SHARE) of",
                };
                let only = lock.of.as_ref().map(last_name);
                for rel in rels
                    .iter()
                    .filter(|r| only.as_ref().is_none_or(|o| *o == r.qualifier))
                {
                    self.require_index(verb, rel, &pins);
                }
            }
        }
        for item in &s.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                self.expr(e);
            }
        }
        self.join_exprs(&s.from);
        for e in s.selection.iter().chain(s.having.iter()) {
            self.expr(e);
        }
    }

    /// The base tables of a FROM list (derived tables are walked as queries); unknown tables
    /// are findings.
    fn relations(&mut self, twjs: &[TableWithJoins]) -> Vec<Rel> {
        let mut rels = Vec::new();
        for twj in twjs {
            self.factor(&twj.relation, &mut rels);
            for j in &twj.joins {
                self.factor(&j.relation, &mut rels);
            }
        }
        rels
    }

    fn factor(&mut self, f: &TableFactor, rels: &mut Vec<Rel>) {
        match f {
            TableFactor::Table { name, alias, .. } => {
                let table = last_name(name);
                if name.0.len() == 1 && (self.ctes.contains(&table) || table == "dual") {
                    return;
                }
                if self.require_known(name) {
                    let qualifier = alias
                        .as_ref()
                        .map_or(table.clone(), |a| lower(&a.name.value));
                    rels.push(Rel { table, qualifier });
                }
            }
            TableFactor::Derived { subquery, .. } => self.query(subquery),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => rels.extend(self.relations(std::slice::from_ref(table_with_joins))),
            TableFactor::JsonTable { json_expr, .. } => self.expr(json_expr),
            _ => {}
        }
    }

    /// Whether the schema model knows `name`; a finding when it does not.
    fn require_known(&mut self, name: &ObjectName) -> bool {
        let table = last_name(name);
        if self.schema.contains_key(&table) {
            return true;
        }
        self.findings.push((
            Rule::UnknownTable,
            format!(
                "uses table {name}, which no table template creates, so its keys cannot be checked; statement: {}",
                self.statement
            ),
        ));
        false
    }

    fn require_index(&mut self, verb: &str, rel: &Rel, pins: &[Pin]) {
        let Some(model) = self.schema.get(&rel.table) else {
            return;
        };
        let pinned: BTreeSet<&str> = pins
            .iter()
            .filter(|p| self.pins_rel(p, rel, model))
            .map(|p| p.column.as_str())
            .collect();
        if model.indexes.iter().any(|ix| {
            ix.columns
                .first()
                .is_some_and(|c| pinned.contains(c.as_str()))
        }) {
            return;
        }
        self.findings.push((
            Rule::IndexFilter,
            format!(
                "{verb} {} does not filter on the first column of any index ({}); statement: {}",
                rel.table,
                model.describe_indexes(),
                self.statement
            ),
        ));
    }

    /// Whether `p` pins a column of `rel`, compared with something that is not `rel` itself.
    fn pins_rel(&self, p: &Pin, rel: &Rel, model: &TableModel) -> bool {
        let refers = |qualifier: &Option<String>, column: &str| match qualifier {
            Some(q) => *q == rel.qualifier,
            None => model.columns.contains(column),
        };
        refers(&p.qualifier, &p.column)
            && !p
                .other
                .and_then(column_ref)
                .is_some_and(|(q, c)| refers(&q, &c))
    }

    fn join_exprs(&mut self, twjs: &[TableWithJoins]) {
        for j in twjs.iter().flat_map(|t| &t.joins) {
            if let Some(JoinConstraint::On(e)) = join_constraint(&j.join_operator) {
                self.expr(e);
            }
        }
    }

    /// Walks an expression for nested queries (subqueries are checked like statements).
    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::Subquery(q) | Expr::Exists { subquery: q, .. } => self.query(q),
            Expr::InSubquery { expr, subquery, .. } => {
                self.expr(expr);
                self.query(subquery);
            }
            Expr::BinaryOp { left, right, .. } => {
                self.expr(left);
                self.expr(right);
            }
            Expr::UnaryOp { expr, .. }
            | Expr::Nested(expr)
            | Expr::IsNull(expr)
            | Expr::IsNotNull(expr)
            | Expr::Cast { expr, .. }
            | Expr::Collate { expr, .. } => self.expr(expr),
            Expr::InList { expr, list, .. } => {
                self.expr(expr);
                list.iter().for_each(|x| self.expr(x));
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                self.expr(expr);
                self.expr(low);
                self.expr(high);
            }
            Expr::Like { expr, pattern, .. } => {
                self.expr(expr);
                self.expr(pattern);
            }
            Expr::Tuple(v) => v.iter().for_each(|x| self.expr(x)),
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                for x in operand.iter().chain(else_result.iter()) {
                    self.expr(x);
                }
                for c in conditions {
                    self.expr(&c.condition);
                    self.expr(&c.result);
                }
            }
            Expr::Function(f) => match &f.args {
                FunctionArguments::Subquery(q) => self.query(q),
                FunctionArguments::List(l) => {
                    for a in &l.args {
                        let (FunctionArg::Named { arg, .. }
                        | FunctionArg::ExprNamed { arg, .. }
                        | FunctionArg::Unnamed(arg)) = a;
                        if let FunctionArgExpr::Expr(x) = arg {
                            self.expr(x);
                        }
                    }
                }
                FunctionArguments::None => {}
            },
            _ => {}
        }
    }
}

fn join_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c)
        | JoinOperator::StraightJoin(c) => Some(c),
        _ => None,
    }
}

/// `col`, `t.col` or `db.t.col` as (qualifier, column), lower-cased.
fn column_ref(e: &Expr) -> Option<(Option<String>, String)> {
    match e {
        Expr::Identifier(i) => Some((None, lower(&i.value))),
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
            let n = parts.len();
            Some((Some(lower(&parts[n - 2].value)), lower(&parts[n - 1].value)))
        }
        Expr::Nested(inner) => column_ref(inner),
        _ => None,
    }
}

/// The pins of a statement: the AND-ed conjuncts of its WHERE and of its joins' ON / USING.
fn pins_of<'e>(twjs: &'e [TableWithJoins], selection: Option<&'e Expr>) -> Vec<Pin<'e>> {
    let mut pins = Vec::new();
    if let Some(e) = selection {
        conjunct_pins(e, &mut pins);
    }
    for j in twjs.iter().flat_map(|t| &t.joins) {
        match join_constraint(&j.join_operator) {
            Some(JoinConstraint::On(e)) => conjunct_pins(e, &mut pins),
            Some(JoinConstraint::Using(cols)) => {
                for c in cols {
                    pins.push(Pin {
                        qualifier: None,
                        column: last_name(c),
                        other: None,
                    });
                }
            }
            _ => {}
        }
    }
    pins
}

fn conjunct_pins<'e>(e: &'e Expr, pins: &mut Vec<Pin<'e>>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjunct_pins(left, pins);
            conjunct_pins(right, pins);
        }
        Expr::Nested(inner) => conjunct_pins(inner, pins),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq | BinaryOperator::Spaceship,
            right,
        } => {
            for (col, other) in [(left, right), (right, left)] {
                if let Some((qualifier, column)) = column_ref(col) {
                    pins.push(Pin {
                        qualifier,
                        column,
                        other: Some(other),
                    });
                }
            }
        }
        Expr::InList {
            expr,
            negated: false,
            ..
        }
        | Expr::InSubquery {
            expr,
            negated: false,
            ..
        } => {
            if let Some((qualifier, column)) = column_ref(expr) {
                pins.push(Pin {
                    qualifier,
                    column,
                    other: None,
                });
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (kind, statement text) of every piece of a body.
    fn isolated(body: &str) -> Vec<(StmtKind, String)> {
        let tokens = lex(body);
        split_statements(&tokens)
            .into_iter()
            .map(|p| {
                let iso = isolate(p);
                (iso.kind, excerpt(iso.statement))
            })
            .collect()
    }

    #[test]
    fn lexer_skips_quotes_and_comments() {
        let src =
            "SELECT 'a;b', \"c;d\", `e;f` -- g;h\n # i;j\n /* k;l */ FROM t; SET x = 'it''s;' ;";
        let tokens = lex(src);
        let pieces = split_statements(&tokens);
        assert_eq!(pieces.len(), 2);
        assert_eq!(excerpt(pieces[0]), "SELECT 'a;b', \"c;d\", `e;f` FROM t");
        assert_eq!(excerpt(pieces[1]), "SET x = 'it''s;'");
        // Backslash escapes and `--` without a following space (a minus twice) are not comments.
        let tokens = lex(r"SELECT 'a\';b', 1--2;");
        assert_eq!(split_statements(&tokens).len(), 1);
    }

    #[test]
    fn splitter_strips_procedural_wrappers() {
        let body = "BEGIN
  DECLARE v_id BIGINT DEFAULT 0;
  DECLARE done INT DEFAULT 0;
  DECLARE c CURSOR FOR SELECT id FROM t WHERE k = 1;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1;
  DECLARE EXIT HANDLER FOR SQLSTATE VALUE '40001', SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  main: LOOP
    FETCH c INTO v_id;
    IF done = 1 THEN LEAVE main; END IF;
    IF (SELECT CASE WHEN a THEN 1 ELSE 0 END FROM t) = 1 THEN UPDATE t SET a = 1 WHERE id = v_id;
    ELSEIF v_id IN (1, 2) THEN DELETE FROM t WHERE id = v_id;
    ELSE SELECT a INTO v_id FROM t WHERE id = 1 FOR UPDATE;
    END IF;
  END LOOP main;
  w: WHILE v_id > 0 DO SET v_id = v_id - 1; END WHILE w;
  REPEAT INSERT INTO t (a) VALUES (1); UNTIL v_id > 3 END REPEAT;
  CASE v_id WHEN 1 THEN CALL p(1); ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'x'; END CASE;
  PREPARE s FROM @q;
  FROBNICATE t;
END";
        use StmtKind::*;
        let got = isolated(body);
        let want: Vec<(StmtKind, &str)> = vec![
            (Procedural, "DECLARE v_id BIGINT DEFAULT 0"),
            (Procedural, "DECLARE done INT DEFAULT 0"),
            (Dml, "SELECT id FROM t WHERE k = 1"),
            (Procedural, "SET done = 1"),
            (Procedural, "ROLLBACK"),
            (Procedural, "RESIGNAL"),
            (Procedural, "END"),
            (Procedural, "FETCH c INTO v_id"),
            (Procedural, "LEAVE main"),
            (Procedural, "END IF"),
            (Dml, "UPDATE t SET a = 1 WHERE id = v_id"),
            (Dml, "DELETE FROM t WHERE id = v_id"),
            (Dml, "SELECT a INTO v_id FROM t WHERE id = 1 FOR UPDATE"),
            (Procedural, "END IF"),
            (Procedural, "END LOOP main"),
            (Procedural, "SET v_id = v_id - 1"),
            (Procedural, "END WHILE w"),
            (Dml, "INSERT INTO t (a) VALUES (1)"),
            (Procedural, "UNTIL v_id > 3 END REPEAT"),
            (Procedural, "CALL p(1)"),
            (Procedural, "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'x'"),
            (Procedural, "END CASE"),
            (Dynamic, "PREPARE s FROM @q"),
            (Unknown, "FROBNICATE t"),
            (Procedural, "END"),
        ];
        let got: Vec<(StmtKind, &str)> = got.iter().map(|(k, s)| (*k, s.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn normalize_rewrites_mysql_only_clauses() {
        let norm = |s: &str| normalize(&lex(s));
        assert_eq!(
            norm("SELECT a, b INTO v_a, v_b FROM t WHERE id = 1 LOCK IN SHARE MODE"),
            "SELECT a, b FROM t WHERE id = 1 FOR SHARE"
        );
        assert_eq!(
            norm("SELECT a FROM t WHERE id = 1 FOR UPDATE INTO v_a"),
            "SELECT a FROM t WHERE id = 1 FOR UPDATE"
        );
        assert_eq!(
            norm("UPDATE t SET a = (SELECT 1 ORDER BY x LIMIT 1) WHERE id = 1 ORDER BY id LIMIT 1"),
            "UPDATE t SET a = (SELECT 1 ORDER BY x LIMIT 1) WHERE id = 1"
        );
        // INSERT INTO is not a SELECT's INTO.
        assert_eq!(
            norm("INSERT INTO t (a) SELECT 1"),
            "INSERT INTO t (a) SELECT 1"
        );
    }

    #[test]
    fn counts_lock_clauses_but_not_upserts() {
        let n = |s: &str| count_lock_clauses(&lex(s));
        assert_eq!(n("SELECT 1 FROM t FOR UPDATE SKIP LOCKED"), 1);
        assert_eq!(n("SELECT 1 FROM t LOCK IN SHARE MODE"), 1);
        assert_eq!(
            n("INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = 1"),
            0
        );
        assert!(!writes(&lex(
            "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = 1"
        )));
        assert!(writes(&lex("UPDATE t SET a = 1")));
    }
}
