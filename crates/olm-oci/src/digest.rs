//! Content digests (`sha256:<64 lowercase hex>`), the only algorithm this
//! client computes and verifies.

use std::{fmt, str::FromStr};

use sha2::{Digest as _, Sha256};

/// The prefix of every digest this crate produces.
pub const SHA256_PREFIX: &str = "sha256:";

/// Length of the hex part of a sha256 digest.
const SHA256_HEX_LEN: usize = 64;

/// A verified `sha256:` digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

/// Why a digest string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid digest {value:?}: expected sha256:<64 lowercase hex digits>")]
pub struct DigestError {
    /// What was given (cut to 100 characters).
    pub value: String,
}

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self::from_hasher(Sha256::new_with_prefix(bytes))
    }

    /// The digest accumulated by `hasher`.
    pub fn from_hasher(hasher: Sha256) -> Self {
        let out = hasher.finalize();
        let mut text = String::with_capacity(SHA256_PREFIX.len() + SHA256_HEX_LEN);
        text.push_str(SHA256_PREFIX);
        for byte in out {
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        Self(text)
    }

    /// The digest as text, `sha256:…`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The hex part.
    pub fn hex(&self) -> &str {
        &self.0[SHA256_PREFIX.len()..]
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl FromStr for Digest {
    type Err = DigestError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let valid = value.strip_prefix(SHA256_PREFIX).is_some_and(|hex| {
            hex.len() == SHA256_HEX_LEN
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if valid {
            Ok(Self(value.to_owned()))
        } else {
            Err(DigestError {
                value: value.chars().take(100).collect(),
            })
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_of_empty_input_is_the_well_known_one() {
        assert_eq!(
            Digest::of(b"").as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn parses_and_refuses() {
        let good = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(good.parse::<Digest>().unwrap().as_str(), good);
        for bad in [
            "",
            "sha256:",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
            "sha256:../../../../etc/passwd/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ] {
            assert!(bad.parse::<Digest>().is_err(), "{bad}");
        }
    }
}
