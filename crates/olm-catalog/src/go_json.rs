//! JSON text exactly as Go's `encoding/json` writes it: object keys sorted,
//! compact, Go's string escapes and number formatting.
//!
//! Two places need it. `opm render` builds `olm.bundle.object` values and
//! dependency property values by decoding manifests into Go maps and
//! encoding them again ([`to_string`]), so to produce the same bytes (and the
//! same property order, which upstream sorts by value text) this crate must
//! encode the same way. And upstream's catalog loader decodes every document
//! into a `map[string]interface{}` and encodes it again before anything else
//! reads it ([`reencode`], [`reencode_base64`]), so what `opm render` writes
//! for a catalog is that re-encoding, not the text of the file.
//!
//! The registry (`olm-registry`) writes what it serves with the same
//! functions. The one choice callers make is how numbers were decoded
//! ([`Numbers`]): into Go's `interface{}`, where every number is a float64
//! and an integer beyond 2^53 comes back rounded, or into typed fields,
//! where an integer is written as itself.

use serde_json::{Number, Value};

/// Writes `value` as Go does: object keys in byte order, no whitespace,
/// `<`, `>` and `&` escaped when `escape_html` is set (Go's `json.Marshal`
/// does; an encoder with `SetEscapeHTML(false)` does not), U+2028 and U+2029
/// always escaped.
pub fn to_string(value: &Value, escape_html: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, value, escape_html, Numbers::Exact);
    out
}

/// As [`to_string`], for a value Go decoded into `interface{}`: every
/// number a float64 ([`Numbers::Float64`]).
pub fn to_string_decoded(value: &Value, escape_html: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, value, escape_html, Numbers::Float64);
    out
}

/// How the numbers being written were decoded on Go's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbers {
    /// Into typed integer fields (or `json.Number`): an integer is written as
    /// itself; other numbers as float64s.
    Exact,
    /// Into `interface{}`: every number is a float64, so an integer beyond
    /// 2^53 is written as the float64 nearest it (`12345678901234567890`
    /// becomes `12345678901234567000`).
    Float64,
}

/// Appends `value` as Go writes it: keys in byte order, compact, with
/// [`write_string`]'s escapes and numbers as `numbers` says.
pub fn write_value(out: &mut String, value: &Value, escape_html: bool, numbers: Numbers) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n, numbers),
        Value::String(s) => write_string(out, s, escape_html),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, escape_html, numbers);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key, escape_html);
                out.push(':');
                write_value(out, value, escape_html, numbers);
            }
            out.push('}');
        }
    }
}

/// Largest integer a float64 holds exactly.
const EXACT_FLOAT_INTEGER: u64 = 1 << 53;

/// A number as [`Numbers`] says Go writes it.
fn write_number(out: &mut String, n: &Number, numbers: Numbers) {
    let exact = |magnitude: u64| numbers == Numbers::Exact || magnitude <= EXACT_FLOAT_INTEGER;
    if let Some(i) = n.as_i64().filter(|i| exact(i.unsigned_abs())) {
        out.push_str(&i.to_string());
        return;
    }
    if let Some(u) = n.as_u64().filter(|u| exact(*u)) {
        out.push_str(&u.to_string());
        return;
    }
    write_float(out, n.as_f64().unwrap_or(0.0));
}

/// Go's float64 formatting: the shortest digits that read back as the same
/// value (the closest such digits, ties to even, as Ryū finds them, which
/// Go's `strconv` and serde_json both use), in `%f` style for magnitudes in
/// [1e-6, 1e21) (and zero, `-0` included) and `%e` style (`1e+21`, `1e-7`)
/// otherwise. Go refuses to encode infinities and NaN; they are written as
/// `null` here.
pub fn write_float(out: &mut String, f: f64) {
    if !f.is_finite() {
        out.push_str("null");
        return;
    }
    if f == 0.0 {
        out.push_str(if f.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    // serde_json writes Ryū's shortest digits, as `1.5e300`, `1e-7` or
    // `123.25`; take the digits and the exponent from that.
    let ryu = serde_json::Number::from_f64(f).map_or_else(String::new, |n| n.to_string());
    let (sign, unsigned) = match ryu.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", ryu.as_str()),
    };
    let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = format!("{int_part}{frac_part}");
    // value = 0.DIGITS * 10^point
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    let point = int_part.len() as i32 - leading as i32 + exponent;
    out.push_str(sign);
    let abs = f.abs();
    if (1e-6..1e21).contains(&abs) {
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(digits);
        } else if point as usize >= digits.len() {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
        } else {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        }
        return;
    }
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    let exponent = point - 1;
    out.push('e');
    out.push(if exponent < 0 { '-' } else { '+' });
    // Go writes at least two exponent digits, then trims `e-07` to `e-7`
    // (a positive exponent here is at least 21).
    out.push_str(&exponent.unsigned_abs().to_string());
}

