//! Images built without a container engine: their run configuration, the
//! same digest for the same inputs, images built on a base image, and the
//! OCI image layout they are written to.
#![allow(clippy::unwrap_used)]

use olm_oci::{BuiltImage, ImageBuilder, build::REF_NAME_ANNOTATION, manifest::OCI_LAYER_GZIP};

fn service_image(binary: &[u8]) -> ImageBuilder {
    ImageBuilder::new()
        .add_executable("usr/local/bin/widget-operator", binary.to_vec())
        .unwrap()
        .add_file(
            "etc/passwd",
            b"nonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n".to_vec(),
        )
        .unwrap()
        .entrypoint(&["/usr/local/bin/widget-operator"])
        .cmd(&["--help"])
        .user("65532:65532")
        .env("PATH", "/usr/local/bin")
        .working_dir("/")
        .label("org.opencontainers.image.version", "0.1.0")
}

#[test]
fn the_run_configuration_is_in_the_config_blob() {
    let image = service_image(b"\x7fELF fixture").build().unwrap();
    let config: serde_json::Value = serde_json::from_slice(&image.config).unwrap();
    let run = &config["config"];
    assert_eq!(
        run["Entrypoint"],
        serde_json::json!(["/usr/local/bin/widget-operator"])
    );
    assert_eq!(run["Cmd"], serde_json::json!(["--help"]));
    assert_eq!(run["User"], "65532:65532");
    assert_eq!(run["Env"], serde_json::json!(["PATH=/usr/local/bin"]));
    assert_eq!(run["WorkingDir"], "/");
    assert_eq!(run["Labels"]["org.opencontainers.image.version"], "0.1.0");
}

#[test]
fn the_same_inputs_give_the_same_digest_and_any_change_another() {
    let first = service_image(b"\x7fELF fixture").build().unwrap();
    let again = service_image(b"\x7fELF fixture").build().unwrap();
    assert_eq!(first.manifest_digest, again.manifest_digest);
    assert_eq!(first.layer, again.layer);
    let other_binary = service_image(b"\x7fELF fixture 2").build().unwrap();
    assert_ne!(first.manifest_digest, other_binary.manifest_digest);
    let other_user = service_image(b"\x7fELF fixture").user("0").build().unwrap();
    assert_ne!(first.manifest_digest, other_user.manifest_digest);
}

#[test]
fn images_are_written_to_an_oci_layout_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let widget = service_image(b"widget").build().unwrap();
    let gadget = service_image(b"gadget").build().unwrap();
    widget
        .write_oci_layout(dir.path(), "widget-operator:0.1.0")
        .unwrap();
    gadget
        .write_oci_layout(dir.path(), "gadget-operator:0.1.0")
        .unwrap();
    // Written again: replaced under its name, not listed twice.
    widget
        .write_oci_layout(dir.path(), "widget-operator:0.1.0")
        .unwrap();

    let layout: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("oci-layout")).unwrap()).unwrap();
    assert_eq!(layout["imageLayoutVersion"], "1.0.0");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("index.json")).unwrap()).unwrap();
    let names: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["annotations"][REF_NAME_ANNOTATION].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gadget-operator:0.1.0", "widget-operator:0.1.0"]);
    for image in [&widget, &gadget] {
        for digest in [
            &image.manifest_digest,
            &image.parsed.config.digest,
            &image.parsed.layers[0].digest,
        ] {
            let blob = std::fs::read(dir.path().join("blobs/sha256").join(digest.hex())).unwrap();
            assert_eq!(
                &olm_oci::Digest::of(&blob),
                digest,
                "blob {digest} is what it says"
            );
        }
    }
}

#[test]
fn an_image_holds_at_most_max_build_files() {
    let mut builder = ImageBuilder::new();
    for n in 0..olm_oci::build::MAX_BUILD_FILES {
        builder = builder.add_file(&format!("f/{n}"), Vec::new()).unwrap();
    }
    let refused = builder.add_file("one/more", Vec::new()).unwrap_err();
    assert!(matches!(refused, olm_oci::build::BuildError::TooManyFiles));
    assert_eq!(refused.to_string(), "more than 100000 files");
}

/// A catalog layer on `base`, run as `opm serve` as upstream's catalog
/// Dockerfile does.
fn catalog_on(base: &BuiltImage, catalog: &[u8]) -> BuiltImage {
    ImageBuilder::new()
        .on_base(base.as_base())
        .add_file("configs/widget/catalog.json", catalog.to_vec())
        .unwrap()
        .entrypoint(&["/bin/opm"])
        .cmd(&["serve", "/configs", "--cache-dir=/tmp/cache"])
        .env("PATH", "/bin")
        .label(
            "operators.operatorframework.io.index.configs.v1",
            "/configs",
        )
        .label("org.opencontainers.image.version", "0.2.0")
        .build()
        .unwrap()
}

