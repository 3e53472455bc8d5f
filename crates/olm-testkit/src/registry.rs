//! A private OCI distribution registry (Docker's `registry` v2) over plain HTTP
//! on loopback, for pushing and pulling test bundle and catalog images.

use std::{path::PathBuf, time::Duration};

use crate::{
    Error, assets,
    process::{Supervised, free_port, wait_for_port},
};

/// How long the registry may take to accept connections.
const REGISTRY_START_TIMEOUT: Duration = Duration::from_secs(20);

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
        let binary = assets::find("docker-registry").or_else(|_| assets::find("registry"))?;
        let dir = tempfile::Builder::new()
            .prefix("olm-registry-")
            .tempdir()
            .map_err(|source| Error::io(std::env::temp_dir(), source))?;
        let port = free_port()?;
        let config = dir.path().join("config.yml");
        let storage = dir.path().join("storage");
        let contents = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            storage.display()
        );
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
