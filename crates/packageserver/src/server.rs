//! The HTTPS listener: TLS with the hot-swapped certificate and optional
//! client certificates, HTTP/1.1 and HTTP/2, each connection's client
//! certificates handed to the request handler.

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use axum::body::Body;
use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::{
    api::{self, App},
    auth::PeerCertificates,
};

/// Deadline of a TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long open connections may finish their requests at shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `stop`.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Arc<App>,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "serving packages.operators.coreos.com/v1");
    }
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            accepted = listener.accept() => accepted,
        };
        let (tcp, remote) = match accepted {
            Ok(pair) => pair,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        tokio::spawn(connection(
            acceptor.clone(),
            tcp,
            remote,
            Arc::clone(&app),
            stop.clone(),
        ));
    }
}

async fn connection(
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    remote: SocketAddr,
    app: Arc<App>,
    stop: CancellationToken,
) {
    let _ = tcp.set_nodelay(true);
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%remote, %error, "tls handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%remote, "tls handshake timed out");
            return;
        }
    };
    let peer = PeerCertificates(Arc::new(
        tls.get_ref()
            .1
            .peer_certificates()
            .map(|chain| chain.iter().map(|c| c.clone().into_owned()).collect())
            .unwrap_or_default(),
    ));
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(peer.clone());
        let app = Arc::clone(&app);
        async move { Ok::<_, Infallible>(api::handle(app, request.map(Body::new)).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%remote, %error, "connection ended with an error");
            }
        }
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, conn).await;
        }
    }
}
