//! Go's text conventions that OLM's messages carry, for messages that must
//! read as upstream's word for word; Go's `encoding/json` string escapes
//! ([`write_json_string`]), which hashes and served bytes depend on; and the
//! one rule of Go's
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

/// Writes `s` as a JSON string the way Go does: `"` and `\` escaped,
/// `\b`, `\f`, `\n`, `\r`, `\t` for those control characters and `\u00XX`
/// for the others, U+2028 and U+2029 always escaped (they end lines in
/// JavaScript), `<`, `>` and `&` escaped only when `escape_html` is set, and
/// everything else (DEL and all non-ASCII included) as UTF-8. Go also writes
/// invalid UTF-8 as `\ufffd`; a Rust string holds none.
pub fn write_json_string(out: &mut String, s: &str, escape_html: bool) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push('"');
    // Runs of characters written as they are are copied whole; only the
    // bytes below decide, as every character escaped is ASCII or starts
    // with 0xE2 (U+2028, U+2029).
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        if !MAY_ESCAPE[usize::from(b)] {
            at += 1;
            continue;
        }
        let escape: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            b'<' | b'>' | b'&' if escape_html => None,
            0xe2 if bytes.get(at + 1) == Some(&0x80)
                && matches!(bytes.get(at + 2), Some(0xa8 | 0xa9)) =>
            {
                Some(if bytes[at + 2] == 0xa8 {
                    "\\u2028"
                } else {
                    "\\u2029"
                })
            }
            b if b < 0x20 => None,
            _ => {
                at += 1;
                continue;
            }
        };
        out.push_str(&s[start..at]);
        match escape {
            Some(text) => {
                out.push_str(text);
                at += if b == 0xe2 { 3 } else { 1 };
            }
            None => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
                at += 1;
            }
        }
        start = at;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// The bytes [`write_json_string`] looks at twice: those it may escape, and the
/// first byte of U+2028 and U+2029.
const MAY_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table[b'<' as usize] = true;
    table[b'>' as usize] = true;
    table[b'&' as usize] = true;
    table[0xe2] = true;
    table
};

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
