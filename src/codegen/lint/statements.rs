//! Statement isolation: splitting procedure bodies at `;`, stripping procedural wrappers,
//! finding subqueries and locking clauses, and normalising MySQL-only clauses for sqlparser.

use super::lexer::{Tk, Token};

/// Splits a body into its `;`-terminated pieces (the lexer already skipped quotes and comments,
/// and `;` is never valid inside parentheses).
pub(super) fn split_statements<'t, 'a>(tokens: &'t [Token<'a>]) -> Vec<&'t [Token<'a>]> {
    tokens
        .split(|t| t.is_punct(";"))
        .filter(|s| !s.is_empty())
        .collect()
}

/// What is left of a piece once its procedural wrappers are stripped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StmtKind {
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
pub(super) struct Isolated<'t, 'a> {
    pub(super) kind: StmtKind,
    /// The wrapper tokens stripped in front of the statement (labels, `IF ... THEN`, ...).
    pub(super) wrapper: &'t [Token<'a>],
    /// The expressions of the wrappers: IF / ELSEIF / WHEN / WHILE conditions and a CASE
    /// statement's operand.
    pub(super) conditions: Vec<&'t [Token<'a>]>,
    pub(super) statement: &'t [Token<'a>],
}

/// The index of the first `keyword` at the top level of `t[from..]`: outside parentheses and
/// outside `CASE ... END` expressions (whose THEN/WHEN belong to the expression).
pub(super) fn find_top(t: &[Token], from: usize, keyword: &str) -> Option<usize> {
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
pub(super) fn skip_handler_conditions(t: &[Token], mut i: usize) -> usize {
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
pub(super) fn isolate<'t, 'a>(piece: &'t [Token<'a>]) -> Isolated<'t, 'a> {
    let t = piece;
    let mut i = 0;
    let mut conditions = Vec::new();
    let unknown = |i: usize, conditions| Isolated {
        kind: StmtKind::Unknown,
        wrapper: &t[..i],
        conditions,
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
                Some(then) => {
                    conditions.push(&t[i + 1..then]);
                    i = then + 1;
                }
                None => return unknown(i, conditions),
            }
        } else if w.is("WHILE") {
            match find_top(t, i + 1, "DO") {
                Some(d) => {
                    conditions.push(&t[i + 1..d]);
                    i = d + 1;
                }
                None => return unknown(i, conditions),
            }
        } else if w.is("CASE") {
            // A CASE statement: skip its operand up to the first WHEN.
            match find_top(t, i + 1, "WHEN") {
                Some(when) => {
                    if when > i + 1 {
                        conditions.push(&t[i + 1..when]);
                    }
                    i = when;
                }
                None => return unknown(i, conditions),
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
        conditions,
        statement,
    }
}

/// The outermost parenthesised queries `( SELECT ... )` / `( WITH ... )` in `t`, without their
/// parentheses.
pub(super) fn subqueries<'t, 'a>(t: &'t [Token<'a>]) -> Vec<&'t [Token<'a>]> {
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

/// Whether a query reads a stored table (`FROM x` other than `JSON_TABLE(...)` or `DUAL`).
pub(super) fn reads_a_table(t: &[Token]) -> bool {
    t.windows(2).any(|w| {
        w[0].is("FROM")
            && matches!(w[1].kind, Tk::Word | Tk::QuotedIdent)
            && !w[1].is_any(&["JSON_TABLE", "DUAL"])
    })
}

/// The number of locking clauses written in `t`.
pub(super) fn count_lock_clauses(t: &[Token]) -> usize {
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
pub(super) fn writes(t: &[Token]) -> bool {
    (0..t.len()).any(|i| {
        t[i].is("DELETE") || (t[i].is("UPDATE") && !(i > 0 && t[i - 1].is_any(&["FOR", "KEY"])))
    })
}

/// Rewrites the MySQL-only clauses sqlparser 0.58 rejects into text the index rule reads the
/// same way: a SELECT's `INTO var[, var]` is dropped (it only names where the row goes);
/// `LOCK IN SHARE MODE` becomes `FOR SHARE`; an UPDATE's trailing `ORDER BY` / `LIMIT` is
/// dropped (they bound the rows the WHERE already selected); a JSON_TABLE column's `CHARACTER SET
/// cs COLLATE co` before its `PATH` is dropped (sqlparser reads a bare type there; the character
/// set does not change which rows are read). Comments and line breaks become
/// single spaces, so sqlparser's error positions point into the one-line excerpt.
pub(super) fn normalize(t: &[Token]) -> String {
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
    for i in 0..t.len().saturating_sub(2) {
        if t[i].is("CHARACTER") && t[i + 1].is("SET") {
            let mut end = i + 3;
            if t.get(end).is_some_and(|x| x.is("COLLATE")) {
                end += 2;
            }
            if t.get(end).is_some_and(|x| x.is("PATH")) {
                replace[i..end.min(t.len())]
                    .iter_mut()
                    .for_each(|r| *r = Some(""));
            }
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

#[cfg(test)]
mod tests {
    use super::super::lexer::{excerpt, lex};
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
        assert_eq!(
            norm("SELECT j.s FROM JSON_TABLE(@j, '$[*]' COLUMNS (s LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.s', v VARCHAR(9) CHARACTER SET ascii PATH '$.v')) j"),
            "SELECT j.s FROM JSON_TABLE(@j, '$[*]' COLUMNS (s LONGTEXT PATH '$.s', v VARCHAR(9) PATH '$.v')) j"
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
