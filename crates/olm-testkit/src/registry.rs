//! A private OCI distribution registry (Docker's `registry` v2) over plain HTTP
//! on loopback, for pushing and pulling test bundle and catalog images.

use std::{path::PathBuf, time::Duration};

use crate::{
    Error, assets,
    process::{Supervised, free_port, wait_for_port},
};

/// How long the registry may take to accept connections.
const REGISTRY_START_TIMEOUT: Duration = Duration::from_secs(20);

/// The user name of [`Registry::start_with_basic_auth`].
pub const BASIC_AUTH_USER: &str = "olm-testkit";
/// The password of [`Registry::start_with_basic_auth`].
pub const BASIC_AUTH_PASSWORD: &str = "olm-testkit-password";
/// bcrypt of [`BASIC_AUTH_PASSWORD`] (cost 5), for the registry's htpasswd file.
const BASIC_AUTH_BCRYPT: &str = "$2a$05$fFpr6cIzU3UntQfmU8.Wrup6L.L0oJjuCrPPn73ZTBEHcnFZ.t3fS";

/// How clients must authenticate.
enum Auth<'a> {
    None,
    Basic,
    Token {
        realm: &'a str,
        service: &'a str,
        issuer: &'a str,
        root_cert_pem: &'a str,
    },
}

/// A running registry; dropping it stops it and deletes its storage.
#[derive(Debug)]
pub struct Registry {
    port: u16,
    dir: tempfile::TempDir,
    _process: Supervised,
}

impl Registry {
    /// Starts a new, empty registry and waits until it accepts connections.
    pub fn start() -> Result<Registry, Error> {
        Self::start_with(Auth::None, "127.0.0.1")
    }

    /// Starts a new, empty registry listening on `address` (for example
    /// `0.0.0.0`, so that pods on a real node reach it at the node's
    /// address, [`Registry::host_at`]) as well as on loopback.
    pub fn start_listening_on(address: &str) -> Result<Registry, Error> {
        Self::start_with(Auth::None, address)
    }

    /// Starts a registry that demands HTTP basic authentication (htpasswd)
    /// with [`BASIC_AUTH_USER`] and [`BASIC_AUTH_PASSWORD`].
    pub fn start_with_basic_auth() -> Result<Registry, Error> {
        Self::start_with(Auth::Basic, "127.0.0.1")
    }

    /// Starts a registry that demands bearer tokens (Docker's token
    /// authentication): clients are sent to `realm` for a JWT issued by
    /// `issuer` for `service`, signed by a key whose certificate chains to
    /// `root_cert_pem`.
    pub fn start_with_token_auth(
        realm: &str,
        service: &str,
        issuer: &str,
        root_cert_pem: &str,
    ) -> Result<Registry, Error> {
        Self::start_with(
            Auth::Token {
                realm,
                service,
                issuer,
                root_cert_pem,
            },
            "127.0.0.1",
        )
    }

    fn start_with(auth: Auth<'_>, address: &str) -> Result<Registry, Error> {
        let binary = assets::find("docker-registry").or_else(|_| assets::find("registry"))?;
        let dir = tempfile::Builder::new()
            .prefix("olm-registry-")
            .tempdir()
            .map_err(|source| Error::io(std::env::temp_dir(), source))?;
        let port = free_port()?;
        let config = dir.path().join("config.yml");
        let storage = dir.path().join("storage");
        let mut contents = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}:{port}\n",
            storage.display()
        );
        match auth {
            Auth::None => {}
            Auth::Basic => {
                let htpasswd = dir.path().join("htpasswd");
                std::fs::write(
                    &htpasswd,
                    format!("{BASIC_AUTH_USER}:{BASIC_AUTH_BCRYPT}\n"),
                )
                .map_err(|source| Error::io(&htpasswd, source))?;
                contents.push_str(&format!(
                    "auth:\n  htpasswd:\n    realm: olm-testkit\n    path: {}\n",
                    htpasswd.display()
                ));
            }
            Auth::Token {
                realm,
                service,
                issuer,
                root_cert_pem,
            } => {
                let bundle = dir.path().join("token-root.pem");
                std::fs::write(&bundle, root_cert_pem)
                    .map_err(|source| Error::io(&bundle, source))?;
                contents.push_str(&format!(
                    "auth:\n  token:\n    realm: {realm}\n    service: {service}\n    issuer: {issuer}\n    rootcertbundle: {}\n",
                    bundle.display()
                ));
            }
        }
        std::fs::write(&config, contents).map_err(|source| Error::io(&config, source))?;
        let log = dir.path().join("registry.log");
        let mut process = Supervised::spawn(
            "docker-registry",
            &binary,
            &["serve".to_owned(), config.display().to_string()],
            &log,
            &[],
        )?;
        wait_for_port(&mut process, port, REGISTRY_START_TIMEOUT)?;
        Ok(Registry {
            port,
            dir,
            _process: process,
        })
    }

    /// `127.0.0.1:<port>`, the host part of image references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `<ip>:<port>`: the host part of image references for clients that
    /// reach this machine at `ip` (a registry started with
    /// [`Registry::start_listening_on`]).
    pub fn host_at(&self, ip: &str) -> String {
        format!("{ip}:{}", self.port)
    }

    /// `http://127.0.0.1:<port>`, the base URL of the distribution API.
    pub fn url(&self) -> String {
        format!("http://{}", self.host())
    }

    /// The registry's log file.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("registry.log")
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    #[test]
    fn serves_the_distribution_api_base_endpoint() {
        let registry = Registry::start().unwrap();
        let mut stream = std::net::TcpStream::connect(registry.host()).unwrap();
        write!(
            stream,
            "GET /v2/ HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            registry.host()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(
            response.contains("Docker-Distribution-Api-Version: registry/2.0"),
            "{response}"
        );
    }
}
