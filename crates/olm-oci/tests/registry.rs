//! olm-oci against the real docker-registry on loopback: push a built
//! image, resolve it, pull it back into memory and into a directory, skip
//! blobs the registry has, detect tampering, pull a base image whole and
//! build on it, and authenticate with basic credentials through the
//! registry's challenge.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use olm_oci::{
    Client, ClientOptions, Credentials, Digest, DockerConfig, Error, ExtractOptions, ImageBuilder,
    Reference,
    manifest::{Descriptor, Manifest},
};
use olm_testkit::registry::{BASIC_AUTH_PASSWORD, BASIC_AUTH_USER, Registry};

fn client_for(registry: &Registry) -> Client {
    Client::new(ClientOptions::default().plain_http(registry.host())).unwrap()
}

fn sample_image() -> olm_oci::BuiltImage {
    ImageBuilder::new()
        .label("operators.operatorframework.io.bundle.package.v1", "sample")
        .add_file(
            "manifests/sample.clusterserviceversion.yaml",
            b"kind: ClusterServiceVersion\n".to_vec(),
        )
        .unwrap()
        .add_file("metadata/annotations.yaml", b"annotations: {}\n".to_vec())
        .unwrap()
        .add_file("other/ignored.txt", b"x".to_vec())
        .unwrap()
        .build()
        .unwrap()
}

#[tokio::test]
async fn push_resolve_and_pull_round_trip() {
    let registry = Registry::start().unwrap();
    let client = client_for(&registry);
    let reference = Reference::parse(&format!("{}/olm/sample-bundle:v1", registry.host())).unwrap();
    let image = sample_image();

    let digest = client.push_image(&reference, &image).await.unwrap();
    assert_eq!(digest, image.manifest_digest);
    assert_eq!(client.resolve(&reference).await.unwrap(), digest);

    // Pushing again uploads nothing: every blob is already there.
    assert!(
        !client
            .push_blob(&reference, image.layer.clone())
            .await
            .unwrap()
    );
    assert!(
        client
            .blob_exists(&reference, &image.parsed.layers[0].digest)
            .await
            .unwrap()
    );

    let pulled = client
        .pull_to_memory(
            &reference,
            &ExtractOptions::only(&["manifests", "metadata"]),
        )
        .await
        .unwrap();
    assert_eq!(pulled.manifest.digest, digest);
    assert_eq!(
        pulled.manifest.labels()["operators.operatorframework.io.bundle.package.v1"],
        "sample"
    );
    assert_eq!(
        pulled.files.keys().collect::<Vec<_>>(),
        [
            "manifests/sample.clusterserviceversion.yaml",
            "metadata/annotations.yaml"
        ]
    );

    // By digest, into a directory.
    let pinned =
        Reference::parse(&format!("{}/olm/sample-bundle@{digest}", registry.host())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    client
        .pull_to_dir(&pinned, dir.path(), &ExtractOptions::default())
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("metadata/annotations.yaml")).unwrap(),
        b"annotations: {}\n"
    );
    assert!(dir.path().join("other/ignored.txt").exists());
}

#[tokio::test]
async fn index_manifests_resolve_to_the_platform_image() {
    let registry = Registry::start().unwrap();
    let client = client_for(&registry);
    let reference = Reference::parse(&format!("{}/olm/multi:v1", registry.host())).unwrap();
    let image = sample_image();
    let by_digest = Reference::parse(&format!(
        "{}/olm/multi@{}",
        registry.host(),
        image.manifest_digest
    ))
    .unwrap();
    client.push_image(&by_digest, &image).await.unwrap();
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": olm_oci::manifest::OCI_INDEX,
        "manifests": [
            {"mediaType": olm_oci::manifest::OCI_MANIFEST, "digest": image.manifest_digest, "size": image.manifest.len(),
             "platform": {"architecture": "amd64", "os": "linux"}}
        ]
    });
    client
        .push_manifest(
            &reference,
            olm_oci::manifest::OCI_INDEX,
            Bytes::from(serde_json::to_vec(&index).unwrap()),
        )
        .await
        .unwrap();
    let (manifest, _) = client.fetch_manifest(&reference).await.unwrap();
    assert!(matches!(manifest, Manifest::Index(_)));
    let pulled = client.pull_manifest(&reference).await.unwrap();
    assert_eq!(pulled.digest, image.manifest_digest);

    let arm = Client::new(ClientOptions {
        platform: olm_oci::Platform::parse("linux/arm64").unwrap(),
        ..ClientOptions::default().plain_http(registry.host())
    })
    .unwrap();
    assert!(matches!(
        arm.pull_manifest(&reference).await,
        Err(Error::NoPlatform { .. })
    ));
}

