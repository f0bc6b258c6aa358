//! `orbit migrate verify`, and the check `serve` runs at start: is every object the catalog
//! records installed, and installed as this binary defines it?
//!
//! The `orbit_extension` catalog holds a SHA-256 per table and procedure: the checksum of its
//! file under `generated-sql/`. This binary renders the same files, so for every catalog row it
//! knows the definition the checksum stands for, and compares it with what the server reports:
//!
//! - a procedure: present in `information_schema.ROUTINES`, with the same parameters (mode and
//!   name, from `information_schema.PARAMETERS`) and the same body (`ROUTINE_DEFINITION`),
//!   compared with comments removed and whitespace collapsed (the plain `mariadb` client strips
//!   comments when it loads a file, so both installs compare equal);
//! - a table: present, with the same columns (name, type without integer display widths,
//!   nullability, in order) and every index of the definition (name, uniqueness, columns). An
//!   index the definition does not have is a note, not a problem (an operator may add one).
//!
//! A catalog row whose checksum is not this binary's rendering (another build installed it), an
//! object this binary defines that the catalog does not list, and the reverse are problems too.
//! Everything is read in a few queries whatever the data size.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::{MySqlConnection, Row};

use crate::codegen::{self, Kind, Object, Set};
use crate::migrate::MigrateError;

/// One thing that differs from the definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// `procedure`, `table`, `index`, `column` or `catalog`.
    pub kind: &'static str,
    /// The object's name (`table.index` / `table.column` for an index or column).
    pub name: String,
    /// What is wrong, e.g. `missing`.
    pub what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.name, self.what)
    }
}

/// What [`verify`] found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The installed extension version (0 = not installed).
    pub version: u32,
    /// Procedures and tables compared.
    pub checked: usize,
    /// Differences that make the install damaged.
    pub problems: Vec<Problem>,
    /// Differences that do not (an extra index, an extra `orbit_` procedure).
    pub notes: Vec<Problem>,
    /// What this account could not see, so was not compared (a serving account with EXECUTE
    /// only sees no tables and no procedure bodies). `migrate verify` fails on these;
    /// `serve` logs them.
    pub limits: Vec<String>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

fn db_err(doing: &'static str) -> impl Fn(sqlx::Error) -> MigrateError {
    move |e| MigrateError::Database {
        doing,
        reason: crate::migrate::describe(&e),
    }
}

