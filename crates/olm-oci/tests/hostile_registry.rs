//! olm-oci against small misbehaving registries on loopback, written as raw
//! HTTP so that they can misbehave: an error body that never ends, error
//! pages that are not the registry's own words (from the registry or its
//! token endpoint), redirects to another port and redirect loops, and
//! replies larger than the client's named limits.
#![allow(clippy::unwrap_used)]

use std::{
    future::Future,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use olm_oci::{
    Client, ClientOptions, Digest, Error, Reference,
    client::{MAX_CONFIG_BYTES, MAX_ERROR_BODY_BYTES, MAX_REDIRECTS, MAX_TOKEN_RESPONSE_BYTES},
    manifest::{Descriptor, MAX_MANIFEST_BYTES, OCI_CONFIG, OCI_MANIFEST},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// Longest a test waits for the client; far below the client's own request
/// timeout, so a client that keeps reading fails the test instead of
/// hanging it.
const TEST_DEADLINE: Duration = Duration::from_secs(30);

/// Serves every connection on a loopback port with `answer`, given the
/// request's path once its head has been read; returns the address.
async fn serve<F, Fut>(answer: F) -> SocketAddr
where
    F: Fn(String, TcpStream) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                answer(path, stream).await;
            });
        }
    });
    addr
}

/// A whole reply with a `Content-Length` body; the connection is closed
/// after it.
async fn reply(mut stream: TcpStream, status: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
    let _ = stream.shutdown().await;
}

/// How an oversized reply announces its length.
#[derive(Debug, Clone, Copy)]
enum Framing {
    /// A `Content-Length` over the limit, so the client can refuse before
    /// reading.
    Declared,
    /// Chunked with no length, so the client must count as it reads.
    Chunked,
}

/// A 200 reply of more than `limit` bytes framed as `framing`; a chunked
/// body never ends, so only a client that stops reading finishes.
async fn oversized_reply(mut stream: TcpStream, framing: Framing, limit: usize) {
    let length = match framing {
        Framing::Declared => format!("Content-Length: {}", limit + 1),
        Framing::Chunked => "Transfer-Encoding: chunked".to_owned(),
    };
    let head = format!("HTTP/1.1 200 OK\r\n{length}\r\nConnection: close\r\n\r\n");
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let chunk = vec![b' '; 64 * 1024];
    match framing {
        Framing::Declared => {
            let _ = stream.write_all(&vec![b' '; limit + 1]).await;
        }
        Framing::Chunked => {
            let framed = [
                format!("{:x}\r\n", chunk.len()).into_bytes(),
                chunk,
                b"\r\n".to_vec(),
            ]
            .concat();
            while stream.write_all(&framed).await.is_ok() {}
        }
    }
    let _ = stream.shutdown().await;
}

/// Asserts `error` is the named too-large error for `limit`.
fn assert_too_large(error: &Error, limit: usize, framing: Framing) {
    match error {
        Error::ResponseTooLarge { limit: named, .. } => {
            assert_eq!(*named, limit as u64, "{framing:?}: {error}");
            assert!(
                error
                    .to_string()
                    .ends_with(&format!("response larger than the limit of {limit} bytes")),
                "{framing:?}: {error}"
            );
        }
        other => panic!("{framing:?}: expected ResponseTooLarge, got {other}"),
    }
}

fn client_for(addr: SocketAddr) -> Client {
    Client::new(ClientOptions::default().plain_http(addr.to_string())).unwrap()
}

fn reference_on(addr: SocketAddr) -> Reference {
    Reference::parse(&format!("{addr}/olm/hostile:v1")).unwrap()
}

fn descriptor_of(content: &[u8]) -> Descriptor {
    Descriptor {
        media_type: "application/octet-stream".into(),
        digest: Digest::of(content),
        size: content.len() as u64,
        platform: None,
        annotations: Default::default(),
    }
}

