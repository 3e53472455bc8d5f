//! Image references with Docker's normalisation rules
//! (`distribution/reference.ParseNormalizedNamed`): a missing registry means
//! `docker.io`, a one-component repository on Docker Hub gets `library/`, a
//! missing tag means `latest`, and `index.docker.io` is `docker.io`.
//!
//! Grammar: `[domain[:port]/]path[:tag][@sha256:hex]`. The first component
//! is a domain only when it contains `.` or `:`, is `localhost`, or has an
//! upper-case letter; path components are lowercase alphanumerics joined by
//! `.`, `_`, `__` or runs of `-`; a tag is `[\w][\w.-]{0,127}`; the name is
//! at most 255 characters.

use std::{fmt, str::FromStr};

use crate::digest::Digest;

/// The registry that a reference without one names.
pub const DEFAULT_REGISTRY: &str = "docker.io";
/// The host serving [`DEFAULT_REGISTRY`]'s distribution API.
pub const DOCKER_HUB_API_HOST: &str = "registry-1.docker.io";
/// The tag of a reference without tag or digest.
pub const DEFAULT_TAG: &str = "latest";
/// Longest repository name with its domain, as upstream limits it.
pub const MAX_NAME_LEN: usize = 255;
/// Longest tag.
pub const MAX_TAG_LEN: usize = 128;
/// Longest whole reference this parser looks at.
pub const MAX_REFERENCE_LEN: usize = 4096;

/// A parsed, normalised image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

/// Why a reference was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// Empty input.
    #[error("invalid reference format: empty reference")]
    Empty,
    /// Longer than [`MAX_REFERENCE_LEN`] or the name longer than [`MAX_NAME_LEN`].
    #[error("repository name must not be more than {MAX_NAME_LEN} characters")]
    TooLong,
    /// Upper-case letters in the repository path.
    #[error("invalid reference format: repository name ({name}) must be lowercase")]
    Uppercase {
        /// The repository path.
        name: String,
    },
    /// The domain part is malformed.
    #[error("invalid reference format: bad registry host {domain:?}")]
    Domain {
        /// The domain.
        domain: String,
    },
    /// A path component is malformed.
    #[error("invalid reference format: bad repository path {path:?}")]
    Path {
        /// The path.
        path: String,
    },
    /// The tag is malformed.
    #[error("invalid reference format: bad tag {tag:?}")]
    Tag {
        /// The tag.
        tag: String,
    },
    /// The digest is malformed or not sha256.
    #[error("invalid reference format: bad digest {digest:?}")]
    Digest {
        /// The digest.
        digest: String,
    },
    /// A 64-digit hex string, which Docker reads as an image ID.
    #[error("invalid repository name ({0}), cannot specify 64-byte hexadecimal strings")]
    HexIdentifier(String),
}