/// Writes `s` as a JSON string the way Go does (one home for it:
/// [`olm_api::go_text::write_json_string`]).
pub use olm_api::go_text::write_json_string as write_string;
use olm_api::go_text::write_json_string_contents as write_contents;

/// Why a JSON text could not be re-encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReencodeError {
    /// The text is not JSON.
    #[error("invalid json at byte {offset}")]
    Syntax {
        /// Where the text stops being JSON.
        offset: usize,
    },
    /// A number is too large for a `float64`, which Go refuses to decode.
    #[error("cannot unmarshal number {number} into Go value of type float64")]
    NumberOutOfRange {
        /// The number as written.
        number: String,
    },
    /// Arrays and objects are nested deeper than allowed.
    #[error("nesting is deeper than the limit of {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
}

/// The JSON text `json` as Go's `encoding/json` writes it after decoding it
/// into an `interface{}`, which is what upstream's catalog loader does to
/// every document: whitespace dropped; object keys sorted by bytes, the last
/// of repeated keys kept; every number a `float64` (`1.0` is `1`, `1e3` is
/// `1000`, integers beyond 2^53 rounded, out-of-range numbers refused);
/// every string decoded (`\u00e9` and `\/` become `é` and `/`, an unpaired
/// surrogate escape becomes U+FFFD) and written again by [`write_string`].
/// `max_depth` bounds the nesting of arrays and objects.
///
/// The output is written as the text is read, without building the value:
/// arrays and scalars go straight out, and an object's entries as they come,
/// put in order when it closes. So however wide the document, the memory
/// taken is about the size of the output, plus for a moment a copy of an
/// object whose keys came out of order, and a word for each entry of the
/// objects still open.
pub fn reencode(json: &str, escape_html: bool, max_depth: usize) -> Result<String, ReencodeError> {
    let mut parser = Parser {
        json,
        text: json.as_bytes(),
        at: 0,
        max_depth,
        escape_html,
        out: String::with_capacity(json.len()),
        entries: Vec::new(),
    };
    parser.value(0)?;
    parser.skip_space();
    if parser.at != parser.text.len() {
        return Err(ReencodeError::Syntax { offset: parser.at });
    }
    Ok(parser.out)
}

/// Reads JSON text and writes it to `out` as Go re-encodes it.
struct Parser<'a> {
    json: &'a str,
    /// `json` as bytes.
    text: &'a [u8],
    at: usize,
    max_depth: usize,
    escape_html: bool,
    out: String,
    /// Where in `out` each entry (`"key":value`) of the objects still open
    /// starts, innermost object last.
    entries: Vec<usize>,
}

