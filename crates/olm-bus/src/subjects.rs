//! NATS subjects of the bus: every subject OLM publishes to or subscribes on
//! is built by a function of this module, never formatted ad hoc elsewhere.
//!
//! Subjects are versioned and hierarchical (`olm.v1.<kind>.…`). The variable
//! parts (namespaces, names, digests) come from Kubernetes objects and image
//! references, so each is escaped into a single subject token:
//!
//! - ASCII letters, digits and `-` are kept as they are, so DNS labels (every
//!   namespace and most names) read unchanged;
//! - every other byte, `_` included, becomes `_XX` with `XX` its value in
//!   upper-case hexadecimal: `etcdoperator.v0.9.4` becomes
//!   `etcdoperator_2Ev0_2E9_2E4` and `sha256:ab` becomes `sha256_3Aab`;
//! - the empty string becomes a lone `_`, which no other input produces.
//!
//! The escaping is reversible ([`decode_token`]) and never yields `.`, `*`,
//! `>` or whitespace, so a hostile name can neither add a level to a subject
//! nor turn it into a wildcard. Inputs longer than a named limit are refused,
//! which keeps every subject well below the NATS control-line limit.

use std::fmt;

use crate::Error;

/// First two tokens of every subject: the product and the subject schema
/// version. A breaking change of subjects or payloads moves to `olm.v2`.
pub const PREFIX: &str = "olm.v1";

/// Longest namespace or object name accepted in a subject, in bytes.
/// Kubernetes names are at most 253 bytes (a DNS subdomain), so anything
/// longer cannot name a real object.
pub const MAX_NAME_BYTES: usize = 253;

/// Longest digest (or image reference standing in for one) accepted in a
/// subject, in bytes. A `sha512:` digest is 135 bytes; an image reference
/// with a digest stays well under this.
pub const MAX_DIGEST_BYTES: usize = 512;

/// Subject of the JetStream work queue of bundle unpack requests.
pub const BUNDLE_UNPACK_REQUESTS: &str = "olm.v1.bundle.unpack.requests";

/// A concrete subject, safe to publish to: it has no wildcard and every
/// variable token is escaped.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Subject(String);

impl Subject {
    /// The subject as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Subject {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<Subject> for String {
    fn from(subject: Subject) -> String {
        subject.0
    }
}

/// A subject pattern to subscribe on; it may contain the `*` wildcard in
/// place of whole tokens. Only this module builds filters, so a wildcard
/// never comes from user input.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubjectFilter(String);

impl SubjectFilter {
    /// The filter as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SubjectFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SubjectFilter {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<Subject> for SubjectFilter {
    /// A concrete subject is a filter that matches only itself.
    fn from(subject: Subject) -> SubjectFilter {
        SubjectFilter(subject.0)
    }
}

/// `olm.v1.catalog.<namespace>.<name>.updated`: the content of a
/// CatalogSource changed.
pub fn catalog_updated(namespace: &str, name: &str) -> Result<Subject, Error> {
    Ok(Subject(format!(
        "{PREFIX}.catalog.{}.{}.updated",
        name_token("namespace", namespace)?,
        name_token("name", name)?
    )))
}

/// Catalog updates of one namespace, or of every namespace when `None`.
pub fn catalog_updated_filter(namespace: Option<&str>) -> Result<SubjectFilter, Error> {
    Ok(SubjectFilter(format!(
        "{PREFIX}.catalog.{}.*.updated",
        namespace_or_wildcard(namespace)?
    )))
}

/// `olm.v1.bundle.unpack.requests`: the JetStream work queue of bundle
/// unpack requests, shared by every bundle-unpacker replica.
pub fn bundle_unpack_requests() -> Subject {
    Subject(BUNDLE_UNPACK_REQUESTS.to_owned())
}

/// `olm.v1.bundle.<digest>.unpacked`: a bundle image was unpacked (or
/// failed to be). `digest` is the image digest, for example `sha256:…`.
pub fn bundle_unpacked(digest: &str) -> Result<Subject, Error> {
    Ok(Subject(format!(
        "{PREFIX}.bundle.{}.unpacked",
        escaped_token("digest", digest, MAX_DIGEST_BYTES)?
    )))
}

/// Unpack results of one image digest, or of every digest when `None`.
pub fn bundle_unpacked_filter(digest: Option<&str>) -> Result<SubjectFilter, Error> {
    let digest = match digest {
        Some(digest) => escaped_token("digest", digest, MAX_DIGEST_BYTES)?,
        None => "*".to_owned(),
    };
    Ok(SubjectFilter(format!("{PREFIX}.bundle.{digest}.unpacked")))
}