impl Reference {
    /// Parses and normalises `text`.
    pub fn parse(text: &str) -> Result<Self, ReferenceError> {
        if text.is_empty() {
            return Err(ReferenceError::Empty);
        }
        if text.len() > MAX_REFERENCE_LEN {
            return Err(ReferenceError::TooLong);
        }
        if text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(ReferenceError::HexIdentifier(text.to_owned()));
        }
        let (rest, digest) = match text.split_once('@') {
            Some((rest, digest)) => {
                let parsed = digest
                    .parse::<Digest>()
                    .map_err(|_| ReferenceError::Digest {
                        digest: digest.chars().take(100).collect(),
                    })?;
                (rest, Some(parsed))
            }
            None => (text, None),
        };
        // A tag follows the last ':' that comes after the last '/'.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                (&rest[..at], Some(&rest[at + 1..]))
            }
            None => (rest, None),
        };
        if let Some(tag) = tag {
            check_tag(tag)?;
        }
        let (registry, repository) = split_domain(name);
        if let Some(registry) = &registry {
            check_domain(registry)?;
        }
        if repository.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(ReferenceError::Uppercase {
                name: repository.to_owned(),
            });
        }
        check_path(repository)?;
        let mut registry = registry.unwrap_or_else(|| DEFAULT_REGISTRY.to_owned());
        if registry == "index.docker.io" {
            registry = DEFAULT_REGISTRY.to_owned();
        }
        let repository = if registry == DEFAULT_REGISTRY && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository.to_owned()
        };
        if registry.len() + 1 + repository.len() > MAX_NAME_LEN {
            return Err(ReferenceError::TooLong);
        }
        let tag = match (tag, &digest) {
            (Some(tag), _) => Some(tag.to_owned()),
            (None, None) => Some(DEFAULT_TAG.to_owned()),
            (None, Some(_)) => None,
        };
        Ok(Self {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The registry as named (`docker.io`, `quay.io`, `127.0.0.1:5000`).
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The host:port whose `/v2/` API serves this registry.
    pub fn api_host(&self) -> &str {
        if self.registry == DEFAULT_REGISTRY {
            DOCKER_HUB_API_HOST
        } else {
            &self.registry
        }
    }

    /// The repository path (`library/busybox`).
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if any (`latest` when neither tag nor digest was given).
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest, if any.
    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// What to ask the manifest endpoint for: the digest when there is one,
    /// the tag otherwise.
    pub fn manifest_reference(&self) -> &str {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => digest.as_str(),
            (None, Some(tag)) => tag,
            (None, None) => DEFAULT_TAG,
        }
    }

    /// The same image pinned to `digest` (the tag is kept for display).
    pub fn with_digest(&self, digest: Digest) -> Self {
        Self {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// `registry/repository`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }
}

impl FromStr for Reference {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Splits the domain off as Docker does: the first component is a domain
/// when it has `.` or `:`, is `localhost`, or is not all lowercase.
fn split_domain(name: &str) -> (Option<String>, &str) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            (Some(first.to_owned()), rest)
        }
        _ => (None, name),
    }
}

fn check_tag(tag: &str) -> Result<(), ReferenceError> {
    let bytes = tag.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let valid = !bytes.is_empty()
        && bytes.len() <= MAX_TAG_LEN
        && word(bytes[0])
        && bytes[1..]
            .iter()
            .all(|&b| word(b) || b == b'.' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(ReferenceError::Tag {
            tag: tag.chars().take(200).collect(),
        })
    }
}

fn check_domain(domain: &str) -> Result<(), ReferenceError> {
    let error = || ReferenceError::Domain {
        domain: domain.chars().take(200).collect(),
    };
    let (host, port) = if let Some(rest) = domain.strip_prefix('[') {
        // An IPv6 literal in brackets.
        let (inside, after) = rest.split_once(']').ok_or_else(error)?;
        if inside.is_empty() || !inside.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
            return Err(error());
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(error)?),
        };
        (None, port)
    } else {
        match domain.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(domain), None),
        }
    };
    if let Some(port) = port
        && (port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(error());
    }
    if let Some(host) = host {
        let label_ok = |label: &str| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-')
        };
        if !host.split('.').all(label_ok) {
            return Err(error());
        }
    }
    Ok(())
}

