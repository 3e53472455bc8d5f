//! JSON text the way Go's `encoding/json` writes a decoded document, so that
//! the strings we serve (property values, manifest objects, synthesized CSVs)
//! match upstream's byte for byte where clients may compare them.
//!
//! Upstream decodes catalog documents into `map[string]interface{}` and
//! encodes them again, which gives: object keys sorted bytewise, no
//! whitespace, every number a float64 printed in its shortest form, and Go's
//! string escapes. Property values are written without HTML escaping
//! (`SetEscapeHTML(false)`); manifests and CSVs go through `json.Marshal`,
//! which escapes `<`, `>` and `&`.

use serde_json::{Map, Number, Value};

/// Whether `<`, `>` and `&` are written as `\u003c`, `\u003e` and `\u0026`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HtmlEscape {
    /// `json.Marshal`: escape them.
    On,
    /// An encoder with `SetEscapeHTML(false)`: write them as they are.
    Off,
}

/// Writes `value` compactly with sorted keys.
pub(crate) fn write_value(out: &mut String, value: &Value, html: HtmlEscape) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s, html),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, html);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map, html),
    }
}

/// The canonical text of `value` (see [`write_value`]).
pub(crate) fn to_string(value: &Value, html: HtmlEscape) -> String {
    let mut out = String::new();
    write_value(&mut out, value, html);
    out
}

fn write_object(out: &mut String, map: &Map<String, Value>, html: HtmlEscape) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, key, html);
        out.push(':');
        write_value(out, value, html);
    }
    out.push('}');
}

/// Largest integer a float64 holds exactly; beyond it Go's value is rounded.
const EXACT_FLOAT_INTEGER: u64 = 1 << 53;

/// Writes a number as Go prints the float64 it decodes to.
pub(crate) fn write_number(out: &mut String, n: &Number) {
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT_FLOAT_INTEGER) {
        out.push_str(&u.to_string());
        return;
    }
    if let Some(i) = n
        .as_i64()
        .filter(|i| i.unsigned_abs() <= EXACT_FLOAT_INTEGER)
    {
        out.push_str(&i.to_string());
        return;
    }
    match n.as_f64() {
        Some(f) => write_float(out, f),
        None => out.push_str(&n.to_string()),
    }
}

/// Go's `encoding/json` float format: shortest round-trip digits, plain
/// notation for magnitudes in [1e-6, 1e21), exponent notation (`1e-07` is
/// written `1e-7`, `1e21` is written `1e+21`) outside it.
fn write_float(out: &mut String, f: f64) {
    if !f.is_finite() {
        // Go refuses to encode these; JSON has no spelling for them.
        out.push_str("null");
        return;
    }
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        out.push_str(&format!("{f}"));
        return;
    }
    let text = format!("{f:e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) if !exponent.starts_with('-') => {
            out.push_str(mantissa);
            out.push_str("e+");
            out.push_str(exponent);
        }
        _ => out.push_str(&text),
    }
}

/// Writes a JSON string with Go's escapes.
pub(crate) fn write_string(out: &mut String, s: &str, html: HtmlEscape) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let escape: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '<' if html == HtmlEscape::On => Some("\\u003c"),
            '>' if html == HtmlEscape::On => Some("\\u003e"),
            '&' if html == HtmlEscape::On => Some("\\u0026"),
            '\u{2028}' => Some("\\u2028"),
            '\u{2029}' => Some("\\u2029"),
            c if (c as u32) < 0x20 => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match escape {
            Some(e) => out.push_str(e),
            None => {
                let b = c as u32 as u8;
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            }
        }
        start = i + c.len_utf8();
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn canon(v: &Value) -> String {
        to_string(v, HtmlEscape::Off)
    }

    #[test]
    fn keys_are_sorted_and_output_is_compact() {
        let v: Value = serde_json::from_str(r#"{ "version": "1.0.0", "packageName": "etcd" }"#)
            .expect("valid json");
        assert_eq!(canon(&v), r#"{"packageName":"etcd","version":"1.0.0"}"#);
    }

    #[test]
    fn numbers_print_as_go_float64() {
        let v = json!([
            1,
            -2,
            1.5,
            1.0,
            1e21,
            1.5e-7,
            0.000001,
            12345678901234567890u64
        ]);
        assert_eq!(
            canon(&v),
            "[1,-2,1.5,1,1e+21,1.5e-7,0.000001,12345678901234567000]"
        );
    }

    #[test]
    fn strings_use_go_escapes() {
        let v = json!("a\"b\\c\n\u{1}<x>&\u{2028}é");
        assert_eq!(canon(&v), "\"a\\\"b\\\\c\\n\\u0001<x>&\\u2028é\"");
        assert_eq!(
            to_string(&v, HtmlEscape::On),
            "\"a\\\"b\\\\c\\n\\u0001\\u003cx\\u003e\\u0026\\u2028é\""
        );
    }
}
