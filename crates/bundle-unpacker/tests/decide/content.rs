//! From image files to stored content and back.

use std::{collections::BTreeMap, path::Path};

use bundle_unpacker::decide::{
    content::{
        self, ATTEMPTS_ANNOTATION, MAX_BUNDLE_UNCOMPRESSED_BYTES, MAX_COMPRESSION_RATIO,
        MAX_COPIED_ANNOTATION_BYTES, MAX_LAYER_COMPRESSED_BYTES, MAX_LAYER_ENTRIES, Owner,
        bundle_content, is_annotation_key, stored_state,
    },
    failure::{self, Failure, INVALID_BUNDLE, TOO_LARGE},
    retry::Stored,
};
use k8s_openapi::{ByteString, api::core::v1::ConfigMap};
use olm_catalog::unpacked;

const IMAGE: &str = "registry.fixture/etcd-bundle:v0.9.4";

fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for sub in ["manifests", "metadata"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            files.insert(
                format!("{sub}/{name}"),
                std::fs::read(entry.path()).unwrap(),
            );
        }
    }
    files
}

fn owner() -> Owner {
    Owner {
        name: "fixture-catalog".into(),
        uid: "uid-catalog".into(),
    }
}

#[test]
fn a_corpus_bundle_is_stored_whole_and_reads_back() {
    let Some(testdata) = olm_testkit::testdata() else {
        return;
    };
    let dir = testdata.join("bundles/etcd/0.9.4");
    let files = files_of(&dir);
    // A label that disagrees with annotations.yaml: the annotation wins.
    let labels = BTreeMap::from([(
        "operators.operatorframework.io.bundle.package.v1".to_owned(),
        "not-etcd".to_owned(),
    )]);
    let content = bundle_content(IMAGE, &files, &labels).unwrap();
    assert_eq!(content.bundle.csv_name, "etcdoperator.v0.9.4");
    assert_eq!(content.bundle.objects.len(), 4, "three CRDs and the CSV");
    assert_eq!(
        content.bundle.annotations["operators.operatorframework.io.bundle.package.v1"],
        "etcd"
    );
    assert!(
        content.warnings.iter().any(|w| w.contains("not-etcd")),
        "{:?}",
        content.warnings
    );
    for object in &content.bundle.objects {
        let value: serde_json::Value = serde_json::from_str(object).unwrap();
        assert!(
            value["kind"].is_string() && value["apiVersion"].is_string(),
            "{object}"
        );
    }

    let cm = content::content_config_map("catalogs", IMAGE, "sha256:abc", &owner(), &content);
    assert_eq!(
        cm.metadata.name.as_deref(),
        Some(unpacked::config_map_name(IMAGE).as_str())
    );
    let labels = cm.metadata.labels.clone().unwrap();
    assert_eq!(labels["olm.managed"], "true");
    assert_eq!(
        labels["operatorframework.io/bundle-unpack-ref"],
        unpacked::config_map_name(IMAGE)
    );
    let owners = cm.metadata.owner_references.clone().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("CatalogSource", "uid-catalog")
    );
    assert_eq!(owners[0].controller, Some(false));
    let annotations = cm.metadata.annotations.clone().unwrap();
    assert_eq!(annotations[unpacked::SOURCE_IMAGE], IMAGE);
    assert_eq!(annotations[unpacked::IMAGE_DIGEST], "sha256:abc");
    assert_eq!(
        annotations["operators.operatorframework.io.bundle.mediatype.v1"],
        "registry+v1"
    );
    let data: BTreeMap<String, Vec<u8>> = cm
        .binary_data
        .clone()
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    assert_eq!(
        unpacked::decode(&annotations, &data).unwrap(),
        content.bundle
    );
    assert_eq!(stored_state(IMAGE, Some(&cm)), Stored::Content);
    assert_eq!(
        stored_state("registry.fixture/other:1", Some(&cm)),
        Stored::Foreign
    );
}

#[test]
fn what_is_not_a_bundle_is_an_invalid_bundle() {
    let cases: Vec<(&str, BTreeMap<String, Vec<u8>>)> = vec![
        ("empty image", BTreeMap::new()),
        (
            "no metadata",
            BTreeMap::from([(
                "manifests/a.yaml".to_owned(),
                b"kind: ConfigMap\napiVersion: v1".to_vec(),
            )]),
        ),
        (
            "no csv",
            BTreeMap::from([
                (
                    "manifests/a.yaml".to_owned(),
                    b"kind: ConfigMap\napiVersion: v1\nmetadata: {name: a}".to_vec(),
                ),
                (
                    "metadata/annotations.yaml".to_owned(),
                    b"annotations:\n  operators.operatorframework.io.bundle.package.v1: p\n"
                        .to_vec(),
                ),
            ]),
        ),
        (
            "garbage",
            BTreeMap::from([
                ("manifests/a.yaml".to_owned(), vec![0xff; 64]),
                ("metadata/x".to_owned(), vec![0; 3]),
            ]),
        ),
    ];
    for (name, files) in cases {
        let failure = bundle_content(IMAGE, &files, &BTreeMap::new()).unwrap_err();
        assert_eq!(failure.reason, INVALID_BUNDLE, "{name}: {failure:?}");
        assert!(
            failure.message.contains(IMAGE),
            "{name}: {}",
            failure.message
        );
    }
}

