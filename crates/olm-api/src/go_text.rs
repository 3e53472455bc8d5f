//! Go's text conventions that OLM's messages carry, for messages that must
//! read as upstream's word for word.

/// Go's `strconv.Quote`: `"` and `\\` escaped, the named control escapes,
/// other control characters as `\x`/`\u`, and (as far as Rust can tell
/// Go's `unicode.IsPrint`) non-printing characters beyond ASCII as `\u`.
pub fn quote(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                let code = u32::from(c);
                if code > 0xffff {
                    let _ = write!(out, "\\U{code:08x}");
                } else {
                    let _ = write!(out, "\\u{code:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_follows_go() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(
            quote("\u{7}\u{8}\u{c}\n\r\t\u{b}\u{1}\u{7f}"),
            r#""\a\b\f\n\r\t\v\x01\x7f""#
        );
        assert_eq!(quote("é\u{85}\u{a0}\u{2028}"), r#""é\u0085\u00a0\u2028""#);
    }
}
