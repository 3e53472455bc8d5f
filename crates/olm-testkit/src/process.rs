//! Server processes that stop when the test process goes away.
//!
//! Each server runs under a guardian `sh` whose standard input is a pipe from
//! the test process. When that pipe closes (the test binary exited, panicked
//! out of `main`, or was killed), the guardian stops the server. The guardian
//! also exits when the server exits on its own, so start-up failures are seen.

use std::{
    fs::File,
    io::{BufRead, BufReader},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use crate::Error;

/// The guardian script. `$1...` is the server command line; `$OLM_PIDFILE`
/// receives the server's pid so a stuck server can be killed hard.
const GUARDIAN: &str = r#"
exec 3<&0
"$@" </dev/null &
child=$!
echo "$child" > "$OLM_PIDFILE"
( read -r _ <&3; kill "$child" 2>/dev/null ) &
watcher=$!
wait "$child"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"#;

/// How long a stopping server may take before it is killed hard.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A server process under a guardian: it stops when this value is dropped,
/// and also when the process that started it dies, however it dies
/// (`cargo xtask dev` runs OLM's services on the host this way).
#[derive(Debug)]
pub struct Supervised {
    name: String,
    guardian: Child,
    lifeline: Option<ChildStdin>,
    pidfile: PathBuf,
    log: PathBuf,
}

impl Supervised {
    /// Starts `program args...` with stdout and stderr appended to `log`.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        env: &[(&str, &str)],
    ) -> Result<Self, Error> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| Error::io(log, source))?;
        let err = out.try_clone().map_err(|source| Error::io(log, source))?;
        let pidfile = log.with_extension("pid");
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARDIAN)
            .arg("olm-testkit-guardian")
            .arg(program)
            .args(args)
            .env("OLM_PIDFILE", &pidfile)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut guardian = command.spawn().map_err(|source| Error::Spawn {
            name: name.to_owned(),
            source,
        })?;
        let lifeline = guardian.stdin.take();
        Ok(Supervised {
            name: name.to_owned(),
            guardian,
            lifeline,
            pidfile,
            log: log.to_owned(),
        })
    }

    /// The component's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Whether the server has exited, and how.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.guardian.try_wait().ok().flatten()
    }

    /// The server's process id, once its guardian has started it.
    pub fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(&self.pidfile)
            .ok()
            .and_then(|pid| pid.trim().parse().ok())
    }

    /// An error for a server that exited while it was awaited.
    pub(crate) fn exited_error(&self, status: ExitStatus) -> Error {
        Error::Exited {
            name: self.name.clone(),
            status: status.to_string(),
            log_tail: log_tail(&self.log, 30),
        }
    }

    /// Stops the server (SIGTERM, then SIGKILL after a grace period) and waits.
    pub fn stop(&mut self) {
        drop(self.lifeline.take());
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(pid) = std::fs::read_to_string(&self.pidfile) {
            let _ = Command::new("kill").arg("-9").arg(pid.trim()).status();
        }
        let _ = self.guardian.kill();
        let _ = self.guardian.wait();
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last `lines` lines of a log file, for error messages.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let all: Vec<String> = BufReader::new(file).lines().map_while(Result::ok).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> Result<u16, Error> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|source| Error::io("127.0.0.1:0", source))?;
    let port = listener
        .local_addr()
        .map_err(|source| Error::io("127.0.0.1:0", source))?
        .port();
    Ok(port)
}

/// Waits until something accepts TCP connections on `port`, or the process
/// exits, or `timeout` passes.
pub(crate) fn wait_for_port(
    process: &mut Supervised,
    port: u16,
    timeout: Duration,
) -> Result<(), Error> {
    let started = Instant::now();
    let mut last_error = String::from("never tried");
    while started.elapsed() < timeout {
        if let Some(status) = process.exited() {
            return Err(process.exited_error(status));
        }
        match std::net::TcpStream::connect_timeout(
            &([127, 0, 0, 1], port).into(),
            Duration::from_millis(200),
        ) {
            Ok(_) => return Ok(()),
            Err(err) => last_error = err.to_string(),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(Error::NotReady {
        name: process.name().to_owned(),
        waited_secs: timeout.as_secs(),
        last_error,
        log: process.log().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_exits_at_once_is_reported_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("false.log");
        let mut process = Supervised::spawn(
            "exits",
            Path::new("sh"),
            &["-c".into(), "echo boom-marker >&2; exit 3".into()],
            &log,
            &[],
        )
        .unwrap();
        let err =
            wait_for_port(&mut process, free_port().unwrap(), Duration::from_secs(10)).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("boom-marker"), "{message}");
        assert!(message.contains("exit status: 3"), "{message}");
    }

    #[test]
    fn closing_the_lifeline_stops_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sleep.log");
        let mut process =
            Supervised::spawn("sleeper", Path::new("sleep"), &["600".into()], &log, &[]).unwrap();
        assert!(process.exited().is_none());
        let started = Instant::now();
        process.stop();
        assert!(process.exited().is_some());
        assert!(
            started.elapsed() < STOP_GRACE,
            "stop took {:?}",
            started.elapsed()
        );
        let pid = std::fs::read_to_string(log.with_extension("pid")).unwrap();
        let alive = Command::new("kill")
            .arg("-0")
            .arg(pid.trim())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(!alive.success(), "server pid {pid} still alive");
    }
}