impl Parser<'_> {
    fn syntax(&self) -> ReencodeError {
        ReencodeError::Syntax { offset: self.at }
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &str) -> Result<(), ReencodeError> {
        if self.text[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            self.out.push_str(word);
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), ReencodeError> {
        self.skip_space();
        match self.text.get(self.at) {
            Some(b'n') => self.literal("null"),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'"') => self.string(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'[') => {
                let depth = self.enter(depth)?;
                self.out.push('[');
                self.skip_space();
                if self.text.get(self.at) == Some(&b']') {
                    self.at += 1;
                    self.out.push(']');
                    return Ok(());
                }
                loop {
                    self.value(depth)?;
                    self.skip_space();
                    match self.text.get(self.at) {
                        Some(b',') => {
                            self.at += 1;
                            self.out.push(',');
                        }
                        Some(b']') => {
                            self.at += 1;
                            self.out.push(']');
                            return Ok(());
                        }
                        _ => return Err(self.syntax()),
                    }
                }
            }
            Some(b'{') => {
                let depth = self.enter(depth)?;
                self.out.push('{');
                let body = self.out.len();
                let first = self.entries.len();
                self.skip_space();
                if self.text.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    self.out.push('}');
                    return Ok(());
                }
                loop {
                    self.skip_space();
                    if self.text.get(self.at) != Some(&b'"') {
                        return Err(self.syntax());
                    }
                    if self.entries.len() > first {
                        self.out.push(',');
                    }
                    self.entries.push(self.out.len());
                    self.string()?;
                    self.skip_space();
                    if self.text.get(self.at) != Some(&b':') {
                        return Err(self.syntax());
                    }
                    self.at += 1;
                    self.out.push(':');
                    self.value(depth)?;
                    self.skip_space();
                    match self.text.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            self.close_object(body, first);
                            self.out.push('}');
                            return Ok(());
                        }
                        _ => return Err(self.syntax()),
                    }
                }
            }
            _ => Err(self.syntax()),
        }
    }

    /// Puts the entries of the object whose body starts at `out[body..]`,
    /// `entries[first..]`, in Go's order: sorted by the bytes of the decoded
    /// key, the last of repeated keys kept (Go stores each key in its map as
    /// it comes). Entries already in order, as in most documents, stay where
    /// they are; otherwise the body is moved out and written again, which
    /// takes a copy of it for a moment.
    fn close_object(&mut self, body: usize, first: usize) {
        let starts = &mut self.entries[first..];
        let in_order = starts
            .windows(2)
            .all(|pair| key_bytes(&self.out[pair[0]..]).lt(key_bytes(&self.out[pair[1]..])));
        if !in_order {
            let mut text = self.out.split_off(body);
            for start in starts.iter_mut() {
                *start -= body;
                // The comma before each entry but the first becomes a NUL,
                // which the output has nowhere else (write_string escapes
                // it), so that it marks where the entry before ends.
                if *start > 0 {
                    text.replace_range(*start - 1..*start, "\0");
                }
            }
            // Ties (repeated keys) in the order they came.
            starts.sort_unstable_by(|a, b| {
                key_bytes(&text[*a..])
                    .cmp(key_bytes(&text[*b..]))
                    .then(a.cmp(b))
            });
            let mut written = false;
            for (i, &start) in starts.iter().enumerate() {
                let entry = &text[start..];
                let repeated = starts
                    .get(i + 1)
                    .is_some_and(|&next| key_bytes(entry).eq(key_bytes(&text[next..])));
                if repeated {
                    continue;
                }
                if written {
                    self.out.push(',');
                }
                let len = memchr::memchr(0, entry.as_bytes()).unwrap_or(entry.len());
                self.out.push_str(&entry[..len]);
                written = true;
            }
        }
        self.entries.truncate(first);
    }

    /// Steps into an array or object at `self.at`.
    fn enter(&mut self, depth: usize) -> Result<usize, ReencodeError> {
        if depth >= self.max_depth {
            return Err(ReencodeError::TooDeep {
                limit: self.max_depth,
            });
        }
        self.at += 1;
        Ok(depth + 1)
    }

    fn number(&mut self) -> Result<(), ReencodeError> {
        let start = self.at;
        let digits = |p: &mut Self| {
            let from = p.at;
            while let Some(b'0'..=b'9') = p.text.get(p.at) {
                p.at += 1;
            }
            p.at > from
        };
        if self.text.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        if self.text.get(self.at) == Some(&b'0') {
            self.at += 1;
        } else if !digits(self) {
            return Err(self.syntax());
        }
        let integer_end = self.at;
        if self.text.get(self.at) == Some(&b'.') {
            self.at += 1;
            if !digits(self) {
                return Err(self.syntax());
            }
        }
        if let Some(b'e' | b'E') = self.text.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.text.get(self.at) {
                self.at += 1;
            }
            if !digits(self) {
                return Err(self.syntax());
            }
        }
        let lexeme = &self.json[start..self.at];
        // An integer of at most 15 digits is below 2^53, so a float64 holds
        // it exactly and Go writes it back as it is (`-0` included).
        if self.at == integer_end && lexeme.trim_start_matches('-').len() <= 15 {
            self.out.push_str(lexeme);
            return Ok(());
        }
        // Rust's parse rounds correctly, as Go's strconv.ParseFloat does.
        match lexeme.parse::<f64>() {
            Ok(f) if f.is_finite() => {
                write_float(&mut self.out, f);
                Ok(())
            }
            _ => Err(ReencodeError::NumberOutOfRange {
                number: lexeme.to_owned(),
            }),
        }
    }

    /// The code unit of a `\uXXXX` escape at `at`, if there is one.
    fn hex4(&self, at: usize) -> Option<u32> {
        if self.text.get(at..at + 2) != Some(b"\\u") {
            return None;
        }
        let digits = self.text.get(at + 2..at + 6)?;
        digits
            .iter()
            .try_fold(0, |unit, &d| Some(unit << 4 | char::from(d).to_digit(16)?))
    }

    /// Decodes the string at `self.at` and writes it again, in one pass:
    /// runs Go writes as they are and the escapes Go writes the same way
    /// (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`) are copied; anything
    /// else is decoded and written as [`write_string`] writes it.
    fn string(&mut self) -> Result<(), ReencodeError> {
        self.at += 1;
        self.out.push('"');
        loop {
            let run = self.at;
            self.at += olm_api::go_text::plain_len(&self.text[run..], self.escape_html);
            // The run ends before an ASCII byte or 0xE2, which starts a
            // character: on a character boundary.
            self.out.push_str(&self.json[run..self.at]);
            match self.text.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    self.out.push('"');
                    return Ok(());
                }
                Some(b'\\') => self.escape()?,
                Some(0xe2) => {
                    // A whole character of three bytes, in a str.
                    let c = &self.json[self.at..self.at + 3];
                    self.at += 3;
                    write_contents(&mut self.out, c, self.escape_html);
                }
                Some(b'<' | b'>' | b'&') => {
                    let c = &self.json[self.at..=self.at];
                    self.at += 1;
                    write_contents(&mut self.out, c, self.escape_html);
                }
                // A control character, or the end of the text.
                _ => return Err(self.syntax()),
            }
        }
    }

    /// Reads the escape at `self.at` and writes it as Go writes what it
    /// stands for.
    fn escape(&mut self) -> Result<(), ReencodeError> {
        match self.text.get(self.at + 1) {
            Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => {
                self.out.push_str(&self.json[self.at..self.at + 2]);
                self.at += 2;
                return Ok(());
            }
            Some(b'/') => {
                self.out.push('/');
                self.at += 2;
                return Ok(());
            }
            Some(b'u') => {}
            _ => return Err(self.syntax()),
        }
        let unit = self.hex4(self.at).ok_or_else(|| self.syntax())?;
        self.at += 6;
        let c = if (0xd800..0xe000).contains(&unit) {
            // Go pairs a high surrogate with a following low one and
            // replaces anything else by U+FFFD, leaving what follows.
            match self.hex4(self.at) {
                Some(low) if unit < 0xdc00 && (0xdc00..0xe000).contains(&low) => {
                    self.at += 6;
                    char::from_u32(0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00))
                }
                _ => None,
            }
        } else {
            char::from_u32(unit)
        };
        let c = c.unwrap_or(char::REPLACEMENT_CHARACTER);
        write_contents(&mut self.out, c.encode_utf8(&mut [0; 4]), self.escape_html);
        Ok(())
    }
}

