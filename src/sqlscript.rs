//! Splits a SQL script into statements the way the `mariadb`/`mysql` command-line client does:
//! `DELIMITER` lines switch the terminator, and quotes and comments are respected, so the same
//! migration file runs through `orbit migrate` and through the plain client.

/// One statement of a script, with the line it starts on (1-based) for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub line: usize,
    pub sql: String,
}

/// Splits `script` into statements. Comments are kept inside statements (the server ignores them);
/// statements that are only comments or blank are dropped.
pub fn split(script: &str) -> Vec<Statement> {
    let mut out = Vec::new();
    let mut delimiter = ";".to_string();
    let mut current = String::new();
    let mut start_line = 1;
    let mut line_no = 0;
    // Lexer state that survives line ends: inside a quote or a block comment.
    let mut quote: Option<char> = None;
    let mut block_comment = false;

    for line in script.split_inclusive('\n') {
        line_no += 1;
        let at_statement_start = quote.is_none() && !block_comment && current.trim().is_empty();
        if at_statement_start {
            let trimmed = line.trim();
            if let Some(rest) = trimmed
                .strip_prefix("DELIMITER ")
                .or_else(|| trimmed.strip_prefix("delimiter "))
            {
                delimiter = rest.trim().to_string();
                current.clear();
                continue;
            }
            if current.is_empty() {
                start_line = line_no;
            }
        }
        let chars: Vec<char> = line.chars().collect();
        let delim: Vec<char> = delimiter.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if block_comment {
                current.push(c);
                if c == '*' && chars.get(i + 1) == Some(&'/') {
                    current.push('/');
                    i += 1;
                    block_comment = false;
                }
            } else if let Some(q) = quote {
                current.push(c);
                if c == '\\' && q != '`' {
                    if let Some(&n) = chars.get(i + 1) {
                        current.push(n);
                        i += 1;
                    }
                } else if c == q {
                    if chars.get(i + 1) == Some(&q) {
                        current.push(q);
                        i += 1;
                    } else {
                        quote = None;
                    }
                }
            } else if c == '\'' || c == '"' || c == '`' {
                quote = Some(c);
                current.push(c);
            } else if c == '#'
                || (c == '-'
                    && chars.get(i + 1) == Some(&'-')
                    && chars.get(i + 2).is_none_or(|n| n.is_whitespace()))
            {
                // A line comment: keep the rest of the line verbatim.
                current.extend(&chars[i..]);
                break;
            } else if c == '/' && chars.get(i + 1) == Some(&'*') {
                block_comment = true;
                current.push_str("/*");
                i += 1;
            } else if chars[i..].starts_with(&delim) {
                push_statement(&mut out, &current, start_line);
                current.clear();
                i += delim.len();
                // What follows on the same line starts the next statement.
                start_line = line_no;
                continue;
            } else {
                current.push(c);
            }
            i += 1;
        }
    }
    push_statement(&mut out, &current, start_line);
    out
}

fn push_statement(out: &mut Vec<Statement>, text: &str, line: usize) {
    let has_code = text.lines().any(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with("--") && !t.starts_with('#')
    });
    if has_code {
        // Report the line of the first code line, not of leading comments.
        let skipped = text
            .lines()
            .take_while(|l| {
                let t = l.trim();
                t.is_empty() || t.starts_with("--") || t.starts_with('#')
            })
            .count();
        out.push(Statement {
            line: line + skipped,
            sql: text.trim().to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_semicolons_and_respects_quotes_and_comments() {
        let s = split("SELECT 'a;b';\n-- c; d\nSELECT \"x;\" ; /* y; */ SELECT 3;\n");
        let sql: Vec<_> = s.iter().map(|s| s.sql.as_str()).collect();
        assert_eq!(
            sql,
            [
                "SELECT 'a;b'",
                "-- c; d\nSELECT \"x;\"",
                "/* y; */ SELECT 3"
            ]
        );
        assert_eq!(s[1].line, 3);
    }

    #[test]
    fn delimiter_lines_switch_the_terminator() {
        let script = "DROP PROCEDURE IF EXISTS p;\nDELIMITER $$\nCREATE PROCEDURE p()\nBEGIN\n  SELECT 1;\n  SELECT 2;\nEND$$\nDELIMITER ;\nSELECT 4;\n";
        let s = split(script);
        assert_eq!(s.len(), 3);
        assert_eq!(
            s[1].sql,
            "CREATE PROCEDURE p()\nBEGIN\n  SELECT 1;\n  SELECT 2;\nEND"
        );
        assert_eq!(s[1].line, 3);
        assert_eq!(s[2].sql, "SELECT 4");
    }

    #[test]
    fn escaped_and_doubled_quotes_do_not_end_a_string() {
        let s = split("SELECT 'it''s; \\' fine;';SELECT 2;");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].sql, "SELECT 'it''s; \\' fine;'");
    }

    #[test]
    fn comment_only_tail_is_dropped() {
        assert_eq!(split("SELECT 1;\n-- the end\n").len(), 1);
    }
}