#[test]
fn an_image_on_a_base_keeps_its_layers_and_inherits_its_run_configuration() {
    // Two layers below: a base that is itself built on another.
    let lower = service_image(b"\x7fELF fixture").build().unwrap();
    let base = ImageBuilder::new()
        .on_base(lower.as_base())
        .add_file("etc/motd", b"fixture base\n".to_vec())
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(base.parsed.layers.len(), 2);
    let image = catalog_on(&base, b"{}");

    assert_eq!(image.base_layers, [lower.layer.clone(), base.layer.clone()]);
    let layers: Vec<_> = image.layers().map(|(d, _)| d.clone()).collect();
    assert_eq!(
        layers[..2],
        base.parsed.layers[..],
        "base layers first, as they were"
    );
    assert_eq!(layers[2].media_type, OCI_LAYER_GZIP);
    assert_eq!(layers[2].digest, olm_oci::Digest::of(&image.layer));
    for (descriptor, bytes) in image.layers() {
        assert_eq!(olm_oci::Digest::of(bytes), descriptor.digest);
    }

    let config: serde_json::Value = serde_json::from_slice(&image.config).unwrap();
    let base_config: serde_json::Value = serde_json::from_slice(&base.config).unwrap();
    let diff_ids = config["rootfs"]["diff_ids"].as_array().unwrap();
    assert_eq!(diff_ids.len(), 3);
    assert_eq!(
        diff_ids[..2],
        base_config["rootfs"]["diff_ids"].as_array().unwrap()[..]
    );
    assert_eq!(
        (&config["os"], &config["architecture"]),
        (&base_config["os"], &base_config["architecture"])
    );
    let run = &config["config"];
    assert_eq!(run["Entrypoint"], serde_json::json!(["/bin/opm"]));
    assert_eq!(
        run["Cmd"],
        serde_json::json!(["serve", "/configs", "--cache-dir=/tmp/cache"])
    );
    assert_eq!(run["User"], "65532:65532", "inherited");
    assert_eq!(run["WorkingDir"], "/", "inherited");
    assert_eq!(
        run["Env"],
        serde_json::json!(["PATH=/bin"]),
        "replaced by name"
    );
    assert_eq!(
        run["Labels"],
        serde_json::json!({
            "operators.operatorframework.io.index.configs.v1": "/configs",
            "org.opencontainers.image.version": "0.2.0",
        }),
        "the base's labels, overlaid"
    );
}

#[test]
fn the_same_base_and_inputs_give_the_same_digest_and_another_base_another() {
    let base = service_image(b"\x7fELF fixture").build().unwrap();
    let first = catalog_on(&base, b"{}");
    let again = catalog_on(&base, b"{}");
    assert_eq!(first.manifest_digest, again.manifest_digest);
    assert_eq!(first.config, again.config);
    assert_ne!(
        first.manifest_digest,
        catalog_on(&base, b"{ }").manifest_digest
    );
    let other_base = service_image(b"\x7fELF fixture 2").build().unwrap();
    let on_other = catalog_on(&other_base, b"{}");
    assert_ne!(first.manifest_digest, on_other.manifest_digest);
    assert_eq!(first.layer, on_other.layer, "the top layer is the same");
}

#[test]
fn a_layered_image_is_written_to_an_oci_layout_whole() {
    let dir = tempfile::tempdir().unwrap();
    let base = service_image(b"\x7fELF fixture").build().unwrap();
    let image = catalog_on(&base, b"{}");
    image
        .write_oci_layout(dir.path(), "widget-catalog:latest")
        .unwrap();
    let digests = image
        .layers()
        .map(|(d, _)| &d.digest)
        .chain([&image.parsed.config.digest, &image.manifest_digest]);
    for digest in digests {
        let blob = std::fs::read(dir.path().join("blobs/sha256").join(digest.hex())).unwrap();
        assert_eq!(&olm_oci::Digest::of(&blob), digest);
    }
}

#[test]
fn a_platform_other_than_the_base_is_refused() {
    let base = service_image(b"\x7fELF fixture").build().unwrap();
    let refused = ImageBuilder::new()
        .on_base(base.as_base())
        .platform(olm_oci::Platform::parse("linux/arm64").unwrap())
        .build()
        .unwrap_err();
    assert!(matches!(
        refused,
        olm_oci::build::BuildError::PlatformMismatch { .. }
    ));
}
