//! The rules: the text rules every object gets and the procedure rules (index filters,
//! implicit shared locks, known tables, dynamic SQL) checked on the isolated statements.

use std::collections::BTreeSet;

use sqlparser::ast::BinaryOperator;
use sqlparser::ast::{
    Expr, FromTable, FunctionArg, FunctionArgExpr, FunctionArguments, JoinConstraint, JoinOperator,
    LockClause, LockType, ObjectName, Query, Select, SelectItem, SetExpr, Statement, TableFactor,
    TableObject, TableWithJoins, UpdateTableFromKind,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::super::Object;
use super::lexer::{excerpt, excerpt_text, joined, lex, Token};
use super::procedural;
use super::schema::{blank_comment_lines, last_name, lower, table_model, Schema, TableModel};
use super::statements::{
    count_lock_clauses, isolate, normalize, reads_a_table, split_statements, subqueries, writes,
    StmtKind,
};
use super::{Report, Rule};

pub(super) fn text_rules(o: &Object, report: &mut Report) {
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
// Procedures
// ---------------------------------------------------------------------------------------------

pub(super) fn lint_procedure(o: &Object, schema: &Schema, report: &mut Report) {
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
    let pieces = split_statements(&def[body_start..]);
    // The temporary tables the procedure creates join the schema model for its statements.
    let mut own = None;
    for piece in &pieces {
        let iso = isolate(piece);
        if iso.kind != StmtKind::Ddl || !iso.statement.get(1).is_some_and(|t| t.is("TEMPORARY")) {
            continue;
        }
        if let Ok(statements) = Parser::parse_sql(&MySqlDialect {}, &joined(iso.statement)) {
            for s in &statements {
                if let Statement::CreateTable(ct) = s {
                    let (name, model) = table_model(o, ct, report);
                    own.get_or_insert_with(|| schema.clone())
                        .insert(name, model);
                }
            }
        }
    }
    let schema = own.as_ref().unwrap_or(schema);
    for piece in pieces {
        lint_piece(o, schema, piece, report);
    }
}

/// Lints one `;`-terminated piece of a body.
pub(super) fn lint_piece(o: &Object, schema: &Schema, piece: &[Token], report: &mut Report) {
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
        return;
    }
    let iso = isolate(piece);
    // The wrappers' conditions (IF / ELSEIF / WHEN / WHILE, a CASE operand) are expressions.
    for condition in &iso.conditions {
        if let Err(reason) = parse_expression(condition) {
            report.unparsed(
                &o.name,
                excerpt(piece),
                format!("condition `{}`: {reason}", excerpt(condition)),
            );
        }
    }
    // The procedural parts (IF/WHILE/UNTIL conditions, SET and DECLARE DEFAULT expressions, ...)
    // may hold subqueries, which are DML the lint can isolate: each is parenthesised, so it is
    // parsed and checked like a statement.
    let mut procedural = vec![iso.wrapper];
    if iso.kind != StmtKind::Dml {
        procedural.push(iso.statement);
    }
    let mut hidden_locks = 0;
    let listed_before = report.unparsed.len();
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
        StmtKind::Dml => {
            if lint_dml(o, schema, iso.statement, report) {
                report.coverage.sqlparser += 1;
            }
        }
        StmtKind::Ddl => match Parser::parse_sql(&MySqlDialect {}, &joined(iso.statement)) {
            Ok(_) => report.coverage.sqlparser += 1,
            Err(e) => report.unparsed(&o.name, excerpt(iso.statement), e.to_string()),
        },
        StmtKind::Unknown => report.unparsed(
            &o.name,
            excerpt(iso.statement),
            "not a statement the lint recognises; checked by text rules only".into(),
        ),
        StmtKind::Dynamic => {}
        // A statement whose unreadable subquery is listed already is not listed again.
        StmtKind::Procedural => {
            let subquery_listed = report.unparsed.len() > listed_before;
            lint_procedural(o, iso.statement, subquery_listed, report)
        }
    }
}

/// A procedural statement: read by the lint's grammar (its expressions parsed by sqlparser), or
/// parsed whole by sqlparser (SET, CALL, START TRANSACTION, COMMIT, ...), or listed.
fn lint_procedural(o: &Object, t: &[Token], subquery_listed: bool, report: &mut Report) {
    if t.is_empty() {
        return;
    }
    if let Some(form) = procedural::read(t) {
        for e in &form.expressions {
            if let Err(reason) = parse_expression(e) {
                report.unparsed(
                    &o.name,
                    excerpt(t),
                    format!("{} expression `{}`: {reason}", form.keyword, excerpt(e)),
                );
                return;
            }
        }
        report.coverage.grammar += 1;
        return;
    }
    match parse_one(&normalize(t)) {
        Ok(_) => report.coverage.sqlparser += 1,
        Err(_) if subquery_listed => {}
        Err(reason) => report.unparsed(&o.name, excerpt(t), reason),
    }
}

/// Parses one expression with sqlparser: all of `t` must be the expression.
fn parse_expression(t: &[Token]) -> Result<(), String> {
    let text = normalize(t);
    let mut parser = Parser::new(&MySqlDialect {})
        .try_with_sql(&text)
        .map_err(|e| e.to_string())?;
    parser.parse_expr().map_err(|e| e.to_string())?;
    let next = parser.peek_token();
    if next.token == sqlparser::tokenizer::Token::EOF {
        Ok(())
    } else {
        Err(format!(
            "sqlparser read an expression that ends before {}",
            next.token
        ))
    }
}

/// Parses exactly one statement with sqlparser.
fn parse_one(text: &str) -> Result<Statement, String> {
    Parser::parse_sql(&MySqlDialect {}, text)
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
        })
}

/// Parses and checks one DML statement; returns whether sqlparser parsed it.
pub(super) fn lint_dml(o: &Object, schema: &Schema, t: &[Token], report: &mut Report) -> bool {
    let statement = excerpt(t);
    let text = normalize(t);
    let locks_written = count_lock_clauses(t);
    let parsed = match parse_one(&text) {
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
            return false;
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
    true
}

/// A table reference in a FROM / UPDATE / DELETE clause.
pub(super) struct Rel {
    /// The table's lower-case name.
    table: String,
    /// What columns are qualified with: the alias if any, else the table name.
    qualifier: String,
}

/// A column the statement pins by equality (`col = expr`, `expr = col`, `col IN (...)`,
/// `JOIN ... USING (col)`); `other` is the compared expression, when there is one.
pub(super) struct Pin<'e> {
    qualifier: Option<String>,
    column: String,
    other: Option<&'e Expr>,
}

/// Walks one parsed DML statement, collecting rule findings.
pub(super) struct Checker<'s> {
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

pub(super) fn join_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
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
pub(super) fn column_ref(e: &Expr) -> Option<(Option<String>, String)> {
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
pub(super) fn pins_of<'e>(twjs: &'e [TableWithJoins], selection: Option<&'e Expr>) -> Vec<Pin<'e>> {
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

pub(super) fn conjunct_pins<'e>(e: &'e Expr, pins: &mut Vec<Pin<'e>>) {
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
