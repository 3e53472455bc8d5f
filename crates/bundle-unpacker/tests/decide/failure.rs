//! Failure reasons of pull errors.

use bundle_unpacker::decide::failure::{
    self, DEADLINE_EXCEEDED, IMAGE_PULL_FAILED, INVALID_BUNDLE, MAX_FAILURE_MESSAGE_BYTES,
    TOO_LARGE, UNAUTHORIZED, from_pull_error,
};
use olm_oci::{Digest, Error, layer::ExtractError};

#[test]
fn pull_errors_map_to_reasons() {
    let digest = || Digest::of(b"layer");
    let url = || "http://registry.fixture/v2/x".to_owned();
    // (error, reason, transient)
    let cases: Vec<(Error, &str, bool)> = vec![
        (
            Error::NotFound {
                reference: "r/x:1".into(),
                url: url(),
            },
            IMAGE_PULL_FAILED,
            false,
        ),
        (
            Error::Unauthorized {
                url: url(),
                message: "401 Unauthorized: authentication required".into(),
            },
            UNAUTHORIZED,
            false,
        ),
        (
            Error::Status {
                url: url(),
                status: 503,
                body: "busy".into(),
            },
            IMAGE_PULL_FAILED,
            true,
        ),
        (
            Error::Status {
                url: url(),
                status: 429,
                body: "slow down".into(),
            },
            IMAGE_PULL_FAILED,
            true,
        ),
        (
            Error::Status {
                url: url(),
                status: 400,
                body: "bad".into(),
            },
            IMAGE_PULL_FAILED,
            false,
        ),
        (
            Error::BlobTooLarge {
                digest: digest(),
                limit: 1,
            },
            TOO_LARGE,
            false,
        ),
        (
            Error::ResponseTooLarge {
                url: url(),
                limit: 1,
            },
            TOO_LARGE,
            false,
        ),
        (
            Error::Extract {
                digest: digest(),
                source: ExtractError::TooManyEntries { limit: 1 },
            },
            TOO_LARGE,
            false,
        ),
        (
            Error::Extract {
                digest: digest(),
                source: ExtractError::CompressionRatio { limit: 100 },
            },
            TOO_LARGE,
            false,
        ),
        (
            Error::Extract {
                digest: digest(),
                source: ExtractError::UncompressedTooLarge { limit: 1 },
            },
            TOO_LARGE,
            false,
        ),
        (
            Error::Extract {
                digest: digest(),
                source: ExtractError::PathTraversal {
                    path: "../etc".into(),
                },
            },
            INVALID_BUNDLE,
            false,
        ),
        (
            Error::Extract {
                digest: digest(),
                source: ExtractError::LinkEscapes {
                    path: "a".into(),
                    target: "/etc".into(),
                },
            },
            INVALID_BUNDLE,
            false,
        ),
        (
            Error::NoPlatform {
                reference: "r/x:1".into(),
                platform: "linux/amd64".into(),
            },
            INVALID_BUNDLE,
            false,
        ),
        (
            Error::DigestMismatch {
                what: "blob".into(),
                expected: digest(),
                actual: Digest::of(b"other"),
            },
            IMAGE_PULL_FAILED,
            true,
        ),
    ];
    for (error, reason, transient) in cases {
        let failure = from_pull_error("registry.fixture/x:1", &error);
        assert_eq!(failure.reason, reason, "{error}");
        assert_eq!(failure.transient, transient, "{error}");
        // The registry's own words are kept.
        assert!(
            failure.message.contains(&error.to_string()),
            "{}",
            failure.message
        );
        assert!(failure.message.starts_with("pull registry.fixture/x:1: "));
    }
}

#[test]
fn messages_are_cut_on_a_character_boundary() {
    let long = "é".repeat(MAX_FAILURE_MESSAGE_BYTES);
    let cut = failure::truncate(long);
    assert!(cut.len() <= MAX_FAILURE_MESSAGE_BYTES);
    assert!(cut.len() >= MAX_FAILURE_MESSAGE_BYTES - 1);
    let f = failure::Failure::new(INVALID_BUNDLE, "x".repeat(5000));
    assert_eq!(f.message.len(), MAX_FAILURE_MESSAGE_BYTES);
}

#[test]
fn a_deadline_failure_says_where_the_deadline_comes_from() {
    let f = failure::deadline_exceeded("r/x:1", std::time::Duration::from_secs(600));
    assert_eq!(f.reason, DEADLINE_EXCEEDED);
    assert!(f.message.contains("600s"));
    assert!(
        f.message
            .contains("operatorframework.io/bundle-unpack-timeout")
    );
}

/// A registry that redirects every request back to itself, for ever.
async fn redirect_loop() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let location = format!("http://{host}/v2/loop");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let location = location.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer).await;
                let reply = format!(
                    "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    host
}

#[tokio::test]
async fn a_refused_redirect_is_not_retried_as_transient() {
    let host = redirect_loop().await;
    let client = olm_oci::Client::new(olm_oci::ClientOptions::default().plain_http(&host)).unwrap();
    let image = format!("{host}/fixture/bundle:v1");
    let reference = olm_oci::Reference::parse(&image).unwrap();
    let error = client.resolve(&reference).await.unwrap_err();
    assert!(matches!(error, Error::Http { .. }), "{error:?}");
    let failure = from_pull_error(&image, &error);
    assert_eq!(failure.reason, IMAGE_PULL_FAILED);
    assert!(!failure.transient, "{failure:?}");
}