/// The bytes of the key of the object entry written (by [`write_string`])
/// at the start of `entry`, decoded: Go sorts keys as strings, not as the
/// text that encodes them (`"\""` comes before `"#"`, `"\\"` after it).
fn key_bytes(entry: &str) -> impl Iterator<Item = u8> + '_ {
    let entry = entry.as_bytes();
    // After the opening quote.
    let mut at = 1;
    let mut pending = [0u8; 4];
    let mut pending_range = 0..0;
    std::iter::from_fn(move || {
        if let Some(i) = pending_range.next() {
            return Some(pending[i]);
        }
        match *entry.get(at)? {
            b'"' => None,
            b'\\' => {
                let (c, len) = match entry.get(at + 1)? {
                    b'b' => ('\u{8}', 2),
                    b'f' => ('\u{c}', 2),
                    b'n' => ('\n', 2),
                    b'r' => ('\r', 2),
                    b't' => ('\t', 2),
                    b'u' => {
                        let hex = std::str::from_utf8(entry.get(at + 2..at + 6)?).ok()?;
                        (char::from_u32(u32::from_str_radix(hex, 16).ok()?)?, 6)
                    }
                    &other => (char::from(other), 2),
                };
                at += len;
                let bytes = c.encode_utf8(&mut pending).len();
                pending_range = 1..bytes;
                Some(pending[0])
            }
            b => {
                at += 1;
                Some(b)
            }
        }
    })
}

