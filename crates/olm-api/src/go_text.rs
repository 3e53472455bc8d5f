//! Go's text conventions that OLM's messages carry, for messages that must
//! read as upstream's word for word, and the one rule of Go's
//! `encoding/json` that changes what a manifest means: object keys match
//! struct fields without regard to case ([`match_field`]).

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

/// The field of `fields` a JSON object key fills when Go's `encoding/json`
/// decodes it: the field spelled exactly so, else the first one equal under
/// Unicode simple case folding (`bytes.EqualFold`: `apigroups` fills
/// `apiGroups`, and so do `APIGROUPS` and `apiGroupſ`). Upstream OLM decodes
/// bundle manifests this way, so a key serde would drop still counts there.
pub fn match_field<'a>(key: &str, fields: &[&'a str]) -> Option<&'a str> {
    if let Some(exact) = fields.iter().find(|f| **f == key) {
        return Some(exact);
    }
    let fold = |c: char| -> char {
        match c {
            // The two characters outside ASCII whose fold orbit reaches it.
            '\u{17f}' => 's',
            '\u{212a}' => 'k',
            c => c.to_lowercase().next().unwrap_or(c),
        }
    };
    fields.iter().copied().find(|field| {
        field.chars().count() == key.chars().count()
            && field
                .chars()
                .zip(key.chars())
                .all(|(a, b)| fold(a) == fold(b))
    })
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

    #[test]
    fn keys_match_fields_as_go_decodes_them() {
        let fields = ["verbs", "apiGroups", "nonResourceURLs"];
        let cases = [
            ("apiGroups", Some("apiGroups")),
            ("apigroups", Some("apiGroups")),
            ("APIGROUPS", Some("apiGroups")),
            ("apiGroup\u{17f}", Some("apiGroups")),
            ("nonresourceurls", Some("nonResourceURLs")),
            ("apiGroup", None),
            ("api_groups", None),
            ("", None),
            ("verbsé", None),
        ];
        for (key, want) in cases {
            assert_eq!(match_field(key, &fields), want, "{key}");
        }
        // An exact spelling wins over a folded one.
        assert_eq!(match_field("ab", &["AB", "ab"]), Some("ab"));
        assert_eq!(match_field("Ab", &["AB", "ab"]), Some("AB"));
    }
}
