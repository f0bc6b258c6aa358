//! The call rule: a `CALL` between Orbit's procedures reads like a call with named arguments.
//!
//! MySQL and MariaDB have positional parameters only, and check a call against its callee when
//! it runs, not when the caller is created. So for every `CALL` of a procedure the templates
//! define, the lint checks:
//! - the argument count equals the callee's parameter count;
//! - every argument that is not a plain variable or parameter or a string literal (a number such
//!   as `0`, `NULL`, or an expression such as `NOT v_requeued`) is followed by a comment naming
//!   the parameter it fills, `0 /* p_hinted */`, and that name is the callee's parameter at that
//!   position; any other argument may carry such a comment too, and then it is checked the same
//!   way.
//!
//! So a DBA reading `CALL orbit_task_grant(..., NULL /* p_results */, 0 /* p_hinted */, ...)`
//! sees what each flag sets, and a reordered parameter list cannot silently shift them. A `CALL`
//! of a procedure no template defines is reported too: it would fail when it first runs.

use std::collections::BTreeMap;

use super::super::{Kind, Object};
use super::lexer::{excerpt, lex, Tk, Token};
use super::procedural::find_top_punct;
use super::{Report, Rule};

/// Checks every `CALL` in every procedure against the parameter lists of `objects`' procedures.
pub(super) fn lint_calls(objects: &[Object], report: &mut Report) {
    let procedures: Vec<(&Object, Vec<Token>)> = objects
        .iter()
        .filter(|o| o.kind == Kind::Procedure)
        .map(|o| (o, lex(&o.sql)))
        .collect();
    let mut signatures = BTreeMap::new();
    for (o, tokens) in &procedures {
        if let Some((name, params)) = signature(&o.sql, tokens) {
            signatures.insert(name.to_ascii_lowercase(), params);
        }
    }
    for (o, tokens) in &procedures {
        let Some(create) = tokens.iter().position(|t| t.is("CREATE")) else {
            continue;
        };
        for i in create..tokens.len() {
            if !(tokens[i].is("CALL")
                && tokens.get(i + 1).is_some_and(|t| t.kind == Tk::Word)
                && tokens.get(i + 2).is_some_and(|t| t.is_punct("(")))
            {
                continue;
            }
            let callee = tokens[i + 1].text;
            let Some(args) = arguments(&o.sql, tokens, i + 2) else {
                continue;
            };
            let statement = excerpt(&tokens[i..args.close + 1]);
            let Some(params) = signatures.get(&callee.to_ascii_lowercase()) else {
                report.violation(
                    &o.name,
                    Rule::CallArguments,
                    format!("calls {callee}, which no template defines; statement: {statement}"),
                );
                continue;
            };
            if args.list.len() != params.len() {
                report.violation(
                    &o.name,
                    Rule::CallArguments,
                    format!(
                        "passes {} arguments to {callee}, which takes {}; statement: {statement}",
                        args.list.len(),
                        params.len()
                    ),
                );
                continue;
            }
            for (n, ((arg, named), param)) in args.list.iter().zip(params).enumerate() {
                let text = excerpt(arg);
                match named {
                    Some(named) if named != param => report.violation(
                        &o.name,
                        Rule::CallArguments,
                        format!(
                            "argument {} of {callee}, `{text}`, is named {named} but fills {param}; statement: {statement}",
                            n + 1
                        ),
                    ),
                    None if !self_describing(arg) => report.violation(
                        &o.name,
                        Rule::CallArguments,
                        format!(
                            "argument {} of {callee}, `{text}`, fills {param}: name it, `{text} /* {param} */`; statement: {statement}",
                            n + 1
                        ),
                    ),
                    _ => {}
                }
            }
        }
    }
}

/// The name and parameter names of the `CREATE PROCEDURE` in `sql`.
fn signature(sql: &str, tokens: &[Token]) -> Option<(String, Vec<String>)> {
    let create = tokens
        .windows(2)
        .position(|w| w[0].is("CREATE") && w[1].is("PROCEDURE"))?;
    let name = tokens.get(create + 2)?.text.to_string();
    let args = arguments(sql, tokens, create + 3)?;
    let params = args
        .list
        .iter()
        .filter_map(|(param, _)| {
            let mode = param.first()?.is_any(&["IN", "OUT", "INOUT"]);
            param.get(usize::from(mode)).map(|t| t.text.to_string())
        })
        .collect();
    Some((name, params))
}

/// A parenthesised list: each item's tokens with the name in a `/* name */` comment after it.
struct Arguments<'t, 'a> {
    list: Vec<(&'t [Token<'a>], Option<String>)>,
    /// The index of the closing parenthesis.
    close: usize,
}

/// The comma-separated items between the `(` at `open` and its `)`; None when unbalanced.
fn arguments<'t, 'a>(sql: &str, tokens: &'t [Token<'a>], open: usize) -> Option<Arguments<'t, 'a>> {
    if !tokens.get(open)?.is_punct("(") {
        return None;
    }
    let close = find_top_punct(tokens, open + 1, ")")?;
    let mut list = Vec::new();
    let mut start = open + 1;
    while start < close {
        let end = find_top_punct(&tokens[..close], start, ",").unwrap_or(close);
        list.push((&tokens[start..end], gap_comment(sql, tokens, end)));
        start = end + 1;
    }
    Some(Arguments { list, close })
}

/// The text of a `/* ... */` comment between token `at` and the token before it, trimmed (the
/// lexer drops comments: the gap between two tokens' byte ranges holds them).
fn gap_comment(sql: &str, tokens: &[Token], at: usize) -> Option<String> {
    let gap = sql.get(tokens[at - 1].end..tokens[at].start)?;
    let open = gap.find("/*")?;
    let close = gap[open..].find("*/")? + open;
    Some(gap[open + 2..close].trim().to_string())
}

/// A single variable or parameter name, or a string literal: needs no comment (the name says
/// what it carries; a string such as `'tasks:read'` or `'cancelled'` names its own value).
fn self_describing(arg: &[Token]) -> bool {
    arg.len() == 1
        && (arg[0].kind == Tk::Str
            || (arg[0].kind == Tk::Word && !arg[0].is_any(&["NULL", "TRUE", "FALSE"])))
}