#[tokio::test]
async fn an_endless_error_body_is_read_only_up_to_the_limit() {
    let written = Arc::new(AtomicU64::new(0));
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let done_tx = Arc::new(std::sync::Mutex::new(Some(done_tx)));
    let addr = {
        let written = written.clone();
        serve(move |_path, mut stream| {
            let written = written.clone();
            let done_tx = done_tx.clone();
            async move {
                let head = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\n\
                            Transfer-Encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![b'A'; 64 * 1024];
                let framed = [
                    format!("{:x}\r\n", chunk.len()).into_bytes(),
                    chunk,
                    b"\r\n".to_vec(),
                ]
                .concat();
                // Until the client hangs up.
                while stream.write_all(&framed).await.is_ok() {
                    written.fetch_add(framed.len() as u64, Ordering::SeqCst);
                }
                if let Some(tx) = done_tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
            }
        })
        .await
    };
    let client = client_for(addr);
    let error = tokio::time::timeout(TEST_DEADLINE, client.fetch_manifest(&reference_on(addr)))
        .await
        .expect("the client stops reading the error body")
        .unwrap_err();
    match &error {
        Error::Status { status, body, .. } => {
            assert_eq!(*status, 500);
            assert_eq!(
                body,
                &format!("reply of more than {MAX_ERROR_BODY_BYTES} bytes, not read further")
            );
        }
        other => panic!("expected a status error, got {other}"),
    }
    // The client hung up: the server's writes fail soon after, having
    // filled at most the socket buffers beyond what the client read.
    tokio::time::timeout(TEST_DEADLINE, done_rx)
        .await
        .expect("the connection is closed")
        .unwrap();
    let written = written.load(Ordering::SeqCst);
    assert!(written < 64 * 1024 * 1024, "{written} bytes were sent");
}

/// What a proxy in front of a registry may answer: not the registry's
/// words, and nothing to show a user.
const PROXY_PAGE: &[u8] =
    b"<html><body><h1>502</h1><a href=\"http://phish.example\">log in</a></body></html>";

#[tokio::test]
async fn error_pages_are_summarised_and_registry_errors_quoted() {
    let addr = serve(|path, stream| async move {
        if path.contains("/manifests/") {
            reply(
                stream,
                "502 Bad Gateway",
                &[("Content-Type", "text/html")],
                PROXY_PAGE,
            )
            .await;
        } else {
            let body = br#"{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}"#;
            reply(
                stream,
                "403 Forbidden",
                &[("Content-Type", "application/json")],
                body,
            )
            .await;
        }
    })
    .await;
    let client = client_for(addr);
    let reference = reference_on(addr);

    let error = client.fetch_manifest(&reference).await.unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::Status { status: 502, .. }), "{text}");
    assert!(
        text.ends_with(&format!("non-JSON reply of {} bytes", PROXY_PAGE.len())),
        "{text}"
    );
    assert!(!text.contains("phish"), "{text}");

    let error = client
        .fetch_blob(&reference, &descriptor_of(b"x"), 1024)
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::Unauthorized { .. }), "{text}");
    assert!(
        text.ends_with("403 Forbidden: DENIED: requested access to the resource is denied"),
        "{text}"
    );
}

#[tokio::test]
async fn redirects_to_another_port_are_followed() {
    let content = Bytes::from_static(b"layer bytes kept on a blob store");
    let blob_store = {
        let content = content.clone();
        serve(move |path, stream| {
            let content = content.clone();
            async move {
                if path == "/store/blob" {
                    reply(stream, "200 OK", &[], &content).await;
                } else {
                    reply(stream, "404 Not Found", &[], b"").await;
                }
            }
        })
        .await
    };
    let location = format!("http://{blob_store}/store/blob");
    let registry = serve(move |_path, stream| {
        let location = location.clone();
        async move {
            reply(
                stream,
                "307 Temporary Redirect",
                &[("Location", &location)],
                b"",
            )
            .await;
        }
    })
    .await;
    let client = client_for(registry);
    let fetched = client
        .fetch_blob(&reference_on(registry), &descriptor_of(&content), 1024)
        .await
        .unwrap();
    assert_eq!(fetched, content);
}

#[tokio::test]
async fn redirect_loops_stop_at_the_limit() {
    let requests = Arc::new(AtomicUsize::new(0));
    let addr = {
        let requests = requests.clone();
        serve(move |path, stream| {
            let n = requests.fetch_add(1, Ordering::SeqCst);
            async move {
                let location = format!("{}?hop={n}", path.split('?').next().unwrap_or("/"));
                reply(stream, "302 Found", &[("Location", &location)], b"").await;
            }
        })
        .await
    };
    let client = client_for(addr);
    let error = tokio::time::timeout(
        TEST_DEADLINE,
        client.fetch_blob(&reference_on(addr), &descriptor_of(b"x"), 1024),
    )
    .await
    .expect("the loop ends")
    .unwrap_err();
    assert!(matches!(error, Error::Http { .. }), "{error}");
    // The first request and each redirect followed.
    assert_eq!(requests.load(Ordering::SeqCst), MAX_REDIRECTS + 1);
}