fn check_path(path: &str) -> Result<(), ReferenceError> {
    let error = || ReferenceError::Path {
        path: path.chars().take(200).collect(),
    };
    if path.is_empty() {
        return Err(error());
    }
    for component in path.split('/') {
        let b = component.as_bytes();
        if b.is_empty() || !is_lower_alnum(b[0]) || !is_lower_alnum(b[b.len() - 1]) {
            return Err(error());
        }
        // Separators: '.', '_', '__', or one or more '-'.
        let mut i = 0;
        while i < b.len() {
            if is_lower_alnum(b[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && !is_lower_alnum(b[i]) {
                i += 1;
            }
            let separator = &component[start..i];
            let ok = separator == "."
                || separator == "_"
                || separator == "__"
                || separator.bytes().all(|c| c == b'-');
            if !ok {
                return Err(error());
            }
        }
    }
    Ok(())
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_digit() || b.is_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn normalises_like_docker() {
        let cases: &[(&str, &str, &str, Option<&str>, bool)] = &[
            (
                "busybox",
                "docker.io",
                "library/busybox",
                Some("latest"),
                false,
            ),
            (
                "busybox:1.36",
                "docker.io",
                "library/busybox",
                Some("1.36"),
                false,
            ),
            (
                "library/busybox",
                "docker.io",
                "library/busybox",
                Some("latest"),
                false,
            ),
            (
                "index.docker.io/foo/bar",
                "docker.io",
                "foo/bar",
                Some("latest"),
                false,
            ),
            (
                "quay.io/operatorhubio/etcd:v0.9.4",
                "quay.io",
                "operatorhubio/etcd",
                Some("v0.9.4"),
                false,
            ),
            ("localhost/foo", "localhost", "foo", Some("latest"), false),
            (
                "localhost:5000/foo/bar:1",
                "localhost:5000",
                "foo/bar",
                Some("1"),
                false,
            ),
            (
                "127.0.0.1:39999/olm/bundle:v1",
                "127.0.0.1:39999",
                "olm/bundle",
                Some("v1"),
                false,
            ),
            ("[::1]:5000/foo", "[::1]:5000", "foo", Some("latest"), false),
            (
                "Registry.Example/foo",
                "Registry.Example",
                "foo",
                Some("latest"),
                false,
            ),
            (
                "foo/bar@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "docker.io",
                "foo/bar",
                None,
                true,
            ),
            (
                "quay.io/a/b:t@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "quay.io",
                "a/b",
                Some("t"),
                true,
            ),
            (
                "a.b/c__d/e-----f/g.h_i",
                "a.b",
                "c__d/e-----f/g.h_i",
                Some("latest"),
                false,
            ),
        ];
        for &(text, registry, repository, tag, has_digest) in cases {
            let r = Reference::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(r.registry(), registry, "{text}");
            assert_eq!(r.repository(), repository, "{text}");
            assert_eq!(r.tag(), tag, "{text}");
            assert_eq!(r.digest().is_some(), has_digest, "{text}");
        }
    }

    #[test]
    fn manifest_reference_prefers_the_digest() {
        let r = Reference::parse(&format!("quay.io/a/b:t@{D}")).unwrap();
        assert_eq!(r.manifest_reference(), D);
        assert_eq!(r.to_string(), format!("quay.io/a/b:t@{D}"));
        assert_eq!(
            Reference::parse("busybox").unwrap().api_host(),
            DOCKER_HUB_API_HOST
        );
    }

    #[test]
    fn refuses_hostile_and_malformed_references() {
        let long_path = "a/".repeat(200) + "b";
        let long_tag = format!("foo:{}", "t".repeat(129));
        let huge = "a".repeat(MAX_REFERENCE_LEN + 1);
        let hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        for bad in [
            "",
            ":",
            "@",
            "/",
            "foo/",
            "/foo",
            "foo//bar",
            "Foo",
            "foo/Bar",
            "foo:",
            "foo:-tag",
            "foo:ta/g",
            "foo@sha256:short",
            "foo@md5:abcdef",
            "foo@",
            "../etc/passwd",
            "quay.io/../x",
            "quay.io/a/./b",
            "-quay.io/a",
            "quay-.io/a",
            "quay.io:/a",
            "quay.io:99999999/a",
            "[::1/foo",
            "[zz]/foo",
            "foo bar",
            "foo\nbar",
            "foo\0bar",
            "ünïcode/x",
            "a__-b",
            "a...b",
            &long_path,
            &long_tag,
            &huge,
            hex,
        ] {
            assert!(Reference::parse(bad).is_err(), "accepted {bad:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in ".{0,300}") {
            let _ = Reference::parse(&text);
        }

        #[test]
        fn display_parses_back_to_the_same(
            host in "(quay\\.io|localhost:5000|127\\.0\\.0\\.1:1234|)",
            path in "[a-z0-9]{1,8}(/[a-z0-9]{1,8}){0,2}",
            tag in proptest::option::of("[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,20}"),
        ) {
            let mut text = if host.is_empty() { path } else { format!("{host}/{path}") };
            if let Some(tag) = tag { text = format!("{text}:{tag}"); }
            let parsed = Reference::parse(&text).unwrap();
            let again = Reference::parse(&parsed.to_string()).unwrap();
            prop_assert_eq!(parsed, again);
        }
    }
}
