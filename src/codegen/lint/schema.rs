//! The schema model (tables, their columns and indexes) and the table rules that build it.

use std::collections::{BTreeMap, BTreeSet};

use sqlparser::ast::{
    ColumnOption, CreateTable, CreateTableOptions, Expr, ObjectName, ObjectNamePart, SqlOption,
    Statement, TableConstraint,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::super::Object;
use super::lexer::excerpt_text;
use super::{Report, Rule};

/// One index of a table: its name (`PRIMARY` for the primary key) and ordered columns.
#[derive(Debug, Clone)]
pub(super) struct Index {
    pub(super) name: String,
    pub(super) columns: Vec<String>,
}

#[derive(Debug, Default, Clone)]
pub(super) struct TableModel {
    pub(super) columns: BTreeSet<String>,
    pub(super) indexes: Vec<Index>,
}

impl TableModel {
    /// `PRIMARY(id), ix_task_dispatch(queue_id, ...)`: what an index filter could have used.
    pub(super) fn describe_indexes(&self) -> String {
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
pub(super) type Schema = BTreeMap<String, TableModel>;

pub(crate) fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

/// The last part of a (possibly qualified) name, lower-cased.
pub(super) fn last_name(name: &ObjectName) -> String {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(i)) => lower(&i.value),
        Some(other) => lower(&other.to_string()),
        None => String::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------------

/// Parses a table object's DDL with sqlparser (MySQL dialect), as the lint and
/// `orbit migrate verify` read it.
pub(crate) fn parse_ddl(sql: &str) -> Result<Vec<Statement>, sqlparser::parser::ParserError> {
    Parser::parse_sql(&MySqlDialect {}, &blank_comment_lines(sql))
}

/// The columns of an index, lower-cased (a prefix index `col(10)` names `col`).
pub(crate) fn index_columns(cols: &[sqlparser::ast::IndexColumn]) -> Vec<String> {
    cols.iter()
        .map(|c| match &c.column.expr {
            Expr::Identifier(i) => lower(&i.value),
            // A prefix index `col(10)` parses as a call; its first column is still `col`.
            Expr::Function(f) => last_name(&f.name),
            other => lower(&other.to_string()),
        })
        .collect()
}

pub(super) fn lint_table(o: &Object, schema: &mut Schema, report: &mut Report) {
    let statements = match parse_ddl(&o.sql) {
        Ok(s) => s,
        Err(e) => {
            let statement = excerpt_text(&blank_comment_lines(&o.sql));
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
pub(super) fn table_model(
    o: &Object,
    ct: &CreateTable,
    report: &mut Report,
) -> (String, TableModel) {
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
pub(super) fn blank_comment_lines(sql: &str) -> String {
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
