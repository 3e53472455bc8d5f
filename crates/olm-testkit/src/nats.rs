//! A private NATS server with JetStream, one per test that asks for it.

use std::{path::PathBuf, sync::Mutex, time::Duration};

use crate::{
    Error, assets,
    process::{Supervised, free_port, wait_for_port},
};

/// How long a NATS server may take to accept connections.
const NATS_START_TIMEOUT: Duration = Duration::from_secs(20);

/// A `nats-server` with JetStream on a loopback port, its store in a temporary
/// folder. It can be stopped and started again on the same port and store, to
/// test what happens to clients while NATS is away. Dropping it stops it.
#[derive(Debug)]
pub struct NatsServer {
    port: u16,
    dir: tempfile::TempDir,
    binary: PathBuf,
    /// Extra server configuration (an `authorization` block, say).
    config: Option<String>,
    process: Mutex<Option<Supervised>>,
}

impl NatsServer {
    /// Starts a new server and waits until it accepts connections.
    pub fn start() -> Result<NatsServer, Error> {
        let mut server = NatsServer::reserve()?;
        server.restart()?;
        Ok(server)
    }

    /// Starts a new server with `config` as its configuration file (for
    /// example the `authorization` block of `olm_bus::auth`), the port,
    /// store and JetStream still set on the command line.
    pub fn start_with_config(config: &str) -> Result<NatsServer, Error> {
        let mut server = NatsServer::reserve()?;
        server.config = Some(config.to_owned());
        server.restart()?;
        Ok(server)
    }

    /// Chooses a port and a store folder but does not start the server, for
    /// tests of clients that come up before NATS does.
    pub fn reserve() -> Result<NatsServer, Error> {
        let binary = assets::find("nats-server")?;
        let dir = tempfile::Builder::new()
            .prefix("olm-nats-")
            .tempdir()
            .map_err(|source| Error::io(std::env::temp_dir(), source))?;
        Ok(NatsServer {
            port: free_port()?,
            dir,
            binary,
            config: None,
            process: Mutex::new(None),
        })
    }

    /// The client URL, `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Stops the server, keeping its port and store for [`NatsServer::restart`].
    pub fn stop(&mut self) {
        let process = self.process.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(mut process) = process.take() {
            process.stop();
        }
    }

    /// Starts the server (again) on the same port and store, and waits until
    /// it accepts connections.
    pub fn restart(&mut self) -> Result<(), Error> {
        self.stop();
        let store = self.dir.path().join("jetstream");
        let args = vec![
            "--addr".to_owned(),
            "127.0.0.1".to_owned(),
            "--port".to_owned(),
            self.port.to_string(),
            "--jetstream".to_owned(),
            "--store_dir".to_owned(),
            store.display().to_string(),
            "--server_name".to_owned(),
            format!("olm-test-{}", self.port),
        ];
        let mut args = args;
        if let Some(config) = &self.config {
            let path = self.dir.path().join("nats-server.conf");
            std::fs::write(&path, config).map_err(|source| Error::io(path.clone(), source))?;
            args.push("--config".to_owned());
            args.push(path.display().to_string());
        }
        let log = self.dir.path().join("nats-server.log");
        let mut process = Supervised::spawn("nats-server", &self.binary, &args, &log, &[])?;
        wait_for_port(&mut process, self.port, NATS_START_TIMEOUT)?;
        *self.process.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(process);
        Ok(())
    }

    /// Whether the server is running.
    pub fn is_running(&self) -> bool {
        let mut process = self.process.lock().unwrap_or_else(|e| e.into_inner());
        match process.as_mut() {
            Some(process) => process.exited().is_none(),
            None => false,
        }
    }

    /// The server's log file.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("nats-server.log")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_stops_and_restarts_on_the_same_port() {
        let mut server = NatsServer::start().unwrap();
        let url = server.url();
        assert!(server.is_running());
        let port = server.port;
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
        server.stop();
        assert!(!server.is_running());
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
        server.restart().unwrap();
        assert_eq!(server.url(), url);
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    }

    #[test]
    fn a_reserved_server_is_not_running() {
        let server = NatsServer::reserve().unwrap();
        assert!(!server.is_running());
        assert!(std::net::TcpStream::connect(("127.0.0.1", server.port)).is_err());
    }
}