#[test]
fn content_that_does_not_fit_a_config_map_is_too_large() {
    let Some(testdata) = olm_testkit::testdata() else {
        return;
    };
    let mut files = files_of(&testdata.join("bundles/etcd/0.9.4"));
    // Incompressible data in a ConfigMap manifest, beyond what a ConfigMap holds.
    let mut state = 0x9e37_79b9_u64;
    let noise: String = (0..(unpacked::MAX_STORED_BYTES * 2))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect();
    files.insert(
        "manifests/zz-noise.configmap.yaml".into(),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: noise\ndata:\n  noise: {noise}\n"
        )
        .into_bytes(),
    );
    let failure = bundle_content(IMAGE, &files, &BTreeMap::new()).unwrap_err();
    assert!(
        failure.reason == TOO_LARGE || failure.reason == INVALID_BUNDLE,
        "{failure:?}"
    );
    // Either the bundle reader's own limit or the ConfigMap limit refuses it;
    // nothing panics and nothing oversized is stored.
}

#[test]
fn failures_are_recorded_with_their_attempt_and_read_back() {
    let failure = Failure::new("ImagePullFailed", "pull r/x:1: not found");
    let mut cm =
        content::failure_config_map("catalogs", IMAGE, Some("sha256:def"), &owner(), &failure, 3);
    let annotations = cm.metadata.annotations.clone().unwrap();
    assert_eq!(annotations[unpacked::FAILURE_REASON], "ImagePullFailed");
    assert_eq!(
        annotations[unpacked::FAILURE_MESSAGE],
        "pull r/x:1: not found"
    );
    assert_eq!(annotations[ATTEMPTS_ANNOTATION], "3");
    assert_eq!(annotations[unpacked::IMAGE_DIGEST], "sha256:def");
    assert!(cm.binary_data.is_none());
    assert_eq!(
        unpacked::failure(&annotations),
        Some(("ImagePullFailed".into(), "pull r/x:1: not found".into()))
    );

    cm.metadata.uid = Some("uid-cm".into());
    cm.metadata.resource_version = Some("7".into());
    cm.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    assert_eq!(
        stored_state(IMAGE, Some(&cm)),
        Stored::Failure {
            recorded_at: "2026-01-01T00:00:00Z".parse().unwrap(),
            attempts: 3,
            uid: "uid-cm".into(),
            resource_version: "7".into(),
        }
    );
}

#[test]
fn stored_states_of_odd_objects() {
    assert_eq!(stored_state(IMAGE, None), Stored::Nothing);
    let mut cm = ConfigMap::default();
    assert_eq!(
        stored_state(IMAGE, Some(&cm)),
        Stored::Foreign,
        "no source annotation: not ours"
    );
    cm.metadata.annotations = Some(BTreeMap::from([(
        unpacked::SOURCE_IMAGE.to_owned(),
        IMAGE.to_owned(),
    )]));
    assert!(
        matches!(
            stored_state(IMAGE, Some(&cm)),
            Stored::Failure { attempts: 1, .. }
        ),
        "ours without content or failure: retried like a failure"
    );
    cm.binary_data = Some(BTreeMap::from([(
        unpacked::CONTENT_KEY.to_owned(),
        ByteString(vec![1]),
    )]));
    assert_eq!(stored_state(IMAGE, Some(&cm)), Stored::Content);
    cm.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(ATTEMPTS_ANNOTATION.into(), "many".into());
    cm.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(unpacked::FAILURE_REASON.into(), "X".into());
    assert!(matches!(
        stored_state(IMAGE, Some(&cm)),
        Stored::Failure { attempts: 1, .. }
    ));
}

