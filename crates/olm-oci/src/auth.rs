//! Registry credentials and authentication challenges: Docker's
//! `config.json` (also the body of a `kubernetes.io/dockerconfigjson`
//! Secret, and the older `.dockercfg` map), and `WWW-Authenticate`
//! challenges (`Basic` and `Bearer` with realm, service and scope).

use std::collections::BTreeMap;

use base64::Engine as _;

/// Longest credentials document this crate parses.
pub const MAX_DOCKER_CONFIG_BYTES: usize = 1024 * 1024;
/// Longest `WWW-Authenticate` header this crate parses.
pub const MAX_CHALLENGE_HEADER_BYTES: usize = 8 * 1024;

/// Credentials for one registry.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A user name and password (or token used as password).
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// An identity (refresh) token, exchanged at the token endpoint.
    IdentityToken(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets are never printed.
        match self {
            Self::Basic { username, .. } => write!(f, "Basic({username}, ***)"),
            Self::IdentityToken(_) => f.write_str("IdentityToken(***)"),
        }
    }
}

impl Credentials {
    /// Basic credentials.
    pub fn basic(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self::Basic {
            username: username.into(),
            password: password.into(),
        }
    }

    /// The `Authorization: Basic …` value, if these are basic credentials.
    pub fn basic_header(&self) -> Option<String> {
        match self {
            Self::Basic { username, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
            )),
            Self::IdentityToken(_) => None,
        }
    }
}

/// Why a credentials document was refused.
#[derive(Debug, thiserror::Error)]
pub enum DockerConfigError {
    /// Larger than [`MAX_DOCKER_CONFIG_BYTES`].
    #[error("docker config is {size} bytes, more than the limit of {MAX_DOCKER_CONFIG_BYTES}")]
    TooLarge {
        /// Its size.
        size: usize,
    },
    /// Not JSON of the expected shape.
    #[error("docker config is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// An `auth` field that is not base64 of `user:password`.
    #[error("docker config entry for {registry:?}: auth is not base64 of user:password")]
    BadAuth {
        /// The entry's key.
        registry: String,
    },
}

/// Credentials by registry host, from one or more Docker config documents.
#[derive(Debug, Clone, Default)]
pub struct DockerConfig {
    by_host: BTreeMap<String, Credentials>,
}

#[derive(serde::Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: Option<BTreeMap<String, AuthEntry>>,
    #[serde(flatten)]
    legacy: BTreeMap<String, serde_json::Value>,
}

#[derive(serde::Deserialize, Default)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, rename = "identitytoken")]
    identity_token: Option<String>,
}

impl DockerConfig {
    /// Reads a `config.json` / `.dockerconfigjson` document (`{"auths":
    /// {...}}`) or a legacy `.dockercfg` (the map alone).
    pub fn parse(bytes: &[u8]) -> Result<Self, DockerConfigError> {
        if bytes.len() > MAX_DOCKER_CONFIG_BYTES {
            return Err(DockerConfigError::TooLarge { size: bytes.len() });
        }
        let file: ConfigFile = serde_json::from_slice(bytes)?;
        let entries: BTreeMap<String, AuthEntry> = match file.auths {
            Some(auths) => auths,
            None => file
                .legacy
                .into_iter()
                .filter_map(|(k, v)| serde_json::from_value(v).ok().map(|e| (k, e)))
                .collect(),
        };
        let mut config = Self::default();
        for (key, entry) in entries {
            let credentials = if let Some(auth) = entry.auth.filter(|a| !a.is_empty()) {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .ok()
                    .and_then(|d| String::from_utf8(d).ok())
                    .ok_or_else(|| DockerConfigError::BadAuth {
                        registry: key.clone(),
                    })?;
                let (username, password) =
                    decoded
                        .split_once(':')
                        .ok_or_else(|| DockerConfigError::BadAuth {
                            registry: key.clone(),
                        })?;
                Credentials::basic(username, password)
            } else if let Some(token) = entry.identity_token.filter(|t| !t.is_empty()) {
                Credentials::IdentityToken(token)
            } else if let (Some(username), Some(password)) = (entry.username, entry.password) {
                Credentials::basic(username, password)
            } else {
                continue;
            };
            config.by_host.insert(normalize_host(&key), credentials);
        }
        Ok(config)
    }