/// Reads a text column that may arrive flagged binary (ascii_bin, information_schema on some
/// servers) or be NULL.
fn text(row: &sqlx::mysql::MySqlRow, idx: usize) -> Option<String> {
    if let Ok(v) = row.try_get::<Option<String>, _>(idx) {
        return v;
    }
    row.try_get::<Option<Vec<u8>>, _>(idx)
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn problem(kind: &'static str, name: impl Into<String>, what: impl Into<String>) -> Problem {
    Problem {
        kind,
        name: name.into(),
        what: what.into(),
    }
}

/// Compares the install in the connection's database with the catalog and with this binary's
/// definitions (see the module documentation).
pub async fn verify(conn: &mut MySqlConnection) -> Result<Report, MigrateError> {
    let objects = codegen::render_objects().map_err(|e| MigrateError::Database {
        doing: "rendering this binary's definitions",
        reason: e.to_string(),
    })?;
    let objects: Vec<Object> = objects
        .into_iter()
        .filter(|o| o.set == Set::Extension)
        .collect();
    let mut report = Report::default();

    let rows = match sqlx::query("SELECT kind, name, version, checksum FROM orbit_extension")
        .fetch_all(&mut *conn)
        .await
    {
        Ok(rows) => Some(rows),
        // ER_NO_SUCH_TABLE: nothing installed.
        Err(sqlx::Error::Database(d)) if d.code().as_deref() == Some("42S02") => {
            report.problems.push(problem(
                "catalog",
                "orbit_extension",
                "missing: the extension is not installed (run `orbit migrate up`)",
            ));
            return Ok(report);
        }
        // ER_TABLEACCESS_DENIED: a serving account with EXECUTE only; check what it can see.
        Err(sqlx::Error::Database(d)) if d.code().as_deref() == Some("42000") => {
            report.limits.push(
                "the catalog orbit_extension is not readable by this account (SELECT denied); \
                 compared with this binary's definitions only"
                    .to_string(),
            );
            None
        }
        Err(e) => return Err(db_err("reading the orbit_extension catalog")(e)),
    };
    let mut catalog: BTreeMap<(String, String), String> = BTreeMap::new();
    if rows.is_none() {
        report.version = codegen::EXTENSION_VERSION;
    }
    for row in rows.iter().flatten() {
        let kind = text(row, 0).unwrap_or_default();
        let name = text(row, 1).unwrap_or_default();
        let version: u32 = row.try_get(2).unwrap_or(0);
        let checksum = text(row, 3).unwrap_or_default();
        if kind == "extension" {
            report.version = version;
        } else if kind == "table" || kind == "procedure" {
            catalog.insert((kind, name), checksum);
        }
    }
    if report.version != codegen::EXTENSION_VERSION {
        report.problems.push(problem(
            "catalog",
            "orbit",
            format!(
                "the database has extension version {}, this orbit defines version {}; \
                 run `orbit migrate up` with the matching release first",
                report.version,
                codegen::EXTENSION_VERSION
            ),
        ));
        return Ok(report);
    }

    // What the server has.
    let routines = sqlx::query(
        "SELECT ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES \
         WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE'",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err("reading information_schema.ROUTINES"))?;
    let routines: BTreeMap<String, Option<String>> = routines
        .iter()
        .map(|r| (text(r, 0).unwrap_or_default(), text(r, 1)))
        .collect();
    let params = sqlx::query(
        "SELECT SPECIFIC_NAME, PARAMETER_MODE, PARAMETER_NAME FROM information_schema.PARAMETERS \
         WHERE SPECIFIC_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND ORDINAL_POSITION > 0 \
         ORDER BY SPECIFIC_NAME, ORDINAL_POSITION",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err("reading information_schema.PARAMETERS"))?;
    let mut installed_params: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &params {
        installed_params
            .entry(text(r, 0).unwrap_or_default())
            .or_default()
            .push(format!(
                "{} {}",
                text(r, 1).unwrap_or_default().to_ascii_uppercase(),
                text(r, 2).unwrap_or_default()
            ));
    }
    let tables: BTreeSet<String> = sqlx::query(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err("reading information_schema.TABLES"))?
    .iter()
    .map(|r| text(r, 0).unwrap_or_default())
    .collect();
    let column_rows = sqlx::query(
        "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, ORDINAL_POSITION",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err("reading information_schema.COLUMNS"))?;
    let mut installed_columns: BTreeMap<String, Vec<Column>> = BTreeMap::new();
    for r in &column_rows {
        installed_columns
            .entry(text(r, 0).unwrap_or_default())
            .or_default()
            .push(Column {
                name: text(r, 1).unwrap_or_default(),
                ty: normalize_type(&text(r, 2).unwrap_or_default()),
                nullable: text(r, 3).unwrap_or_default() == "YES",
            });
    }
    let index_rows = sqlx::query(
        "SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME, SUB_PART FROM information_schema.STATISTICS \
         WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err("reading information_schema.STATISTICS"))?;
    let mut installed_indexes: BTreeMap<String, BTreeMap<String, Index>> = BTreeMap::new();
    for r in &index_rows {
        let table = text(r, 0).unwrap_or_default();
        let name = text(r, 1).unwrap_or_default();
        let non_unique: i64 = r
            .try_get::<i64, _>(2)
            .or_else(|_| r.try_get::<i32, _>(2).map(i64::from))
            .unwrap_or(1);
        let column = text(r, 3).unwrap_or_default();
        let sub_part: Option<i64> = r.try_get::<Option<i64>, _>(4).ok().flatten();
        let entry = installed_indexes
            .entry(table)
            .or_default()
            .entry(name)
            .or_insert(Index {
                unique: non_unique == 0,
                columns: Vec::new(),
            });
        entry.columns.push(match sub_part {
            Some(n) => format!("{column}({n})"),
            None => column,
        });
    }

    // The catalog against this binary.
    for o in objects.iter().filter(|_| rows.is_some()) {
        let kind = o.kind.catalog_kind();
        match catalog.get(&(kind.to_string(), o.name.clone())) {
            None => {
                report
                    .problems
                    .push(problem(kind, &o.name, "not in the orbit_extension catalog"))
            }
            Some(sum) if *sum != codegen::sha256_hex(&o.file_text()) => {
                report.problems.push(problem(
                    kind,
                    &o.name,
                    format!(
                        "the catalog records sha256 {sum}, but this orbit's definition is {}; \
                         it was installed by another build",
                        codegen::sha256_hex(&o.file_text())
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    for (kind, name) in catalog.keys() {
        if !objects
            .iter()
            .any(|o| o.kind.catalog_kind() == kind && o.name == *name)
        {
            report.problems.push(problem(
                "catalog",
                format!("{kind} {name}"),
                "recorded in the catalog but unknown to this orbit",
            ));
        }
    }

    // An account with no privilege on the tables sees none of them in information_schema.
    let tables_visible = objects
        .iter()
        .any(|o| o.kind == Kind::Table && o.name != "orbit_extension" && tables.contains(&o.name));
    if !tables_visible {
        report.limits.push(
            "no table of the extension is visible to this account (no table privileges); \
             tables and indexes not compared"
                .to_string(),
        );
    }
    let mut unreadable = 0;
    // Each object against the server.
    for o in &objects {
        match o.kind {
            Kind::Procedure => {
                if routines.get(&o.name).is_some_and(Option::is_none) {
                    unreadable += 1;
                }
                report.checked += 1;
                check_procedure(o, &routines, &installed_params, &mut report)
            }
            Kind::Table if !tables_visible => {}
            Kind::Table => {
                report.checked += 1;
                check_table(
                    o,
                    &tables,
                    &installed_columns,
                    &installed_indexes,
                    &mut report,
                )
            }
        }
    }
    if unreadable > 0 {
        report.limits.push(format!(
            "{unreadable} procedure bodies are not readable by this account (only their definer, \
             or an account with SELECT on mysql.proc (MariaDB) or SHOW_ROUTINE (MySQL), can read \
             them); their presence was checked, not their bodies"
        ));
    }
    for name in routines.keys() {
        if name.starts_with("orbit_")
            && !objects
                .iter()
                .any(|o| o.kind == Kind::Procedure && o.name == *name)
        {
            report.notes.push(problem(
                "procedure",
                name,
                "installed but not part of the extension",
            ));
        }
    }
    Ok(report)
}

fn check_procedure(
    o: &Object,
    routines: &BTreeMap<String, Option<String>>,
    params: &BTreeMap<String, Vec<String>>,
    report: &mut Report,
) {
    let Some(body) = routines.get(&o.name) else {
        report
            .problems
            .push(problem("procedure", &o.name, "missing (dropped)"));
        return;
    };
    let Some((want_params, want_body)) = split_procedure(&o.sql) else {
        report.problems.push(problem(
            "procedure",
            &o.name,
            "this orbit cannot read its own definition (a bug)",
        ));
        return;
    };
    let have_params = params.get(&o.name).cloned().unwrap_or_default();
    if body.is_some() && have_params != want_params {
        report.problems.push(problem(
            "procedure",
            &o.name,
            format!(
                "parameters differ: installed ({}), defined ({})",
                have_params.join(", "),
                want_params.join(", ")
            ),
        ));
    }
    match body {
        // Not readable by this account: counted in the report's limits.
        None => {}
        Some(body) if normalize_sql(body) != normalize_sql(&want_body) => {
            report.problems.push(problem(
                "procedure",
                &o.name,
                "its body differs from the definition (changed after install)",
            ))
        }
        Some(_) => {}
    }
}

/// A column as compared: name, normalized type, nullability.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Column {
    name: String,
    ty: String,
    nullable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Index {
    unique: bool,
    columns: Vec<String>,
}

fn check_table(
    o: &Object,
    tables: &BTreeSet<String>,
    columns: &BTreeMap<String, Vec<Column>>,
    indexes: &BTreeMap<String, BTreeMap<String, Index>>,
    report: &mut Report,
) {
    if !tables.contains(&o.name) {
        report
            .problems
            .push(problem("table", &o.name, "missing (dropped)"));
        return;
    }
    let (want_columns, want_indexes) = parse_table(&o.sql);
    let have_columns = columns.get(&o.name).cloned().unwrap_or_default();
    for w in &want_columns {
        let col = format!("{}.{}", o.name, w.name);
        match have_columns.iter().find(|h| h.name == w.name) {
            None => report.problems.push(problem("column", col, "missing")),
            Some(h) if h.ty != w.ty => report.problems.push(problem(
                "column",
                col,
                format!("type is {}, defined as {}", h.ty, w.ty),
            )),
            Some(h) if h.nullable != w.nullable => report.problems.push(problem(
                "column",
                col,
                if h.nullable {
                    "allows NULL, defined NOT NULL"
                } else {
                    "is NOT NULL, defined to allow NULL"
                },
            )),
            Some(_) => {}
        }
    }
    for h in &have_columns {
        if !want_columns.iter().any(|w| w.name == h.name) {
            report.problems.push(problem(
                "column",
                format!("{}.{}", o.name, h.name),
                "installed but not in the definition",
            ));
        }
    }
    let empty = BTreeMap::new();
    let have_indexes = indexes.get(&o.name).unwrap_or(&empty);
    for (name, w) in &want_indexes {
        let label = format!("{}.{name}", o.name);
        match have_indexes.get(name) {
            None => report
                .problems
                .push(problem("index", label, "missing (dropped)")),
            Some(h) if h != w => report.problems.push(problem(
                "index",
                label,
                format!(
                    "is {}({}), defined as {}({})",
                    if h.unique { "UNIQUE " } else { "" },
                    h.columns.join(", "),
                    if w.unique { "UNIQUE " } else { "" },
                    w.columns.join(", ")
                ),
            )),
            Some(_) => {}
        }
    }
    for name in have_indexes.keys() {
        if !want_indexes.contains_key(name) {
            report.notes.push(problem(
                "index",
                format!("{}.{name}", o.name),
                "installed but not in the definition",
            ));
        }
    }
}

/// The columns and indexes of a generated `CREATE TABLE`, read with sqlparser as the lint reads
/// it (a unit test checks every generated table parses).
fn parse_table(sql: &str) -> (Vec<Column>, BTreeMap<String, Index>) {
    use crate::codegen::lint::{index_columns, lower, parse_ddl};
    use sqlparser::ast::{ColumnOption, Statement, TableConstraint};
    let mut columns = Vec::new();
    let mut indexes = BTreeMap::new();
    let Some(Statement::CreateTable(ct)) = parse_ddl(sql).ok().and_then(|s| s.into_iter().next())
    else {
        return (columns, indexes);
    };
    for col in &ct.columns {
        let name = lower(&col.name.value);
        let mut nullable = true;
        for opt in &col.options {
            match &opt.option {
                ColumnOption::NotNull => nullable = false,
                ColumnOption::Unique { is_primary, .. } => {
                    nullable &= !*is_primary;
                    let index = if *is_primary {
                        "PRIMARY".into()
                    } else {
                        name.clone()
                    };
                    indexes.insert(
                        index,
                        Index {
                            unique: true,
                            columns: vec![name.clone()],
                        },
                    );
                }
                _ => {}
            }
        }
        columns.push(Column {
            name,
            ty: normalize_type(&col.data_type.to_string()),
            nullable,
        });
    }
    for c in &ct.constraints {
        let (name, unique, cols) = match c {
            TableConstraint::PrimaryKey { columns, .. } => ("PRIMARY".to_string(), true, columns),
            TableConstraint::Unique {
                name,
                index_name,
                columns,
                ..
            } => match index_name.as_ref().or(name.as_ref()) {
                Some(n) => (n.value.clone(), true, columns),
                None => continue,
            },
            TableConstraint::Index {
                name: Some(n),
                columns,
                ..
            } => (n.value.clone(), false, columns),
            _ => continue,
        };
        indexes.insert(
            name,
            Index {
                unique,
                columns: index_columns(cols),
            },
        );
    }
    if let Some(primary) = indexes.get("PRIMARY") {
        for c in &mut columns {
            if primary.columns.contains(&c.name) {
                c.nullable = false;
            }
        }
    }
    (columns, indexes)
}

/// A column type as compared: lower case, no spaces inside parentheses, no integer display
/// width (MariaDB reports `bigint(20) unsigned`, MySQL 8 `bigint unsigned`; `tinyint(1)` too).
fn normalize_type(ty: &str) -> String {
    let lower = ty.trim().to_ascii_lowercase();
    let mut out = String::new();
    let mut depth = 0;
    let mut quote = false;
    for ch in lower.chars() {
        match ch {
            '\'' => {
                quote = !quote;
                out.push(ch);
            }
            '(' if !quote => {
                depth += 1;
                out.push(ch);
            }
            ')' if !quote => {
                depth -= 1;
                out.push(ch);
            }
            c if c.is_whitespace() && !quote => {
                if depth == 0 && !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            c => out.push(c),
        }
    }
    for int in ["tinyint", "smallint", "mediumint", "bigint", "int"] {
        if let Some(rest) = out.strip_prefix(&format!("{int}(")) {
            if let Some(close) = rest.find(')') {
                if rest[..close].chars().all(|c| c.is_ascii_digit()) {
                    out = format!("{int}{}", &rest[close + 1..]);
                }
            }
            break;
        }
    }
    out.trim().to_string()
}

/// The parameters (`MODE name`) and the body of a generated procedure's `CREATE PROCEDURE`.
fn split_procedure(sql: &str) -> Option<(Vec<String>, String)> {
    let create = sql.find("CREATE PROCEDURE")?;
    let text = &sql[create..];
    let text = text.split("$$").next()?;
    let open = text.find('(')?;
    // The matching parenthesis, outside quotes.
    let mut depth = 0;
    let mut quote: Option<char> = None;
    let mut close = None;
    for (i, ch) in text[open..].char_indices() {
        if let Some(q) = quote {
            if ch == q {
                quote = None;
            }
            continue;
        }
        match ch {
            '\'' | '"' | '`' => quote = Some(ch),
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    let params = split_top_level(&text[open + 1..close])
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let mut words = p.split_whitespace();
            let first = words.next().unwrap_or("").to_ascii_uppercase();
            if ["IN", "OUT", "INOUT"].contains(&first.as_str()) {
                format!("{first} {}", words.next().unwrap_or(""))
            } else {
                format!("IN {first}")
            }
        })
        .collect();
    // The body starts at the first BEGIN word after the parameters (characteristics such as
    // MODIFIES SQL DATA or COMMENT '...' come before it).
    let after = &text[close + 1..];
    let normalized = strip_comments(after);
    let mut at = find_word(&normalized, "BEGIN")?;
    // A labelled body (`body: BEGIN ... END body`) starts at its label.
    let before = normalized[..at].trim_end();
    if let Some(label_end) = before.strip_suffix(':') {
        let label_end = label_end.trim_end();
        let start = label_end.rfind(|c: char| !is_word(c)).map_or(0, |i| i + 1);
        if start < label_end.len() {
            at = start;
        }
    }
    Some((params, normalized[at..].to_string()))
}

fn split_top_level(s: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut depth = 0;
    let mut quote: Option<char> = None;
    for ch in s.chars() {
        if let Some(q) = quote {
            if ch == q {
                quote = None;
            }
        } else {
            match ch {
                '\'' | '"' | '`' => quote = Some(ch),
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(String::new());
                    continue;
                }
                _ => {}
            }
        }
        out.last_mut().expect("never empty").push(ch);
    }
    out
}

/// The byte offset of the first whole, unquoted `word` (upper case) in `s`.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    for (i, &(at, ch)) in chars.iter().enumerate() {
        if let Some(q) = quote {
            if ch == q {
                quote = None;
            }
            continue;
        }
        if ch == '\'' || ch == '"' || ch == '`' {
            quote = Some(ch);
            continue;
        }
        let before_ok = i == 0 || !is_word(chars[i - 1].1);
        if before_ok
            && s[at..].len() >= word.len()
            && s[at..at + word.len()].eq_ignore_ascii_case(word)
        {
            let after = s[at + word.len()..].chars().next();
            if after.is_none_or(|c| !is_word(c)) {
                return Some(at);
            }
        }
    }
    None
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// SQL text without comments (`-- `, `#`, `/* */`; quoted text kept).
fn strip_comments(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(ch) = chars.next() {
        if let Some(q) = quote {
            out.push(ch);
            if ch == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if ch == q {
                quote = None;
            }
            continue;
        }
        match ch {
            '\'' | '"' | '`' => {
                quote = Some(ch);
                out.push(ch);
            }
            '-' if chars.peek() == Some(&'-') => {
                let mut look = chars.clone();
                look.next();
                if look.peek().is_none_or(|c| c.is_whitespace()) {
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                    out.push('\n');
                } else {
                    out.push(ch);
                }
            }
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                out.push('\n');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
                out.push(' ');
            }
            c => out.push(c),
        }
    }
    out
}

/// SQL as compared: comments removed, whitespace runs outside quotes collapsed to one space.
pub fn normalize_sql(sql: &str) -> String {
    let stripped = strip_comments(sql);
    let mut out = String::with_capacity(stripped.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for ch in stripped.chars() {
        if let Some(q) = quote {
            out.push(ch);
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == q {
                quote = None;
            }
            continue;
        }
        if ch.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            continue;
        }
        if ch == '\'' || ch == '"' || ch == '`' {
            quote = Some(ch);
        }
        out.push(ch);
    }
    out.trim_end().to_string()
}

/// The report as lines for people: one per problem, then notes.
pub fn describe(report: &Report) -> Vec<String> {
    let mut lines: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    lines.extend(report.limits.iter().map(|l| format!("not checked: {l}")));
    lines.extend(report.notes.iter().map(|n| format!("note: {n}")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generated_table_and_procedure_parses() {
        for o in codegen::render_objects().unwrap() {
            if o.set != Set::Extension {
                continue;
            }
            match o.kind {
                Kind::Table => {
                    let (columns, indexes) = parse_table(&o.sql);
                    assert!(!columns.is_empty(), "{}: no columns", o.name);
                    assert!(
                        indexes.contains_key("PRIMARY"),
                        "{}: no primary key",
                        o.name
                    );
                    for c in &columns {
                        assert!(
                            !c.ty.is_empty()
                                && !c.ty.contains("comment")
                                && !c.ty.contains("not null")
                                && !c.ty.contains("character"),
                            "{}.{}: type {:?}",
                            o.name,
                            c.name,
                            c.ty
                        );
                    }
                }
                Kind::Procedure => {
                    let (_, body) = split_procedure(&o.sql)
                        .unwrap_or_else(|| panic!("{}: no procedure", o.name));
                    let n = normalize_sql(&body);
                    assert!(
                        (n.starts_with("BEGIN") || n.contains(": BEGIN")) && n.contains("END"),
                        "{}: {n}",
                        o.name
                    );
                    assert!(!n.contains("MODIFIES SQL DATA"), "{}: {n}", o.name);
                }
            }
        }
    }

    #[test]
    fn types_compare_without_display_widths() {
        assert_eq!(normalize_type("bigint(20) unsigned"), "bigint unsigned");
        assert_eq!(normalize_type("BIGINT UNSIGNED"), "bigint unsigned");
        assert_eq!(normalize_type("TINYINT(1)"), normalize_type("tinyint(4)"));
        assert_eq!(normalize_type("ENUM('A', 'B')"), "enum('a','b')");
        assert_eq!(normalize_type("VARCHAR(64)"), "varchar(64)");
    }

    #[test]
    fn a_column_type_stops_before_its_attributes() {
        let (columns, indexes) = parse_table(
            "CREATE TABLE t (\n  id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'x',\n  \
             e ENUM('NOT NULL', 'B') NOT NULL DEFAULT 'B' COMMENT 'y',\n  n BIGINT UNSIGNED NULL COMMENT 'z',\n  \
             PRIMARY KEY (id),\n  KEY ix_t_e (e, n)\n) ENGINE=InnoDB COMMENT='t'",
        );
        let shape: Vec<(&str, &str, bool)> = columns
            .iter()
            .map(|c| (c.name.as_str(), c.ty.as_str(), c.nullable))
            .collect();
        assert_eq!(
            shape,
            [
                ("id", "char(32)", false),
                ("e", "enum('not null','b')", false),
                ("n", "bigint unsigned", true)
            ]
        );
        assert_eq!(indexes["PRIMARY"].columns, ["id"]);
        assert_eq!(indexes["ix_t_e"].columns, ["e", "n"]);
        assert!(!indexes["ix_t_e"].unique);
    }

    #[test]
    fn comments_and_whitespace_do_not_count() {
        assert_eq!(
            normalize_sql("BEGIN\n  -- a comment\n  SELECT '-- kept'; /* gone */\nEND"),
            "BEGIN SELECT '-- kept'; END"
        );
    }
}
