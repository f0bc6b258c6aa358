//! The lint's own grammar for the MySQL procedural statements sqlparser has none for: `DECLARE`
//! of variables and conditions, `SIGNAL` / `RESIGNAL`, `END [IF | LOOP | ...] [label]`, `LEAVE`,
//! `ITERATE`, `OPEN`, `CLOSE`, `FETCH`, `GET DIAGNOSTICS` and `UNTIL ... END REPEAT`.
//!
//! [`read`] checks a statement's shape and returns the expressions in it (a DEFAULT value, a
//! SIGNAL's `MESSAGE_TEXT`, an UNTIL condition), which the rules then hand to sqlparser. A
//! statement that is neither of these shapes nor parsed whole by sqlparser (SET, CALL, COMMIT,
//! ...) is listed in the README as one a DBA must read by hand.

use super::lexer::{Tk, Token};
use super::statements::find_top;

/// One procedural statement read by [`read`].
#[derive(Debug)]
pub(super) struct Form<'t, 'a> {
    /// The statement's leading keyword, upper case (`DECLARE`, `SIGNAL`, `END`, ...).
    pub(super) keyword: String,
    /// The expressions inside it, for sqlparser.
    pub(super) expressions: Vec<&'t [Token<'a>]>,
}

fn ident(t: Option<&Token>) -> bool {
    t.is_some_and(|t| matches!(t.kind, Tk::Word | Tk::QuotedIdent))
}

/// A cursor of tokens for the small grammars below.
struct Cur<'t, 'a> {
    t: &'t [Token<'a>],
    i: usize,
}

impl<'t, 'a> Cur<'t, 'a> {
    fn peek(&self) -> Option<&'t Token<'a>> {
        self.t.get(self.i)
    }
    fn eat(&mut self, keyword: &str) -> bool {
        let hit = self.peek().is_some_and(|t| t.is(keyword));
        self.i += usize::from(hit);
        hit
    }
    fn eat_punct(&mut self, p: &str) -> bool {
        let hit = self.peek().is_some_and(|t| t.is_punct(p));
        self.i += usize::from(hit);
        hit
    }
    fn eat_ident(&mut self) -> bool {
        let hit = ident(self.peek());
        self.i += usize::from(hit);
        hit
    }
    fn eat_kind(&mut self, kind: Tk) -> bool {
        let hit = self.peek().is_some_and(|t| t.kind == kind);
        self.i += usize::from(hit);
        hit
    }
    fn done(&self) -> bool {
        self.i >= self.t.len()
    }
    /// `ident [, ident]*`
    fn ident_list(&mut self) -> bool {
        loop {
            if !self.eat_ident() {
                return false;
            }
            if !self.eat_punct(",") {
                return true;
            }
        }
    }
    /// `SQLSTATE [VALUE] 'xxxxx'`
    fn sqlstate(&mut self) -> bool {
        if !self.eat("SQLSTATE") {
            return false;
        }
        self.eat("VALUE");
        self.eat_kind(Tk::Str)
    }
    /// A data type: `NAME [(n [, n])] [UNSIGNED | SIGNED | ZEROFILL]* [CHARACTER SET x |
    /// CHARSET x | COLLATE x]*`.
    fn data_type(&mut self) -> bool {
        if !self.peek().is_some_and(|t| t.kind == Tk::Word) {
            return false;
        }
        self.i += 1;
        if self.eat_punct("(") {
            loop {
                if !self.eat_kind(Tk::Num) {
                    return false;
                }
                if !self.eat_punct(",") {
                    break;
                }
            }
            if !self.eat_punct(")") {
                return false;
            }
        }
        loop {
            if self.eat("UNSIGNED") || self.eat("SIGNED") || self.eat("ZEROFILL") {
                continue;
            }
            if self.eat("CHARACTER") {
                if !(self.eat("SET") && self.eat_ident()) {
                    return false;
                }
            } else if self.eat("CHARSET") || self.eat("COLLATE") {
                if !self.eat_ident() {
                    return false;
                }
            } else {
                return true;
            }
        }
    }
    /// `item = expr [, item = expr]*` to the end, where each expr ends at a top-level comma.
    fn assignments(&mut self, out: &mut Vec<&'t [Token<'a>]>) -> bool {
        loop {
            if !(self.eat_ident() && self.eat_punct("=")) {
                return false;
            }
            let start = self.i;
            let end = find_top_punct(self.t, start, ",").unwrap_or(self.t.len());
            if end == start {
                return false;
            }
            out.push(&self.t[start..end]);
            self.i = end;
            if !self.eat_punct(",") {
                return self.done();
            }
        }
    }
}

/// The first top-level `p` (outside parentheses) in `t[from..]`.
pub(super) fn find_top_punct(t: &[Token], from: usize, p: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, tok) in t.iter().enumerate().skip(from) {
        if depth == 0 && tok.is_punct(p) {
            return Some(i);
        }
        depth += i32::from(tok.is_punct("(")) - i32::from(tok.is_punct(")"));
    }
    None
}

