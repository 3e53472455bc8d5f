//! Images built without a container engine: their run configuration, the
//! same digest for the same inputs, and the OCI image layout they are
//! written to.
#![allow(clippy::unwrap_used)]

use olm_oci::{ImageBuilder, build::REF_NAME_ANNOTATION};

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