/// Why base64 text could not be decoded, as Go's `encoding/base64` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal base64 data at input byte {offset}")]
pub struct Base64Error {
    /// The byte offset Go reports.
    pub offset: usize,
}

/// Decodes `text` as Go's `encoding/json` decodes a JSON string into a
/// `[]byte`: `base64.StdEncoding.Decode`, which wants the standard alphabet
/// with `=` padding, skips `\r` and `\n` anywhere, and accepts non-zero
/// bits after the last encoded byte. Errors name the byte offset Go names.
pub fn decode_base64(text: &str) -> Result<Vec<u8>, Base64Error> {
    // Canonical input (no line breaks, zero trailing bits) decodes the same
    // in both; only what the fast decoder refuses needs Go's rules.
    {
        use base64::Engine as _;
        if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(text) {
            return Ok(bytes);
        }
    }
    let src = text.as_bytes();
    let sextet = |c: u8| -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some(u32::from(c - b'A')),
            b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    };
    let skip_newlines = |mut at: usize| {
        while let Some(b'\n' | b'\r') = src.get(at) {
            at += 1;
        }
        at
    };
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut at = 0;
    // One quantum of up to four characters at a time.
    loop {
        let mut quantum = [0u32; 4];
        let mut count = 0;
        let mut padded = false;
        while count < 4 {
            let Some(&c) = src.get(at) else {
                if count == 0 {
                    return Ok(out);
                }
                // Go counts back over the characters of this quantum only,
                // whatever newlines came between them.
                return Err(Base64Error { offset: at - count });
            };
            at += 1;
            if let Some(v) = sextet(c) {
                quantum[count] = v;
                count += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' || count < 2 {
                return Err(Base64Error { offset: at - 1 });
            }
            if count == 2 {
                // "==" is needed; the first is read.
                at = skip_newlines(at);
                match src.get(at) {
                    None => return Err(Base64Error { offset: src.len() }),
                    Some(b'=') => at += 1,
                    Some(_) => return Err(Base64Error { offset: at - 1 }),
                }
            }
            at = skip_newlines(at);
            if at < src.len() {
                return Err(Base64Error { offset: at });
            }
            padded = true;
            break;
        }
        let bits = quantum[0] << 18 | quantum[1] << 12 | quantum[2] << 6 | quantum[3];
        let bytes = [(bits >> 16) as u8, (bits >> 8) as u8, bits as u8];
        out.extend_from_slice(&bytes[..count - 1]);
        if padded {
            return Ok(out);
        }
    }
}

