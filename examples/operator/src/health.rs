//! The probe server the Deployment's liveness and readiness probes ask:
//! `/healthz` answers while the process serves, `/readyz` once every watch
//! has delivered its first list.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{Router, extract::State, http::StatusCode, routing::get};
use tokio::net::TcpListener;

use crate::Error;

/// Whether the operator is ready: its caches are warm. Clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the operator ready; it stays ready until the process ends.
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether [`Readiness::set_ready`] was called.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Serves `/healthz` and `/readyz` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    readiness: Readiness,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let router = Router::new()
        .route("/healthz", get(|| async { (StatusCode::OK, "ok\n") }))
        .route("/readyz", get(readyz))
        .with_state(readiness);
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(Error::Probes)
}

async fn readyz(State(readiness): State<Readiness>) -> (StatusCode, &'static str) {
    if readiness.is_ready() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not warm yet\n")
    }
}

#[cfg(test)]
mod tests {
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpStream,
        sync::oneshot,
    };

    use super::*;

    /// The status line of a plain HTTP/1.1 GET of `path`, as a kubelet probe
    /// sees it.
    async fn probe(address: std::net::SocketAddr, path: &str) -> String {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("send request");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .expect("read response");
        response.lines().next().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn probes_answer_alive_at_once_and_ready_once_caches_are_warm() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let readiness = Readiness::default();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, readiness.clone(), async {
            let _ = stopped.await;
        }));

        assert_eq!(probe(address, "/healthz").await, "HTTP/1.1 200 OK");
        assert_eq!(
            probe(address, "/readyz").await,
            "HTTP/1.1 503 Service Unavailable"
        );
        readiness.set_ready();
        assert_eq!(probe(address, "/readyz").await, "HTTP/1.1 200 OK");
        assert_eq!(probe(address, "/nothing").await, "HTTP/1.1 404 Not Found");

        stop.send(()).expect("server still running");
        server
            .await
            .expect("server task")
            .expect("server ends cleanly");
    }
}
