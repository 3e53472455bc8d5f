//! Container image references, checked the way upstream checks bundle and
//! related images (`reference.ParseNormalizedNamed` from
//! `distribution/reference`, as used by `opm validate`).
//!
//! The grammar: `[domain[:port]/]path[:tag][@algorithm:hex]`, where path
//! components are lowercase alphanumerics joined by `.`, `_`, `__` or runs of
//! `-`; a tag is `[\w][\w.-]{0,127}`; the repository name is at most 255
//! characters; a digest must use a known algorithm (`sha256`, `sha384`,
//! `sha512`) with the right number of lowercase hex digits. A bare 64-digit
//! hex string is refused (it would be read as an image ID).

/// Why an image reference is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageReferenceError {
    /// The reference does not match the grammar.
    #[error("invalid reference format")]
    Format,
    /// The repository name has upper-case letters.
    #[error("invalid reference format: repository name ({name}) must be lowercase")]
    Uppercase {
        /// The repository name.
        name: String,
    },
    /// The repository name is longer than 255 characters.
    #[error("repository name must not be more than 255 characters")]
    TooLong,
    /// The reference is a 64-digit hex string.
    #[error("invalid repository name ({reference}), cannot specify 64-byte hexadecimal strings")]
    HexIdentifier {
        /// The reference.
        reference: String,
    },
    /// The digest algorithm is not one upstream supports.
    #[error("unsupported digest algorithm")]
    UnsupportedDigest,
    /// The digest's hex part has the wrong length or characters.
    #[error("invalid checksum digest format")]
    InvalidDigest,
}

/// Checks an image reference as upstream's `ParseNormalizedNamed` does.
pub fn validate(reference: &str) -> Result<(), ImageReferenceError> {
    if reference.len() == 64
        && reference
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return Err(ImageReferenceError::HexIdentifier {
            reference: reference.to_owned(),
        });
    }
    let (domain, remainder) = split_docker_domain(reference);
    let remote_name = remainder.split(':').next().unwrap_or_default();
    if remote_name.to_lowercase() != remote_name {
        return Err(ImageReferenceError::Uppercase {
            name: remote_name.to_owned(),
        });
    }
    parse(&format!("{domain}/{remainder}"))
}

/// Go's `splitDockerDomain`: the first component is a domain only if it has a
/// `.` or `:`, is `localhost`, or has upper-case letters.
fn split_docker_domain(name: &str) -> (&str, String) {
    match name.find('/') {
        Some(i) => {
            let first = &name[..i];
            if first.contains(['.', ':']) || first == "localhost" || first.to_lowercase() != first {
                (first, name[i + 1..].to_owned())
            } else {
                ("docker.io", name.to_owned())
            }
        }
        None => ("docker.io", format!("library/{name}")),
    }
}

/// `reference.Parse` of a full reference.
fn parse(reference: &str) -> Result<(), ImageReferenceError> {
    let (name_and_tag, digest) = match reference.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (reference, None),
    };
    let last_segment_start = name_and_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_and_tag[last_segment_start..].find(':') {
        Some(i) => (
            &name_and_tag[..last_segment_start + i],
            Some(&name_and_tag[last_segment_start + i + 1..]),
        ),
        None => (name_and_tag, None),
    };
    let grammatical =
        is_name(name) && tag.is_none_or(is_tag) && digest.is_none_or(is_digest_syntax);
    if !grammatical {
        let lower = reference.to_lowercase();
        if lower != reference && parse(&lower).is_ok() {
            return Err(ImageReferenceError::Uppercase {
                name: name.to_owned(),
            });
        }
        return Err(ImageReferenceError::Format);
    }
    if name.len() > 255 {
        return Err(ImageReferenceError::TooLong);
    }
    if let Some(digest) = digest {
        validate_digest(digest)?;
    }
    Ok(())
}

fn is_name(name: &str) -> bool {
    let components: Vec<&str> = name.split('/').collect();
    let all_paths =
        |parts: &[&str]| !parts.is_empty() && parts.iter().all(|p| is_path_component(p));
    all_paths(&components)
        || (components.len() > 1
            && is_domain_and_port(components[0])
            && all_paths(&components[1..]))
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn is_path_component(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        match bytes[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if bytes.get(i) == Some(&b'_') {
                    i += 1;
                }
            }
            b'-' => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return false,
        }
    }
}