#[tokio::test]
async fn blobs_are_verified_and_capped() {
    let registry = Registry::start().unwrap();
    let client = client_for(&registry);
    let reference = Reference::parse(&format!("{}/olm/blobs:v1", registry.host())).unwrap();
    let content = Bytes::from_static(b"some layer bytes");
    client.push_blob(&reference, content.clone()).await.unwrap();
    let good = Descriptor {
        media_type: "application/octet-stream".into(),
        digest: Digest::of(&content),
        size: content.len() as u64,
        platform: None,
        annotations: Default::default(),
    };
    assert_eq!(
        client.fetch_blob(&reference, &good, 1024).await.unwrap(),
        content
    );
    // The caller's cap.
    assert!(matches!(
        client.fetch_blob(&reference, &good, 4).await,
        Err(Error::BlobTooLarge { .. })
    ));
    // A descriptor that understates the size: the download stops there.
    let short = Descriptor {
        size: 4,
        ..good.clone()
    };
    assert!(matches!(
        client.fetch_blob(&reference, &short, 1024).await,
        Err(Error::BlobTooLarge { .. })
    ));
    // A descriptor that overstates it.
    let long = Descriptor {
        size: 100,
        ..good.clone()
    };
    assert!(matches!(
        client.fetch_blob(&reference, &long, 1024).await,
        Err(Error::SizeMismatch { .. })
    ));
    // Missing blobs and manifests are NotFound, naming the image.
    let missing = Descriptor {
        digest: Digest::of(b"nope"),
        ..good
    };
    let error = client
        .fetch_blob(&reference, &missing, 1024)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    let absent = Reference::parse(&format!("{}/olm/absent:v1", registry.host())).unwrap();
    let error = client.resolve(&absent).await.unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    assert!(error.to_string().contains("olm/absent:v1"), "{error}");
    // A file download that fails leaves no file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blob");
    assert!(
        client
            .fetch_blob_to_file(&reference, &long, 1024, &path)
            .await
            .is_err()
    );
    assert!(!path.exists());
}

#[tokio::test]
async fn manifest_digest_pins_are_verified() {
    let registry = Registry::start().unwrap();
    let client = client_for(&registry);
    let reference = Reference::parse(&format!("{}/olm/pinned:v1", registry.host())).unwrap();
    let image = sample_image();
    client.push_image(&reference, &image).await.unwrap();
    // The registry serves by digest, so a wrong pin is a NotFound, and the
    // right one is checked against the bytes.
    let wrong = reference.with_digest(Digest::of(b"other"));
    assert!(client.fetch_manifest(&wrong).await.is_err());
    let right = reference.with_digest(image.manifest_digest.clone());
    assert_eq!(
        client.fetch_manifest(&right).await.unwrap().1,
        image.manifest_digest
    );
}

#[tokio::test]
async fn basic_auth_through_the_registry_challenge() {
    let registry = Registry::start_with_basic_auth().unwrap();
    let reference = Reference::parse(&format!("{}/olm/private:v1", registry.host())).unwrap();
    let image = sample_image();

    let anonymous = client_for(&registry);
    let error = anonymous.push_image(&reference, &image).await.unwrap_err();
    assert!(matches!(error, Error::Unauthorized { .. }), "{error}");

    let wrong = Client::new(
        ClientOptions::default()
            .plain_http(registry.host())
            .with_credentials(
                &registry.host(),
                Credentials::basic(BASIC_AUTH_USER, "wrong"),
            ),
    )
    .unwrap();
    assert!(matches!(
        wrong.resolve(&reference).await,
        Err(Error::Unauthorized { .. })
    ));

    // Credentials from a dockerconfigjson body, keyed by URL as docker
    // login writes them.
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{BASIC_AUTH_USER}:{BASIC_AUTH_PASSWORD}"));
    let secret = format!(
        r#"{{"auths":{{"http://{}":{{"auth":"{auth}"}}}}}}"#,
        registry.host()
    );
    let client = Client::new(ClientOptions {
        credentials: DockerConfig::parse(secret.as_bytes()).unwrap(),
        ..ClientOptions::default().plain_http(registry.host())
    })
    .unwrap();
    let digest = client.push_image(&reference, &image).await.unwrap();
    let pulled = client
        .pull_to_memory(&reference, &ExtractOptions::default())
        .await
        .unwrap();
    assert_eq!(pulled.manifest.digest, digest);
    assert_eq!(pulled.files.len(), 3);
}