/// Base64 text as upstream's loader leaves it: decoded by
/// [`decode_base64`] and encoded again with the standard padded alphabet,
/// on one line.
pub fn reencode_base64(text: &str) -> Result<String, Base64Error> {
    use base64::Engine as _;
    Ok(base64::engine::general_purpose::STANDARD.encode(decode_base64(text)?))
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;
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
        // Decoded into interface{}, integers beyond 2^53 are float64s (Go
        // 1.26: json.Marshal of the decoded value).
        for (value, expected) in [
            (json!(9_007_199_254_740_992_u64), "9007199254740992"),
            (json!(9_007_199_254_740_993_u64), "9007199254740992"),
            (json!(-9_007_199_254_740_993_i64), "-9007199254740992"),
            (
                json!(12_345_678_901_234_567_890_u64),
                "12345678901234567000",
            ),
            (json!(u64::MAX), "18446744073709552000"),
            (json!([1, 1.5, 1e21]), "[1,1.5,1e+21]"),
        ] {
            assert_eq!(to_string_decoded(&value, true), expected, "{value}");
        }
        // The streaming re-encoder agrees.
        for text in [
            "12345678901234567890",
            "-9007199254740993",
            "9007199254740992",
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                reencode(text, true, 8).unwrap(),
                to_string_decoded(&value, true),
                "{text}"
            );
        }
    }

    /// float64 values and what Go's encoding/json writes for them (recorded
    /// from Go 1.26).
    #[test]
    fn floats_format_like_go() {
        for (input, expected) in [
            // Two shortest candidates, ...254.2 and ...254.3, equally near:
            // Go (Ryū) takes the even one, Rust's `Display` the other.
            ("1059438285926254.2", "1059438285926254.2"),
            ("1e21", "1e+21"),
            ("999999999999999999999", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("1e-7", "1e-7"),
            ("0.000001", "0.000001"),
            ("-2.5e-10", "-2.5e-10"),
            ("12345678901234567890", "12345678901234567000"),
            ("9007199254740993", "9007199254740992"),
            // Integers of up to 15 digits are copied; longer ones rounded.
            ("999999999999999", "999999999999999"),
            ("-999999999999999", "-999999999999999"),
            ("9999999999999999", "10000000000000000"),
            ("-0", "-0"),
            ("5e-324", "5e-324"),
            ("2.2250738585072014e-308", "2.2250738585072014e-308"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("0.30000000000000004", "0.30000000000000004"),
            ("1E2", "100"),
            ("1.0", "1"),
        ] {
            let mut out = String::new();
            write_float(&mut out, input.parse().unwrap());
            assert_eq!(out, expected, "{input}");
            assert_eq!(reencode(input, false, 1).unwrap(), expected, "{input}");
        }
    }

    /// Each escape class, as Go decodes a JSON string and encodes it again.
    #[test]
    fn strings_are_decoded_and_escaped_again_like_go() {
        for (input, html_off, html_on) in [
            (r#""\u00e9""#, "\"é\"", "\"é\""),
            (r#""\/""#, r#""/""#, r#""/""#),
            (
                r#""\u003c<\u003e>\u0026&""#,
                r#""<<>>&&""#,
                r#""\u003c\u003c\u003e\u003e\u0026\u0026""#,
            ),
            (
                "\"\u{2028}\\u2029\"",
                r#""\u2028\u2029""#,
                r#""\u2028\u2029""#,
            ),
            (
                r#""\u0001\u001f""#,
                r#""\u0001\u001f""#,
                r#""\u0001\u001f""#,
            ),
            (
                r#""\u0008\u000c\u000a\u000d\u0009""#,
                r#""\b\f\n\r\t""#,
                r#""\b\f\n\r\t""#,
            ),
            (r#""\"\\""#, r#""\"\\""#, r#""\"\\""#),
            ("\"\\u007f\"", "\"\u{7f}\"", "\"\u{7f}\""),
            (r#""\ud83d\ude00""#, "\"😀\"", "\"😀\""),
            // Unpaired surrogates become U+FFFD; what follows is kept.
            (r#""\ud800""#, "\"\u{fffd}\"", "\"\u{fffd}\""),
            (r#""\udc00x""#, "\"\u{fffd}x\"", "\"\u{fffd}x\""),
            (r#""\ud800\u0041""#, "\"\u{fffd}A\"", "\"\u{fffd}A\""),
            (r#""\ud800\ud800\udc00""#, "\"\u{fffd}𐀀\"", "\"\u{fffd}𐀀\""),
        ] {
            assert_eq!(reencode(input, false, 1).unwrap(), html_off, "{input}");
            assert_eq!(reencode(input, true, 1).unwrap(), html_on, "{input}");
        }
    }

    #[test]
    fn objects_are_sorted_and_the_last_repeated_key_wins() {
        assert_eq!(
            reencode(
                r#" { "b" : 1 , "a" : [ 2 , { } , [ ] ] , "b" : 3 , "\u00e9" : null , "B" : true } "#,
                false,
                3
            )
            .unwrap(),
            r#"{"B":true,"a":[2,{},[]],"b":3,"é":null}"#
        );
    }

    /// Go sorts keys as the strings they decode to, not as the text that
    /// encodes them; objects put in order carry their values (commas,
    /// braces and NULs in strings included) along whole.
    #[test]
    fn keys_sort_by_their_decoded_bytes() {
        assert_eq!(
            reencode(
                r##"{"\\":1,"#":2,"\"":3,"\n":4,"\u2028":5,"é":6,"\u00e9":7,"\u0000":8,"\u001f":9,"":10}"##,
                false,
                1
            )
            .unwrap(),
            r##"{"":10,"\u0000":8,"\n":4,"\u001f":9,"\"":3,"#":2,"\\":1,"é":7,"\u2028":5}"##
        );
        assert_eq!(
            reencode(
                r#"{"b":0,"a":[],"b":{"y":[1,{"q":",","p":"}\u0000{"}],"x":"\u0000,"}}"#,
                false,
                4
            )
            .unwrap(),
            r#"{"a":[],"b":{"x":"\u0000,","y":[1,{"p":"}\u0000{","q":","}]}}"#
        );
    }

    #[test]
    fn what_go_refuses_is_refused() {
        assert_eq!(
            reencode("[1e400]", false, 2),
            Err(ReencodeError::NumberOutOfRange {
                number: "1e400".into()
            })
        );
        assert_eq!(
            reencode("[[1]]", false, 1),
            Err(ReencodeError::TooDeep { limit: 1 })
        );
        for bad in [
            "",
            "{",
            "[1,]",
            "01",
            "1.",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\u+123\"",
            "nul",
            "1 2",
        ] {
            assert!(
                matches!(reencode(bad, false, 5), Err(ReencodeError::Syntax { .. })),
                "{bad}"
            );
        }
    }

    /// Base64 as Go's encoding/json decodes a `[]byte` and encodes it again,
    /// or the error it gives (recorded from Go 1.26).
    #[test]
    fn base64_is_decoded_and_encoded_again_like_go() {
        for (input, expected) in [
            ("", Ok("")),
            ("aGVsbG8=", Ok("aGVsbG8=")),
            ("aGVsbG8=\n", Ok("aGVsbG8=")),
            ("aGVs\nbG8=\n", Ok("aGVsbG8=")),
            ("\r\naGVsbG8=\r\n", Ok("aGVsbG8=")),
            ("\n", Ok("")),
            ("YR==", Ok("YQ==")),
            ("abcdefghij==", Ok("abcdefghig==")),
            ("ab=\n=", Ok("aQ==")),
            ("ab\n\n=\n\n=\n", Ok("aQ==")),
            ("abc\n=", Ok("abc=")),
            ("aGVsbG8", Err(4)),
            ("aGVsbG8==", Err(8)),
            ("aGVsbA=", Err(7)),
            ("YQ=", Err(3)),
            ("Y===", Err(1)),
            ("====", Err(0)),
            ("abc", Err(0)),
            ("ab=d", Err(2)),
            ("ab=\n", Err(4)),
            ("a\n", Err(1)),
            ("aGVs bG8=", Err(4)),
            ("!!not base64", Err(0)),
            ("aGVsbG8=\nx", Err(9)),
            ("YQ==YQ==", Err(4)),
            ("aGVsbG8-", Err(7)),
            ("abcdefgh\nij", Err(9)),
        ] {
            let got = reencode_base64(input);
            match expected {
                Ok(text) => assert_eq!(got.as_deref(), Ok(text), "{input:?}"),
                Err(offset) => {
                    assert_eq!(got, Err(Base64Error { offset }), "{input:?}");
                    assert_eq!(
                        got.unwrap_err().to_string(),
                        format!("illegal base64 data at input byte {offset}")
                    );
                }
            }
        }
    }

    /// JSON values with every kind of string and number this crate meets.
    pub(crate) fn json_value() -> impl Strategy<Value = Value> {
        let string = prop_oneof![
            any::<String>(),
            "[a-z<>&\"\\\\/\u{7f}\u{e9}\u{2028}\u{2029}\u{1F600}\u{0}-\u{1f}]{0,12}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-(1i64 << 53)..(1i64 << 53)).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            string.clone().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(string.clone(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// JSON text with every character outside printable ASCII written as a
    /// `\uXXXX` escape (surrogate pairs beyond the BMP), as some tools write.
    pub(crate) fn ascii_json(value: &Value) -> String {
        let mut out = String::new();
        for c in serde_json::to_string(value).unwrap().chars() {
            if c.is_ascii() && !c.is_ascii_control() {
                out.push(c);
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        out
    }

    /// Equal as JSON values, numbers compared as float64 (as Go reads them),
    /// give or take the last bit serde_json's fast float parsing may get
    /// wrong.
    pub(crate) fn same_value(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                // serde_json's default float parser may be an ulp or two
                // off (it lacks `float_roundtrip`), and an ulp of a
                // subnormal is no relative epsilon: count ulps apart.
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x == y
                    || (x.is_sign_negative() == y.is_sign_negative()
                        && x.to_bits().abs_diff(y.to_bits()) <= 2)
            }
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
            }
            _ => a == b,
        }
    }

    /// Go's string escapes, one character at a time: what the run-copying
    /// [`write_string`] must equal.
    fn write_string_by_char(s: &str, escape_html: bool) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '<' | '>' | '&' if escape_html => out.push_str(&format!("\\u{:04x}", c as u32)),
                '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    proptest! {
        /// Escaping copies runs, and gives what escaping each character
        /// gives, on any string (weighted towards the escaped ones).
        #[test]
        fn string_escapes_match_char_by_char(
            s in "([\"\\\\<>&\u{0}-\u{1f}\u{2028}\u{2029}\u{2027}\u{202a}é€a-z]|\\PC){0,40}",
            html in any::<bool>(),
        ) {
            let mut out = String::new();
            write_string(&mut out, &s, html);
            prop_assert_eq!(out, write_string_by_char(&s, html));
        }

        /// The fast decoder and Go's rules agree: canonical text decodes
        /// to its bytes, and the same text broken into lines (which only
        /// Go's rules accept) too.
        #[test]
        fn base64_with_and_without_line_breaks(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            use base64::Engine as _;
            let text = base64::engine::general_purpose::STANDARD.encode(&bytes);
            prop_assert_eq!(decode_base64(&text).unwrap(), bytes.clone());
            let broken: String = text
                .as_bytes()
                .chunks(7)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join("\r\n");
            prop_assert_eq!(decode_base64(&broken).unwrap(), bytes);
        }

        /// Any finite float64 is written as text that reads back as the
        /// same value (the sign of zero included), in Go's canonical form,
        /// which re-encoding leaves as it is.
        #[test]
        fn floats_read_back_as_themselves(
            f in prop_oneof![any::<f64>(), any::<u64>().prop_map(f64::from_bits)]
                .prop_filter("finite", |f| f.is_finite())
        ) {
            let mut out = String::new();
            write_float(&mut out, f);
            prop_assert_eq!(out.parse::<f64>().map(f64::to_bits), Ok(f.to_bits()), "{}", out);
            prop_assert_eq!(reencode(&out, false, 0), Ok(out.clone()));
        }

        /// Whatever the escaping of the input, the output is compact JSON of
        /// the same value, in Go's canonical form (so re-encoding it again
        /// changes nothing), and only U+2028 and U+2029 are escaped among
        /// printable characters.
        #[test]
        fn reencoding_keeps_the_value(value in json_value()) {
            for input in [serde_json::to_string(&value).unwrap(), ascii_json(&value)] {
                let out = reencode(&input, false, 10).unwrap();
                let back: Value = serde_json::from_str(&out).unwrap();
                prop_assert!(same_value(&back, &value), "{} -> {}", input, out);
                prop_assert_eq!(reencode(&out, false, 10).unwrap(), out.clone());
                let separators = ['\u{2028}', '\u{2029}'];
                prop_assert!(!out.contains(separators), "{}", out);
            }
        }
    }
}
