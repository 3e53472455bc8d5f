//! JSON text exactly as Go's `encoding/json` writes a `map[string]interface{}`:
//! keys sorted, compact, Go's string escapes and number formatting.
//!
//! `opm render` builds `olm.bundle.object` values and dependency property
//! values by decoding manifests into Go maps and encoding them again, so to
//! produce the same bytes (and the same property order, which upstream sorts
//! by value text) this crate must encode the same way.

use serde_json::{Number, Value};

/// Writes `value` as Go does: object keys in byte order, no whitespace,
/// `<`, `>` and `&` escaped when `escape_html` is set (Go's `json.Marshal`
/// does; an encoder with `SetEscapeHTML(false)` does not), U+2028 and U+2029
/// always escaped.
pub fn to_string(value: &Value, escape_html: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, value, escape_html);
    out
}

fn write_value(out: &mut String, value: &Value, escape_html: bool) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s, escape_html),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, escape_html);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key, escape_html);
                out.push(':');
                write_value(out, value, escape_html);
            }
            out.push('}');
        }
    }
}

/// Go's float64 formatting: the shortest representation, in `%f` style for
/// magnitudes in [1e-6, 1e21) and `%e` style (`1e+21`, `1e-7`) otherwise.
fn write_number(out: &mut String, n: &Number) {
    if let Some(i) = n.as_i64() {
        out.push_str(&i.to_string());
        return;
    }
    if let Some(u) = n.as_u64() {
        out.push_str(&u.to_string());
        return;
    }
    let f = n.as_f64().unwrap_or(0.0);
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        out.push_str(&format!("{f}"));
        return;
    }
    let e = format!("{f:e}");
    let (mantissa, exponent) = e.split_once('e').unwrap_or((&e, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    out.push_str(mantissa);
    out.push('e');
    if exponent < 0 {
        out.push('-');
        out.push_str(&(-exponent).to_string());
    } else {
        out.push('+');
        if exponent < 10 {
            out.push('0');
        }
        out.push_str(&exponent.to_string());
    }
}

fn write_string(out: &mut String, s: &str, escape_html: bool) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' if escape_html => {
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 0xf] as char);
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => {
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 0xf] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_sorted_and_output_compact() {
        let value = json!({"b": 1, "a": {"d": [true, null], "c": "x"}, "B": 2});
        assert_eq!(
            to_string(&value, true),
            r#"{"B":2,"a":{"c":"x","d":[true,null]},"b":1}"#
        );
    }

    #[test]
    fn strings_escape_like_go() {
        let value = json!("<a href=\"x\">&</a>\n\t\u{1}\u{8}\u{2028}é");
        assert_eq!(
            to_string(&value, true),
            r#""\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e\n\t\u0001\b\u2028é""#
        );
        assert_eq!(to_string(&json!("<&>"), false), r#""<&>""#);
    }

    #[test]
    fn numbers_format_like_go() {
        for (value, expected) in [
            (json!(1), "1"),
            (json!(-7), "-7"),
            (json!(1.0), "1"),
            (json!(0.5), "0.5"),
            (json!(1e21), "1e+21"),
            (json!(1e-7), "1e-7"),
            (json!(1.5e300), "1.5e+300"),
            (json!(123456789.125), "123456789.125"),
            (json!(u64::MAX), "18446744073709551615"),
        ] {
            assert_eq!(to_string(&value, true), expected, "{value}");
        }
    }
}