/// `host(:port)?` where host is a domain name or a bracketed IPv6 address.
fn is_domain_and_port(s: &str) -> bool {
    let (host_ok, rest) = if let Some(rest) = s.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return false;
        };
        let address = &rest[..end];
        (
            !address.is_empty() && address.bytes().all(|b| b.is_ascii_hexdigit() || b == b':'),
            &rest[end + 1..],
        )
    } else {
        let end = s.find(':').unwrap_or(s.len());
        let host = &s[..end];
        (
            !host.is_empty() && host.split('.').all(is_domain_component),
            &s[end..],
        )
    };
    let port_ok = rest.is_empty()
        || rest
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    host_ok && port_ok
}

/// `[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`
fn is_domain_component(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

/// `[\w][\w.-]{0,127}`
fn is_tag(s: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && word(bytes[0])
        && bytes.iter().all(|b| word(*b) || *b == b'.' || *b == b'-')
}

/// `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
fn is_digest_syntax(s: &str) -> bool {
    let Some((algorithm, hex)) = s.split_once(':') else {
        return false;
    };
    let algorithm_ok = algorithm.split(['-', '_', '+', '.']).all(|part| {
        let bytes = part.as_bytes();
        !bytes.is_empty()
            && bytes[0].is_ascii_alphabetic()
            && bytes.iter().all(u8::is_ascii_alphanumeric)
    });
    algorithm_ok && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// go-digest's `Validate`: a known algorithm and its exact hex length.
fn validate_digest(digest: &str) -> Result<(), ImageReferenceError> {
    let (algorithm, hex) = digest
        .split_once(':')
        .ok_or(ImageReferenceError::InvalidDigest)?;
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ImageReferenceError::UnsupportedDigest),
    };
    if hex.len() != length
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(ImageReferenceError::InvalidDigest);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn real_references_are_valid() {
        for ok in [
            "quay.io/community-operator-pipeline-prod/kube-green:0.5.2",
            &format!("registry.redhat.io/openshift4/ose-secondary-scheduler-rhel9-operator@{SHA}"),
            &format!("quay.io/a/b:tag@{SHA}"),
            "busybox",
            "library/busybox:1.36",
            "localhost:5000/foo/bar",
            "localhost/foo",
            "[::1]:5000/foo",
            "my-registry.example.com:443/team__x/app-1.2_3:v1.0.0-rc.1",
            "a/b/c/d",
            "REGISTRY.example.com/foo",
        ] {
            assert_eq!(validate(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn invalid_references_are_refused() {
        for (bad, expected) in [
            (
                "quay.io/Foo/bar",
                ImageReferenceError::Uppercase {
                    name: "Foo/bar".into(),
                },
            ),
            (
                "Busybox",
                ImageReferenceError::Uppercase {
                    name: "library/Busybox".into(),
                },
            ),
            ("quay.io/foo/bar:", ImageReferenceError::Format),
            ("quay.io/foo//bar", ImageReferenceError::Format),
            ("quay.io/foo/bar:-tag", ImageReferenceError::Format),
            ("quay.io/foo/-bar", ImageReferenceError::Format),
            ("quay.io/foo/bar@sha256:abc", ImageReferenceError::Format),
            (
                "quay.io/foo/bar@md5:0123456789abcdef0123456789abcdef",
                ImageReferenceError::UnsupportedDigest,
            ),
            (
                "quay.io/foo/bar@sha256:0123456789abcdef0123456789abcdef",
                ImageReferenceError::InvalidDigest,
            ),
            (
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                ImageReferenceError::HexIdentifier {
                    reference: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
                        .into(),
                },
            ),
            ("quay.io/foo bar", ImageReferenceError::Format),
            ("quay.io:port/foo", ImageReferenceError::Format),
        ] {
            assert_eq!(validate(bad), Err(expected), "{bad}");
        }
        let long = format!("quay.io/{}", "a".repeat(250));
        assert_eq!(validate(&long), Err(ImageReferenceError::TooLong));
    }
}