#[test]
fn only_valid_annotation_keys_are_copied_within_a_budget() {
    let cases = [
        ("operators.operatorframework.io.bundle.package.v1", true),
        ("example.com/name", true),
        ("a", true),
        ("", false),
        ("-a", false),
        ("a-", false),
        ("Example.com/name", false),
        ("example.com/", false),
        ("/name", false),
        ("a/b/c", false),
        ("with space", false),
    ];
    for (key, valid) in cases {
        assert_eq!(is_annotation_key(key), valid, "{key:?}");
    }
    assert!(!is_annotation_key(&"a".repeat(64)));
    assert!(is_annotation_key(&"a".repeat(63)));
    // The prefix is a DNS subdomain of at most 253 characters.
    let prefix = |len: usize| -> String {
        // Labels of 49 letters: each label is valid, only the length is not.
        let text: String =
            std::iter::repeat_n(format!("{}.", "a".repeat(49)), len / 50 + 1).collect();
        text[..len].to_owned()
    };
    assert!(is_annotation_key(&format!("{}/name", prefix(253))));
    assert!(!is_annotation_key(&format!("{}/name", prefix(254))));

    let bundle = olm_catalog::unpacked::UnpackedBundle {
        csv_name: "x".into(),
        objects: vec![],
        annotations: BTreeMap::from([
            ("bad key".to_owned(), "v".to_owned()),
            ("big".to_owned(), "v".repeat(MAX_COPIED_ANNOTATION_BYTES)),
            ("ok".to_owned(), "v".to_owned()),
        ]),
    };
    let content = content::Content {
        encoded: unpacked::encode(&bundle).unwrap(),
        bundle,
        warnings: vec![],
    };
    let cm = content::content_config_map("ns", IMAGE, "sha256:0", &owner(), &content);
    let annotations = cm.metadata.annotations.unwrap();
    assert!(annotations.contains_key("ok"));
    assert!(!annotations.contains_key("bad key"));
    assert!(!annotations.contains_key("big"));
}

#[test]
fn extraction_is_limited_to_bundle_directories_with_named_limits() {
    let options = content::extract_options();
    assert_eq!(options.path_prefixes, ["manifests", "metadata"]);
    assert_eq!(
        options.limits.max_compressed_bytes,
        MAX_LAYER_COMPRESSED_BYTES
    );
    assert_eq!(
        options.limits.max_uncompressed_bytes,
        MAX_BUNDLE_UNCOMPRESSED_BYTES
    );
    assert_eq!(options.limits.max_entries, MAX_LAYER_ENTRIES);
    assert_eq!(options.limits.max_compression_ratio, MAX_COMPRESSION_RATIO);
    // A layer over the entry limit is refused by the extractor with these options.
    let mut builder = tar::Builder::new(Vec::new());
    for i in 0..=MAX_LAYER_ENTRIES {
        let mut header = tar::Header::new_gnu();
        header.set_size(0);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, format!("manifests/f{i}"), std::io::empty())
            .unwrap();
    }
    let layer = builder.into_inner().unwrap();
    let error = olm_oci::layer::extract_layers_to_memory([layer.as_slice()], &options).unwrap_err();
    assert!(
        matches!(error, olm_oci::layer::ExtractError::TooManyEntries { .. }),
        "{error}"
    );
    // Files outside the bundle directories are not extracted.
    let mut builder = tar::Builder::new(Vec::new());
    for path in [
        "manifests/a.yaml",
        "etc/passwd",
        "metadata/annotations.yaml",
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(1);
        header.set_mode(0o644);
        builder.append_data(&mut header, path, &b"x"[..]).unwrap();
    }
    let layer = builder.into_inner().unwrap();
    let tree = olm_oci::layer::extract_layers_to_memory([layer.as_slice()], &options).unwrap();
    assert_eq!(
        tree.keys().collect::<Vec<_>>(),
        ["manifests/a.yaml", "metadata/annotations.yaml"]
    );
}

#[test]
fn a_gzip_bomb_layer_trips_the_compression_ratio() {
    // 16 MiB of zeros gzip to about 16 KiB: far past the ratio, yet well
    // under the uncompressed and compressed limits, so only the ratio trips.
    let bomb = olm_oci::ImageBuilder::new()
        .add_file("manifests/bomb.yaml", vec![0u8; 16 * 1024 * 1024])
        .unwrap()
        .build()
        .unwrap();
    let layer = bomb.layer.as_ref();
    assert!(MAX_COMPRESSION_RATIO * (layer.len() as u64) < 16 * 1024 * 1024);
    let options = content::extract_options();
    let error = olm_oci::layer::extract_layers_to_memory([layer], &options).unwrap_err();
    assert!(
        matches!(
            error,
            olm_oci::layer::ExtractError::CompressionRatio {
                limit: MAX_COMPRESSION_RATIO
            }
        ),
        "{error}"
    );
    // Pulled, it is a permanent TooLarge failure that names the limit.
    let pulled = olm_oci::Error::Extract {
        digest: bomb.parsed.layers[0].digest.clone(),
        source: error,
    };
    let failure = failure::from_pull_error("/bundle", &pulled);
    assert_eq!((failure.reason, failure.transient), (TOO_LARGE, false));
    assert!(
        failure.message.ends_with(&format!(
            "layer expands more than {MAX_COMPRESSION_RATIO} times its compressed size"
        )),
        "{}",
        failure.message
    );
    // It is the ratio that refused it: without one, the same layer extracts.
    let mut unlimited = content::extract_options();
    unlimited.limits.max_compression_ratio = u64::MAX;
    let tree = olm_oci::layer::extract_layers_to_memory([layer], &unlimited).unwrap();
    assert_eq!(tree.keys().collect::<Vec<_>>(), ["manifests/bomb.yaml"]);
}