#[tokio::test]
async fn base_images_are_pulled_whole_and_built_on_within_a_limit() {
    let registry = Registry::start().unwrap();
    let client = client_for(&registry);
    let base_ref = Reference::parse(&format!("{}/olm/fixture-base:v1", registry.host())).unwrap();
    let lower = ImageBuilder::new()
        .add_executable("bin/fixture-tool", b"#!/bin/sh\n".to_vec())
        .unwrap()
        .entrypoint(&["/bin/fixture-tool"])
        .user("1001")
        .build()
        .unwrap();
    let base = ImageBuilder::new()
        .on_base(lower.as_base())
        .add_file("etc/motd", b"fixture base\n".to_vec())
        .unwrap()
        .build()
        .unwrap();
    client.push_image(&base_ref, &base).await.unwrap();

    let pulled = client.pull_base(&base_ref).await.unwrap();
    assert_eq!(pulled.digest(), &base.manifest_digest);
    assert_eq!(pulled.manifest(), &base.parsed);
    assert_eq!(pulled.layers(), [lower.layer.clone(), base.layer.clone()]);
    assert_eq!(pulled.config().config.user.as_deref(), Some("1001"));

    // Built on it and pushed to another repository, which has none of the
    // base's blobs: they are uploaded too, and the image reads whole.
    let catalog_ref =
        Reference::parse(&format!("{}/olm/fixture-catalog:v1", registry.host())).unwrap();
    let catalog = ImageBuilder::new()
        .on_base(pulled)
        .add_file("configs/catalog.json", b"{}".to_vec())
        .unwrap()
        .build()
        .unwrap();
    client.push_image(&catalog_ref, &catalog).await.unwrap();
    let read = client
        .pull_to_memory(&catalog_ref, &ExtractOptions::default())
        .await
        .unwrap();
    assert_eq!(read.manifest.manifest.layers.len(), 3);
    assert_eq!(
        read.files.keys().collect::<Vec<_>>(),
        ["bin/fixture-tool", "configs/catalog.json", "etc/motd"]
    );

    // A limit one byte under the layers' sum refuses the base.
    let total: u64 = base.parsed.layers.iter().map(|l| l.size).sum();
    let error = client
        .pull_base_within(&base_ref, total - 1)
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::BaseImageTooLarge { size, .. } if size == total),
        "{error}"
    );
    assert!(error.to_string().contains("olm/fixture-base:v1"), "{error}");
    assert!(client.pull_base_within(&base_ref, total).await.is_ok());
}

#[tokio::test]
async fn a_base_whose_config_does_not_name_each_layer_is_refused() {
    let registry = Registry::start().unwrap();
    let client = client_for(&registry);
    let reference = Reference::parse(&format!("{}/olm/odd-base:v1", registry.host())).unwrap();
    let image = sample_image();
    let mut config: serde_json::Value = serde_json::from_slice(&image.config).unwrap();
    config["rootfs"]["diff_ids"] = serde_json::json!([]);
    let config = Bytes::from(serde_json::to_vec(&config).unwrap());
    let mut manifest = image.parsed.clone();
    manifest.config.digest = Digest::of(&config);
    manifest.config.size = config.len() as u64;
    client
        .push_blob(&reference, image.layer.clone())
        .await
        .unwrap();
    client.push_blob(&reference, config).await.unwrap();
    client
        .push_manifest(
            &reference,
            olm_oci::manifest::OCI_MANIFEST,
            Bytes::from(serde_json::to_vec(&manifest).unwrap()),
        )
        .await
        .unwrap();
    let error = client.pull_base(&reference).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::DiffIdsMismatch {
                diff_ids: 0,
                layers: 1,
                ..
            }
        ),
        "{error}"
    );
}