/// `olm.v1.csv.<namespace>.<name>.phase`: a ClusterServiceVersion changed
/// phase.
pub fn csv_phase(namespace: &str, name: &str) -> Result<Subject, Error> {
    Ok(Subject(format!(
        "{PREFIX}.csv.{}.{}.phase",
        name_token("namespace", namespace)?,
        name_token("name", name)?
    )))
}

/// CSV phase changes of one namespace, or of every namespace when `None`.
pub fn csv_phase_filter(namespace: Option<&str>) -> Result<SubjectFilter, Error> {
    Ok(SubjectFilter(format!(
        "{PREFIX}.csv.{}.*.phase",
        namespace_or_wildcard(namespace)?
    )))
}

/// `olm.v1.installplan.<namespace>.<name>.phase`: an InstallPlan changed
/// phase.
pub fn install_plan_phase(namespace: &str, name: &str) -> Result<Subject, Error> {
    Ok(Subject(format!(
        "{PREFIX}.installplan.{}.{}.phase",
        name_token("namespace", namespace)?,
        name_token("name", name)?
    )))
}

/// InstallPlan phase changes of one namespace, or of every namespace when
/// `None`.
pub fn install_plan_phase_filter(namespace: Option<&str>) -> Result<SubjectFilter, Error> {
    Ok(SubjectFilter(format!(
        "{PREFIX}.installplan.{}.*.phase",
        namespace_or_wildcard(namespace)?
    )))
}

/// `olm.v1.subscription.<namespace>.<name>.resolved`: a Subscription was
/// resolved.
pub fn subscription_resolved(namespace: &str, name: &str) -> Result<Subject, Error> {
    Ok(Subject(format!(
        "{PREFIX}.subscription.{}.{}.resolved",
        name_token("namespace", namespace)?,
        name_token("name", name)?
    )))
}

/// Subscription resolutions of one namespace, or of every namespace when
/// `None`.
pub fn subscription_resolved_filter(namespace: Option<&str>) -> Result<SubjectFilter, Error> {
    Ok(SubjectFilter(format!(
        "{PREFIX}.subscription.{}.*.resolved",
        namespace_or_wildcard(namespace)?
    )))
}

/// Subjects captured by the audit stream: every lifecycle event, but not the
/// work queue (a subject may belong to one stream only).
pub fn audit_subjects() -> Vec<String> {
    [
        format!("{PREFIX}.catalog.*.*.updated"),
        format!("{PREFIX}.bundle.*.unpacked"),
        format!("{PREFIX}.csv.*.*.phase"),
        format!("{PREFIX}.installplan.*.*.phase"),
        format!("{PREFIX}.subscription.*.*.resolved"),
    ]
    .into()
}

/// Escapes one value into a subject token (see the module documentation).
/// Refuses values longer than `max_bytes`; `field` names the value in the
/// error.
pub fn escape_token(field: &'static str, value: &str, max_bytes: usize) -> Result<String, Error> {
    escaped_token(field, value, max_bytes)
}

/// Reverses [`escape_token`], for tools that read subjects back (for
/// example when listing the audit stream).
pub fn decode_token(token: &str) -> Result<String, Error> {
    let malformed = |reason: &'static str| Error::MalformedToken {
        token: truncate_for_error(token),
        reason,
    };
    if token == "_" {
        return Ok(String::new());
    }
    if token.is_empty() {
        return Err(malformed("empty token"));
    }
    let mut bytes = Vec::with_capacity(token.len());
    let mut rest = token.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        match byte {
            b'_' => {
                let [high, low, tail @ ..] = tail else {
                    return Err(malformed("escape `_` is not followed by two hex digits"));
                };
                let (Some(high), Some(low)) = (hex_value(*high), hex_value(*low)) else {
                    return Err(malformed("escape `_` is not followed by two hex digits"));
                };
                bytes.push(high << 4 | low);
                rest = tail;
            }
            byte if is_plain(byte) => {
                bytes.push(byte);
                rest = tail;
            }
            _ => return Err(malformed("character outside [A-Za-z0-9_-]")),
        }
    }
    String::from_utf8(bytes).map_err(|_| malformed("escaped bytes are not UTF-8"))
}

fn name_token(field: &'static str, value: &str) -> Result<String, Error> {
    escaped_token(field, value, MAX_NAME_BYTES)
}

fn namespace_or_wildcard(namespace: Option<&str>) -> Result<String, Error> {
    match namespace {
        Some(namespace) => name_token("namespace", namespace),
        None => Ok("*".to_owned()),
    }
}

