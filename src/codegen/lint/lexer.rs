//! The lexer: MySQL tokens with their byte ranges, and one-line excerpts of token runs.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tk {
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
pub(super) struct Token<'a> {
    pub(super) kind: Tk,
    pub(super) text: &'a str,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Token<'_> {
    pub(super) fn is(&self, keyword: &str) -> bool {
        self.kind == Tk::Word && self.text.eq_ignore_ascii_case(keyword)
    }
    pub(super) fn is_any(&self, keywords: &[&str]) -> bool {
        keywords.iter().any(|k| self.is(k))
    }
    pub(super) fn is_punct(&self, p: &str) -> bool {
        self.kind == Tk::Punct && self.text == p
    }
}

/// A small MySQL lexer: enough to find statement boundaries and keywords without being fooled
/// by quotes (`'..'`, `".."`, `` `..` ``, with doubling and backslash escapes) or comments
/// (`-- `, `#`, `/* */`), which it drops.
pub(super) fn lex(src: &str) -> Vec<Token<'_>> {
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

/// A token run as one line: tokens joined by one space where the source had any gap, so
/// comments and line breaks disappear.
pub(super) fn joined(t: &[Token]) -> String {
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
pub(super) fn excerpt(t: &[Token]) -> String {
    cut(joined(t))
}

pub(super) fn excerpt_text(s: &str) -> String {
    cut(s.split_whitespace().collect::<Vec<_>>().join(" "))
}

pub(super) fn cut(s: String) -> String {
    const MAX: usize = 160;
    if s.chars().count() <= MAX {
        s
    } else {
        s.chars().take(MAX - 3).collect::<String>() + "..."
    }
}

#[cfg(test)]
mod tests {
    use super::super::statements::split_statements;
    use super::*;

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
}