    /// Adds credentials for `host`, replacing any.
    pub fn insert(&mut self, host: &str, credentials: Credentials) {
        self.by_host.insert(normalize_host(host), credentials);
    }

    /// Adds every entry of `other`, which wins on conflicts.
    pub fn merge(&mut self, other: DockerConfig) {
        self.by_host.extend(other.by_host);
    }

    /// The credentials for a registry (as named in a reference), if any.
    pub fn for_registry(&self, registry: &str) -> Option<&Credentials> {
        self.by_host.get(&normalize_host(registry))
    }

    /// Whether there are no credentials.
    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty()
    }
}

/// Reduces a config key (`https://index.docker.io/v1/`, `quay.io`,
/// `http://127.0.0.1:5000/v2`) to the registry name used in references.
fn normalize_host(key: &str) -> String {
    let key = key.trim();
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = without_scheme.split('/').next().unwrap_or_default();
    let host = host.to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "docker.io".to_owned()
        }
        _ => host,
    }
}

/// One authentication challenge from a `WWW-Authenticate` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The scheme, lowercase (`basic`, `bearer`).
    pub scheme: String,
    /// Its parameters, keys lowercase.
    pub params: BTreeMap<String, String>,
}

impl Challenge {
    /// A parameter's value.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }
}

/// Why a challenge header could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChallengeError {
    /// Longer than [`MAX_CHALLENGE_HEADER_BYTES`].
    #[error("WWW-Authenticate header is longer than {MAX_CHALLENGE_HEADER_BYTES} bytes")]
    TooLong,
    /// Not `scheme k=v, ...`.
    #[error("malformed WWW-Authenticate header at byte {at}")]
    Malformed {
        /// Where parsing stopped.
        at: usize,
    },
}