/// Reads one procedural statement (its wrappers already stripped) with the lint's grammar:
/// `Some` with the expressions in it when it has one of the shapes above, `None` otherwise.
pub(super) fn read<'t, 'a>(t: &'t [Token<'a>]) -> Option<Form<'t, 'a>> {
    let first = t.first()?;
    let keyword = first.text.to_ascii_uppercase();
    let mut c = Cur { t, i: 1 };
    let mut expressions = Vec::new();
    let ok = match keyword.as_str() {
        // END [IF | LOOP | WHILE | REPEAT | CASE] [label]
        "END" => {
            let _ =
                c.eat("IF") || c.eat("LOOP") || c.eat("WHILE") || c.eat("REPEAT") || c.eat("CASE");
            c.eat_ident();
            c.done()
        }
        "LEAVE" | "ITERATE" | "OPEN" | "CLOSE" => c.eat_ident() && c.done(),
        // FETCH [[NEXT] FROM] cursor INTO var [, var]*
        "FETCH" => {
            c.eat("NEXT");
            c.eat("FROM");
            c.eat_ident() && c.eat("INTO") && c.ident_list() && c.done()
        }
        "DECLARE" => {
            let name_end = c.i + 1;
            if t.get(name_end).is_some_and(|x| x.is("CONDITION")) {
                // DECLARE name CONDITION FOR {SQLSTATE [VALUE] 'xxxxx' | error_number}
                c.i = name_end + 1;
                c.eat("FOR") && (c.sqlstate() || c.eat_kind(Tk::Num)) && c.done()
            } else if c.ident_list() && c.data_type() {
                // DECLARE var [, var]* type [DEFAULT expr]
                if c.eat("DEFAULT") {
                    expressions.push(&t[c.i..]);
                    c.i < t.len()
                } else {
                    c.done()
                }
            } else {
                false
            }
        }
        // SIGNAL {SQLSTATE [VALUE] 'xxxxx' | condition} [SET item = expr, ...];
        // RESIGNAL [SQLSTATE ... | condition] [SET ...]
        "SIGNAL" | "RESIGNAL" => {
            let condition =
                c.sqlstate() || (!c.peek().is_some_and(|x| x.is("SET")) && c.eat_ident());
            if keyword == "SIGNAL" && !condition {
                false
            } else if c.eat("SET") {
                c.assignments(&mut expressions)
            } else {
                c.done()
            }
        }
        // GET [CURRENT | STACKED] DIAGNOSTICS [CONDITION n] var = item [, var = item]*
        "GET" => {
            let _ = c.eat("CURRENT") || c.eat("STACKED");
            if !c.eat("DIAGNOSTICS") {
                false
            } else {
                if c.eat("CONDITION") && !(c.eat_kind(Tk::Num) || c.eat_ident()) {
                    return None;
                }
                let mut items = Vec::new();
                let ok = c.assignments(&mut items);
                // The items are names (MESSAGE_TEXT, RETURNED_SQLSTATE, NUMBER, ...), not
                // expressions: each must be one word.
                ok && items.iter().all(|i| i.len() == 1 && i[0].kind == Tk::Word)
            }
        }
        // UNTIL expr END REPEAT [label]
        "UNTIL" => match find_top(t, 1, "END") {
            Some(end) if end > 1 => {
                expressions.push(&t[1..end]);
                c.i = end + 1;
                c.eat("REPEAT") && {
                    c.eat_ident();
                    c.done()
                }
            }
            _ => false,
        },
        _ => false,
    };
    ok.then_some(Form {
        keyword,
        expressions,
    })
}

#[cfg(test)]
mod tests {
    use super::super::lexer::{excerpt, lex};
    use super::*;

    fn shape(s: &str) -> Option<(String, Vec<String>)> {
        let tokens = lex(s);
        read(&tokens).map(|f| {
            (
                f.keyword,
                f.expressions.iter().map(|e| excerpt(e)).collect(),
            )
        })
    }

    #[test]
    fn reads_the_procedural_shapes() {
        let none: Vec<String> = Vec::new();
        assert_eq!(shape("END IF"), Some(("END".into(), none.clone())));
        assert_eq!(shape("END LOOP scan"), Some(("END".into(), none.clone())));
        assert_eq!(shape("END"), Some(("END".into(), none.clone())));
        assert_eq!(shape("LEAVE scan"), Some(("LEAVE".into(), none.clone())));
        assert_eq!(
            shape("FETCH c INTO v_a, v_b"),
            Some(("FETCH".into(), none.clone()))
        );
        assert_eq!(
            shape("DECLARE v_a, v_b VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin DEFAULT ''"),
            Some(("DECLARE".into(), vec!["''".to_string()]))
        );
        assert_eq!(
            shape("DECLARE v BIGINT UNSIGNED"),
            Some(("DECLARE".into(), none.clone()))
        );
        assert_eq!(
            shape("DECLARE deadlock CONDITION FOR SQLSTATE '40001'"),
            Some(("DECLARE".into(), none.clone()))
        );
        assert_eq!(
            shape(
                "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = CONCAT('a', f(1, 2)), MYSQL_ERRNO = 1"
            ),
            Some((
                "SIGNAL".into(),
                vec!["CONCAT('a', f(1, 2))".to_string(), "1".to_string()]
            ))
        );
        assert_eq!(shape("RESIGNAL"), Some(("RESIGNAL".into(), none.clone())));
        assert_eq!(
            shape("GET DIAGNOSTICS CONDITION 1 v_msg = MESSAGE_TEXT, v_state = RETURNED_SQLSTATE"),
            Some(("GET".into(), none.clone()))
        );
        assert_eq!(
            shape("UNTIL v_n > (CASE WHEN a THEN 1 ELSE 2 END) END REPEAT retry"),
            Some((
                "UNTIL".into(),
                vec!["v_n > (CASE WHEN a THEN 1 ELSE 2 END)".to_string()]
            ))
        );
        // Not these shapes: left to sqlparser, or listed.
        for s in [
            "SET v = 1",
            "CALL p(1)",
            "END IF extra words",
            "LEAVE",
            "FETCH c",
            "DECLARE v",
            "DECLARE v INT DEFAULT",
            "SIGNAL SET MESSAGE_TEXT = 'x'",
            "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT",
            "GET DIAGNOSTICS v = CONCAT(a)",
            "UNTIL END REPEAT",
        ] {
            assert!(shape(s).is_none(), "{s}");
        }
    }
}