#[tokio::test]
async fn token_endpoint_text_is_not_quoted() {
    let addr = Arc::new(std::sync::OnceLock::<SocketAddr>::new());
    let registry = {
        let addr = addr.clone();
        serve(move |path, stream| {
            let realm = format!("http://{}/token", addr.get().unwrap());
            async move {
                if path.starts_with("/token") {
                    // Valid JSON, but a string where an object belongs.
                    reply(stream, "200 OK", &[], br#""visit http://phish.example""#).await;
                } else {
                    let challenge = format!(r#"Bearer realm="{realm}",service="hostile""#);
                    reply(
                        stream,
                        "401 Unauthorized",
                        &[("WWW-Authenticate", &challenge)],
                        b"",
                    )
                    .await;
                }
            }
        })
        .await
    };
    addr.set(registry).unwrap();
    let error = client_for(registry)
        .fetch_manifest(&reference_on(registry))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::Protocol { .. }), "{text}");
    assert!(text.contains("token response of 28 bytes"), "{text}");
    assert!(!text.contains("phish"), "{text}");
}

#[tokio::test]
async fn manifests_over_the_limit_are_refused() {
    for framing in [Framing::Declared, Framing::Chunked] {
        let addr = serve(move |_path, stream| async move {
            oversized_reply(stream, framing, MAX_MANIFEST_BYTES).await;
        })
        .await;
        let error = tokio::time::timeout(
            TEST_DEADLINE,
            client_for(addr).fetch_manifest(&reference_on(addr)),
        )
        .await
        .expect("the client stops reading the manifest")
        .unwrap_err();
        assert_too_large(&error, MAX_MANIFEST_BYTES, framing);
    }
}

#[tokio::test]
async fn token_responses_over_the_limit_are_refused() {
    for framing in [Framing::Declared, Framing::Chunked] {
        let addr = Arc::new(std::sync::OnceLock::<SocketAddr>::new());
        let registry = {
            let addr = addr.clone();
            serve(move |path, stream| {
                let realm = format!("http://{}/token", addr.get().unwrap());
                async move {
                    if path.starts_with("/token") {
                        oversized_reply(stream, framing, MAX_TOKEN_RESPONSE_BYTES).await;
                    } else {
                        let challenge = format!(r#"Bearer realm="{realm}",service="hostile""#);
                        reply(
                            stream,
                            "401 Unauthorized",
                            &[("WWW-Authenticate", &challenge)],
                            b"",
                        )
                        .await;
                    }
                }
            })
            .await
        };
        addr.set(registry).unwrap();
        let error = tokio::time::timeout(
            TEST_DEADLINE,
            client_for(registry).fetch_manifest(&reference_on(registry)),
        )
        .await
        .expect("the client stops reading the token response")
        .unwrap_err();
        assert_too_large(&error, MAX_TOKEN_RESPONSE_BYTES, framing);
        assert!(error.to_string().contains("/token"), "{error}");
    }
}

#[tokio::test]
async fn configs_declared_over_the_limit_are_not_fetched() {
    let config_digest = Digest::of(b"a config that is never served");
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": OCI_CONFIG,
            "digest": config_digest.to_string(),
            "size": MAX_CONFIG_BYTES + 1,
        },
        "layers": [],
    })
    .to_string();
    let blob_requests = Arc::new(AtomicUsize::new(0));
    let addr = {
        let blob_requests = blob_requests.clone();
        serve(move |path, stream| {
            let manifest = manifest.clone();
            let blob_requests = blob_requests.clone();
            async move {
                if path.contains("/manifests/") {
                    reply(
                        stream,
                        "200 OK",
                        &[("Content-Type", OCI_MANIFEST)],
                        manifest.as_bytes(),
                    )
                    .await;
                } else {
                    blob_requests.fetch_add(1, Ordering::SeqCst);
                    oversized_reply(stream, Framing::Chunked, MAX_CONFIG_BYTES as usize).await;
                }
            }
        })
        .await
    };
    let error = tokio::time::timeout(
        TEST_DEADLINE,
        client_for(addr).pull_manifest(&reference_on(addr)),
    )
    .await
    .expect("the client refuses the config")
    .unwrap_err();
    match &error {
        Error::BlobTooLarge { digest, limit } => {
            assert_eq!(digest, &config_digest);
            assert_eq!(*limit, MAX_CONFIG_BYTES);
        }
        other => panic!("expected BlobTooLarge, got {other}"),
    }
    assert!(
        error.to_string().ends_with(&format!(
            "larger than the limit of {MAX_CONFIG_BYTES} bytes"
        )),
        "{error}"
    );
    assert_eq!(blob_requests.load(Ordering::SeqCst), 0);
}