/// Parses a `WWW-Authenticate` header into its challenges (RFC 7235:
/// `scheme param=value, param="quoted \"value\"", scheme2 ...`).
pub fn parse_challenges(header: &str) -> Result<Vec<Challenge>, ChallengeError> {
    if header.len() > MAX_CHALLENGE_HEADER_BYTES {
        return Err(ChallengeError::TooLong);
    }
    let bytes = header.as_bytes();
    let mut i = 0;
    let mut challenges: Vec<Challenge> = Vec::new();
    let skip_ws = |i: &mut usize| {
        while *i < bytes.len() && (bytes[*i] == b' ' || bytes[*i] == b'\t' || bytes[*i] == b',') {
            *i += 1;
        }
    };
    let is_token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    loop {
        skip_ws(&mut i);
        if i >= bytes.len() {
            break;
        }
        let start = i;
        while i < bytes.len() && is_token(bytes[i]) {
            i += 1;
        }
        if start == i {
            return Err(ChallengeError::Malformed { at: i });
        }
        let word = header[start..i].to_ascii_lowercase();
        // A word followed by '=' is a parameter of the current challenge;
        // otherwise it starts a new challenge.
        let mut j = i;
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        if j < bytes.len() && bytes[j] == b'=' {
            let challenge = challenges
                .last_mut()
                .ok_or(ChallengeError::Malformed { at: start })?;
            i = j + 1;
            while i < bytes.len() && bytes[i] == b' ' {
                i += 1;
            }
            let value = if i < bytes.len() && bytes[i] == b'"' {
                i += 1;
                let mut value = String::new();
                loop {
                    let Some(&b) = bytes.get(i) else {
                        return Err(ChallengeError::Malformed { at: i });
                    };
                    match b {
                        b'"' => {
                            i += 1;
                            break;
                        }
                        b'\\' => {
                            let next = header[i + 1..]
                                .chars()
                                .next()
                                .ok_or(ChallengeError::Malformed { at: i })?;
                            value.push(next);
                            i += 1 + next.len_utf8();
                        }
                        _ => {
                            let c = header[i..].chars().next().unwrap_or('\u{fffd}');
                            value.push(c);
                            i += c.len_utf8();
                        }
                    }
                }
                value
            } else {
                let vstart = i;
                while i < bytes.len() && bytes[i] != b',' && bytes[i] != b' ' {
                    i += 1;
                }
                header[vstart..i].to_owned()
            };
            challenge.params.insert(word, value);
        } else {
            challenges.push(Challenge {
                scheme: word,
                params: BTreeMap::new(),
            });
        }
    }
    Ok(challenges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_and_basic_challenges() {
        let c = parse_challenges(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull""#,
        )
        .unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].scheme, "bearer");
        assert_eq!(c[0].param("realm"), Some("https://auth.docker.io/token"));
        assert_eq!(c[0].param("service"), Some("registry.docker.io"));
        assert_eq!(c[0].param("scope"), Some("repository:library/busybox:pull"));

        let c = parse_challenges(r#"Basic realm="Registry Realm", Bearer realm=x,scope="a\"b""#)
            .unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].scheme, "basic");
        assert_eq!(c[0].param("realm"), Some("Registry Realm"));
        assert_eq!(c[1].param("realm"), Some("x"));
        assert_eq!(c[1].param("scope"), Some("a\"b"));
    }

    #[test]
    fn refuses_malformed_challenges() {
        for bad in [
            "realm=\"x\"",
            "Bearer realm=\"unterminated",
            "Bearer realm=\"x\\",
            "=",
            "Bearer \u{0}",
        ] {
            assert!(parse_challenges(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_challenges(&"a".repeat(MAX_CHALLENGE_HEADER_BYTES + 1)),
            Err(ChallengeError::TooLong)
        );
        assert_eq!(parse_challenges("").unwrap(), vec![]);
    }

    #[test]
    fn reads_docker_config_and_dockerconfigjson_bodies() {
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cr:et");
        let json = format!(
            r#"{{"auths":{{
                "https://index.docker.io/v1/":{{"auth":"{auth}"}},
                "quay.io":{{"username":"bob","password":"pw"}},
                "http://127.0.0.1:5000/v2/":{{"identitytoken":"tok"}},
                "empty.example":{{}}
            }}}}"#
        );
        let config = DockerConfig::parse(json.as_bytes()).unwrap();
        assert_eq!(
            config.for_registry("docker.io"),
            Some(&Credentials::basic("alice", "s3cr:et"))
        );
        assert_eq!(
            config.for_registry("quay.io"),
            Some(&Credentials::basic("bob", "pw"))
        );
        assert_eq!(
            config.for_registry("127.0.0.1:5000"),
            Some(&Credentials::IdentityToken("tok".into()))
        );
        assert_eq!(config.for_registry("empty.example"), None);
        assert!(!format!("{config:?}").contains("pw"));

        let legacy = format!(r#"{{"quay.io":{{"auth":"{auth}","email":"x"}}}}"#);
        let config = DockerConfig::parse(legacy.as_bytes()).unwrap();
        assert!(config.for_registry("quay.io").is_some());
    }

    #[test]
    fn refuses_bad_docker_configs() {
        assert!(matches!(
            DockerConfig::parse(br#"{"auths":{"q.io":{"auth":"!!!"}}}"#),
            Err(DockerConfigError::BadAuth { .. })
        ));
        let no_colon = base64::engine::general_purpose::STANDARD.encode("nocolon");
        assert!(
            DockerConfig::parse(
                format!(r#"{{"auths":{{"q.io":{{"auth":"{no_colon}"}}}}}}"#).as_bytes()
            )
            .is_err()
        );
        assert!(DockerConfig::parse(b"[1,2]").is_err());
        assert!(DockerConfig::parse(b"{").is_err());
        let huge = vec![b' '; MAX_DOCKER_CONFIG_BYTES + 1];
        assert!(matches!(
            DockerConfig::parse(&huge),
            Err(DockerConfigError::TooLarge { .. })
        ));
    }
}
