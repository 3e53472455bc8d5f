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
    out.reserve(s.len() + 2);
    out.push('"');
    write_json_string_contents(out, s, escape_html);
    out.push('"');
}

/// [`write_json_string`] without the quotes around it.
pub fn write_json_string_contents(out: &mut String, s: &str, escape_html: bool) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Runs of characters written as they are are copied whole; only the
    // bytes below decide, as every character escaped is ASCII or starts
    // with 0xE2 (U+2028, U+2029).
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut at = 0;
    while at < bytes.len() {
        at += plain_len(&bytes[at..], escape_html);
        let Some(&b) = bytes.get(at) else { break };
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
}

/// How many bytes at the start of `bytes` [`write_json_string`] writes as
/// they are without looking twice: up to the first `"`, `\\`, control
/// character, 0xE2 (the first byte of U+2028 and U+2029, and of other
/// characters, written as they are) or, when `escape_html` is set, `<`, `>`
/// or `&`. Looks at eight bytes at a time.
pub fn plain_len(bytes: &[u8], escape_html: bool) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // The high bit of each byte of `v` that is below `n` (n <= 0x80); a
    // flag can also be set above a byte that is, never below the first.
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v & HIGHS;
    let equal = |v: u64, b: u8| below(v ^ (ONES * u64::from(b)), 1);
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        // Little-endian, so that the lowest flag is the first byte's.
        let v = u64::from_le_bytes(word);
        let mut hits = below(v, 0x20) | equal(v, b'"') | equal(v, b'\\') | equal(v, 0xe2);
        if escape_html {
            hits |= equal(v, b'<') | equal(v, b'>') | equal(v, b'&');
        }
        if hits != 0 {
            return at + hits.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    let rest = &bytes[at..];
    at + rest
        .iter()
        .position(|&b| stops_plain(b, escape_html))
        .unwrap_or(rest.len())
}

/// Whether [`plain_len`] stops at byte `b`.
fn stops_plain(b: u8, escape_html: bool) -> bool {
    b < 0x20 || matches!(b, b'"' | b'\\' | 0xe2) || (escape_html && matches!(b, b'<' | b'>' | b'&'))
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

    #[test]
    fn plain_runs_stop_at_each_byte_that_may_be_escaped() {
        // Each stopping byte at each place in and after a word of eight.
        for stop in [0x00, 0x1f, b'"', b'\\', 0xe2, b'<', b'>', b'&'] {
            for at in 0..20 {
                let mut bytes = vec![b'a'; 20];
                bytes[at] = stop;
                let html = matches!(stop, b'<' | b'>' | b'&');
                assert_eq!(plain_len(&bytes, true), at, "{stop:#x} at {at}");
                assert_eq!(plain_len(&bytes, false), if html { 20 } else { at });
            }
        }
        // Bytes near the stopping ones do not stop it.
        let near = [
            0x20, b'!', b'#', b'[', b']', 0xe1, 0xe3, 0x7f, 0x80, 0xff, b'=', b'?', b'%', b'\'',
        ];
        assert_eq!(plain_len(&near, true), near.len());
    }

    proptest::proptest! {
        #[test]
        fn plain_runs_are_read_a_word_at_a_time_as_a_byte_at_a_time(
            // Mostly printable ASCII, so that runs are long.
            bytes in proptest::collection::vec(
                proptest::prop_oneof![8 => 0x20u8..0x7f, 1 => proptest::prelude::any::<u8>()],
                0..64,
            ),
            escape_html: bool,
        ) {
            let one_by_one = bytes
                .iter()
                .position(|&b| stops_plain(b, escape_html))
                .unwrap_or(bytes.len());
            proptest::prop_assert_eq!(plain_len(&bytes, escape_html), one_by_one);
        }
    }
}