fn escaped_token(field: &'static str, value: &str, max_bytes: usize) -> Result<String, Error> {
    if value.len() > max_bytes {
        return Err(Error::TokenTooLong {
            field,
            len: value.len(),
            max: max_bytes,
        });
    }
    if value.is_empty() {
        return Ok("_".to_owned());
    }
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut token = String::with_capacity(value.len());
    for &byte in value.as_bytes() {
        if is_plain(byte) {
            token.push(char::from(byte));
        } else {
            token.push('_');
            token.push(char::from(HEX[usize::from(byte >> 4)]));
            token.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    Ok(token)
}

fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-'
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// Most characters of a malformed token quoted in its error; the rest is
/// cut and marked with `…`.
const MAX_QUOTED_TOKEN_CHARS: usize = 64;

/// Keeps error messages bounded when the token itself is hostile.
fn truncate_for_error(token: &str) -> String {
    if token.chars().count() <= MAX_QUOTED_TOKEN_CHARS {
        token.to_owned()
    } else {
        let mut short: String = token.chars().take(MAX_QUOTED_TOKEN_CHARS).collect();
        short.push('…');
        short
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subject token must be non-empty and free of the characters NATS
    /// gives a meaning to.
    fn assert_single_safe_token(token: &str) {
        assert!(!token.is_empty(), "empty token");
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "token {token:?} has a character outside [A-Za-z0-9_-]"
        );
    }

    fn tokens(subject: &str) -> Vec<&str> {
        subject.split('.').collect()
    }

    #[test]
    fn subjects_have_the_documented_shape() {
        let cases = [
            (
                catalog_updated("olm", "operatorhubio-catalog").expect("subject"),
                "olm.v1.catalog.olm.operatorhubio-catalog.updated",
            ),
            (bundle_unpack_requests(), "olm.v1.bundle.unpack.requests"),
            (
                bundle_unpacked("sha256:0a1b").expect("subject"),
                "olm.v1.bundle.sha256_3A0a1b.unpacked",
            ),
            (
                csv_phase("operators", "etcdoperator.v0.9.4").expect("subject"),
                "olm.v1.csv.operators.etcdoperator_2Ev0_2E9_2E4.phase",
            ),
            (
                install_plan_phase("operators", "install-abcde").expect("subject"),
                "olm.v1.installplan.operators.install-abcde.phase",
            ),
            (
                subscription_resolved("operators", "etcd").expect("subject"),
                "olm.v1.subscription.operators.etcd.resolved",
            ),
        ];
        for (subject, expected) in cases {
            assert_eq!(subject.as_str(), expected);
        }
    }

    #[test]
    fn filters_use_whole_token_wildcards() {
        assert_eq!(
            catalog_updated_filter(None).expect("filter").as_str(),
            "olm.v1.catalog.*.*.updated"
        );
        assert_eq!(
            csv_phase_filter(Some("operators"))
                .expect("filter")
                .as_str(),
            "olm.v1.csv.operators.*.phase"
        );
        assert_eq!(
            install_plan_phase_filter(Some("a.b"))
                .expect("filter")
                .as_str(),
            "olm.v1.installplan.a_2Eb.*.phase"
        );
        assert_eq!(
            subscription_resolved_filter(None).expect("filter").as_str(),
            "olm.v1.subscription.*.*.resolved"
        );
        assert_eq!(
            bundle_unpacked_filter(None).expect("filter").as_str(),
            "olm.v1.bundle.*.unpacked"
        );
        assert_eq!(
            bundle_unpacked_filter(Some("sha256:ff"))
                .expect("filter")
                .as_str(),
            "olm.v1.bundle.sha256_3Aff.unpacked"
        );
    }

    #[test]
    fn over_long_malformed_tokens_are_quoted_cut_to_the_limit() {
        let outside = "character outside [A-Za-z0-9_-]";
        let at_limit = format!(".{}", "a".repeat(MAX_QUOTED_TOKEN_CHARS - 1));
        let over_limit = format!(".{}", "a".repeat(MAX_QUOTED_TOKEN_CHARS));
        // Multi-byte characters: the cut counts characters and lands on a
        // character boundary.
        let huge = "é".repeat(100_000);
        for (token, quoted) in [
            (at_limit.clone(), at_limit.clone()),
            (
                over_limit.clone(),
                format!("{}…", &over_limit[..MAX_QUOTED_TOKEN_CHARS]),
            ),
            (
                huge.clone(),
                format!("{}…", "é".repeat(MAX_QUOTED_TOKEN_CHARS)),
            ),
        ] {
            let error = decode_token(&token).unwrap_err();
            assert!(
                matches!(&error, Error::MalformedToken { token, reason }
                    if *token == quoted && *reason == outside),
                "{error}"
            );
            assert_eq!(
                error.to_string(),
                format!("malformed subject token {quoted:?}: {outside}")
            );
        }
    }

    #[test]
    fn hostile_names_stay_inside_one_token() {
        let hostile = [
            "",
            ".",
            "..",
            "*",
            ">",
            "a.*.>",
            "a b",
            " ",
            "\t",
            "\r\n",
            "\0",
            "_",
            "_2E",
            "%2E",
            "name.with.dots",
            "ns>",
            "ünïcödé",
            "😀",
            "a\u{202e}b",
        ];
        for value in hostile {
            let subject = csv_phase(value, value).expect("subject");
            let parts = tokens(subject.as_str());
            assert_eq!(parts.len(), 6, "{value:?} changed the depth of {subject}");
            assert_eq!(&parts[..3], ["olm", "v1", "csv"]);
            assert_eq!(parts[5], "phase");
            for token in &parts[3..5] {
                assert_single_safe_token(token);
            }
            let digest_subject = bundle_unpacked(value).expect("subject");
            assert_eq!(tokens(digest_subject.as_str()).len(), 5);
            assert_eq!(decode_token(parts[3]).expect("decodes"), value);
            assert_eq!(decode_token(parts[4]).expect("decodes"), value);
        }
    }

    #[test]
    fn escaping_is_injective_on_lookalikes() {
        // Values that a naive replacement (for example `.` -> `_`) would merge.
        let values = ["a.b", "a_b", "a_2Eb", "a-b", "a:b", "", "_"];
        let escaped: Vec<String> = values
            .iter()
            .map(|v| escape_token("value", v, MAX_NAME_BYTES).expect("escapes"))
            .collect();
        for (i, a) in escaped.iter().enumerate() {
            for b in &escaped[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn round_trips_every_byte_value() {
        let all: String = (0u32..0x250).filter_map(char::from_u32).collect();
        let escaped = escape_token("value", &all, usize::MAX).expect("escapes");
        assert_single_safe_token(&escaped);
        assert_eq!(decode_token(&escaped).expect("decodes"), all);
    }

    #[test]
    fn refuses_over_long_values() {
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        let err = csv_phase("ns", &long).expect_err("too long");
        assert!(
            matches!(err, Error::TokenTooLong { field: "name", len, max }
                if len == MAX_NAME_BYTES + 1 && max == MAX_NAME_BYTES),
            "{err:?}"
        );
        assert!(csv_phase(&"n".repeat(MAX_NAME_BYTES), "ok").is_ok());
        assert!(bundle_unpacked(&"d".repeat(MAX_DIGEST_BYTES + 1)).is_err());
        assert!(catalog_updated_filter(Some(&long)).is_err());
    }

    #[test]
    fn decode_rejects_malformed_tokens() {
        for token in [
            "", "a.b", "_", "_4", "_G0", "_2e", "a*", "a>", "a b", "_FF", "é",
        ] {
            match decode_token(token) {
                // A lone `_` is the empty string, not an error.
                Ok(value) if token == "_" => assert_eq!(value, ""),
                Ok(value) => panic!("{token:?} decoded to {value:?}"),
                Err(Error::MalformedToken { .. }) => {}
                Err(other) => panic!("{token:?}: unexpected error {other:?}"),
            }
        }
    }

    #[test]
    fn work_queue_and_audit_subjects_do_not_overlap() {
        // A JetStream subject may belong to one stream only, so the audit
        // stream must not capture the work queue subject.
        let request = bundle_unpack_requests();
        for pattern in audit_subjects() {
            assert!(
                !matches(&pattern, request.as_str()),
                "{pattern} captures {request}"
            );
        }
        // ...while it captures every lifecycle event subject.
        let events = [
            catalog_updated("ns", "c").expect("subject"),
            bundle_unpacked("sha256:00").expect("subject"),
            bundle_unpacked("unpack").expect("subject"),
            csv_phase("ns", "c").expect("subject"),
            install_plan_phase("ns", "c").expect("subject"),
            subscription_resolved("ns", "c").expect("subject"),
        ];
        for subject in events {
            assert!(
                audit_subjects()
                    .iter()
                    .any(|p| matches(p, subject.as_str())),
                "no audit subject captures {subject}"
            );
        }
    }

    /// NATS matching for the `*` wildcard, enough for these tests.
    fn matches(pattern: &str, subject: &str) -> bool {
        let pattern = tokens(pattern);
        let subject = tokens(subject);
        pattern.len() == subject.len()
            && pattern
                .iter()
                .zip(&subject)
                .all(|(p, s)| *p == "*" || p == s)
    }
}
