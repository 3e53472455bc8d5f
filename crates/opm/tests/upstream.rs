//! Differential tests: this `opm` and upstream's on the same inputs, outputs
//! compared after normalisation (JSON documents compared as values, so key
//! order inside values does not count) and exit codes compared exactly.
//!
//! `cargo xtask conformance` builds upstream's binary from its module at the
//! pinned version (`xtask/upstream/opm`, operator-registry v1.65.0) and runs
//! these tests; `OLM_UPSTREAM_OPM` names another build. Without either they
//! print why and pass (CI does not build upstream). Every deliberate
//! difference is listed in docs/opm.md, "Where it differs from upstream".
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use olm_testkit::registry::Registry;

#[path = "upstream/broken.rs"]
mod broken;
#[path = "upstream/serve.rs"]
mod serve;

/// Upstream's `opm` (`cargo xtask upstream` builds it; `OLM_UPSTREAM_OPM`
/// names another), or `None` after saying why.
fn upstream() -> Option<PathBuf> {
    olm_testkit::assets::upstream_or_skip(
        olm_testkit::assets::upstream_opm(),
        "the differential tests against upstream's opm",
    )
}

fn run(binary: &Path, args: &[&str], cwd: &Path) -> Output {
    let mut command = Command::new(binary);
    command.args(args).current_dir(cwd);
    if binary != ours() {
        // containers/image refuses to pull without a signature policy.
        command.env("HOME", containers_home());
    }
    command.output().unwrap()
}

/// A HOME whose containers policy accepts any image, for upstream's pulls.
/// Written once: tests run in parallel and must never see a half-written
/// policy.
fn containers_home() -> PathBuf {
    static HOME: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    HOME.get_or_init(|| {
        let home = std::env::temp_dir().join(format!("opm-upstream-home-{}", std::process::id()));
        let dir = home.join(".config/containers");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("policy.json"),
            r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
        )
        .unwrap();
        home
    })
    .clone()
}

fn ours() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_opm"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// JSON or YAML document streams as values.
fn normalise(text: &str, yaml: bool) -> Vec<serde_json::Value> {
    if yaml {
        serde_yaml_ng::Deserializer::from_str(text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .filter(|v: &serde_json::Value| !v.is_null())
            .collect()
    } else {
        serde_json::Deserializer::from_str(text)
            .into_iter::<serde_json::Value>()
            .map(Result::unwrap)
            .collect()
    }
}

/// The path and (cut) values of the first difference between two values.
fn first_difference(x: &serde_json::Value, y: &serde_json::Value, path: &str) -> String {
    use serde_json::Value;
    match (x, y) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys()) {
                let (p, q) = (
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                );
                if p != q {
                    return first_difference(p, q, &format!("{path}.{key}"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (p, q)) in a.iter().zip(b).enumerate() {
                if p != q {
                    return first_difference(p, q, &format!("{path}[{i}]"));
                }
            }
        }
        _ => {}
    }
    let cut = |v: &Value| v.to_string().chars().take(300).collect::<String>();
    format!("at {path}: ours {} / upstream {}", cut(x), cut(y))
}

/// Like [`compare`], for commands that must succeed.
fn compare_ok(upstream: &Path, args: &[&str], yaml: bool) -> bool {
    let theirs = run(upstream, args, &std::env::temp_dir());
    assert!(
        theirs.status.success(),
        "upstream failed on {args:?}: {}",
        String::from_utf8_lossy(&theirs.stderr)
    );
    compare(upstream, args, yaml)
}

/// Runs both and compares exit codes and, on success, normalised stdout;
/// returns whether stdout was also byte-identical.
fn compare(upstream: &Path, args: &[&str], yaml: bool) -> bool {
    let cwd = std::env::temp_dir();
    let theirs = run(upstream, args, &cwd);
    let mine = run(&ours(), args, &cwd);
    assert_eq!(
        mine.status.code(),
        theirs.status.code(),
        "exit codes differ for {args:?}\nours: {}\nupstream: {}",
        String::from_utf8_lossy(&mine.stderr),
        String::from_utf8_lossy(&theirs.stderr)
    );
    if theirs.status.success() {
        let a = normalise(&String::from_utf8_lossy(&mine.stdout), yaml);
        let b = normalise(&String::from_utf8_lossy(&theirs.stdout), yaml);
        assert_eq!(a.len(), b.len(), "document counts differ for {args:?}");
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            if x != y {
                panic!(
                    "document {i} differs for {args:?}:\n{}",
                    first_difference(x, y, "")
                );
            }
        }
    }
    mine.stdout == theirs.stdout
}

#[test]
fn render_matches_upstream_on_every_corpus_bundle() {
    let (Some(upstream), Some(testdata)) = (upstream(), olm_testkit::testdata()) else {
        return;
    };
    let mut compared = 0;
    for package in std::fs::read_dir(testdata.join("bundles")).unwrap() {
        for version in std::fs::read_dir(package.unwrap().path()).unwrap() {
            let dir = version.unwrap().path();
            if !dir.join("manifests").is_dir() {
                continue;
            }
            let dir = dir.to_str().unwrap();
            // Byte for byte: the olm.bundle blob must be upstream's.
            assert!(
                compare(&upstream, &["render", dir], false),
                "{dir}: bytes differ"
            );
            compared += 1;
        }
    }
    assert!(compared > 400, "{compared}");
}

#[test]
fn render_with_migration_matches_upstream() {
    let (Some(upstream), Some(testdata)) = (upstream(), olm_testkit::testdata()) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = vec![fixture("bundle")];
    for package in std::fs::read_dir(testdata.join("bundles")).unwrap().take(8) {
        for version in std::fs::read_dir(package.unwrap().path()).unwrap().take(2) {
            let dir = version.unwrap().path();
            if dir.join("manifests").is_dir() {
                dirs.push(dir);
            }
        }
    }
    for dir in dirs {
        let args = [
            "render",
            dir.to_str().unwrap(),
            "--alpha-image-ref-template",
            "quay.io/example/{{.Package}}:v{{.Version}}",
            "--migrate-level",
            "bundle-object-to-csv-metadata",
        ];
        assert!(
            compare(&upstream, &args, false),
            "{}: bytes differ",
            dir.display()
        );
    }
}

#[test]
fn render_matches_upstream_on_every_corpus_catalog() {
    let (Some(upstream), Some(testdata)) = (upstream(), olm_testkit::testdata()) else {
        return;
    };
    for catalog in std::fs::read_dir(testdata.join("catalogs")).unwrap() {
        let dir = catalog.unwrap().path();
        let dir = dir.to_str().unwrap();
        // JSON byte for byte; YAML as values, because upstream's YAML
        // sorts every key where ours keeps the known fields in JSON order.
        assert!(
            compare_ok(&upstream, &["render", dir], false),
            "{dir}: bytes differ"
        );
        compare_ok(&upstream, &["render", dir, "-o", "yaml"], true);
    }
    assert!(compare(
        &upstream,
        &["render", fixture("catalog").to_str().unwrap()],
        false
    ));
    // Every escape class, float64 numbers, sorted raw values and an icon
    // from a YAML block scalar: byte for byte.
    assert!(compare(
        &upstream,
        &["render", fixture("catalog-escapes").to_str().unwrap()],
        false
    ));
    // Both refuse an icon that is not base64 (exit codes compared).
    compare(
        &upstream,
        &["render", fixture("catalog-bad-icon").to_str().unwrap()],
        false,
    );
}

#[test]
fn init_and_exit_codes_match_upstream() {
    let Some(upstream) = upstream() else {
        return;
    };
    let readme = fixture("bundle/metadata/annotations.yaml");
    let readme = readme.to_str().unwrap();
    for (args, byte_equal) in [
        (vec!["init", "widget"], true),
        (vec!["init", "widget", "-c", "stable", "-d", readme], true),
        (vec!["init"], false),
        (vec!["init", "widget", "-o", "xml"], false),
        (vec!["render"], false),
        (vec!["render", "-o", "xml", "."], false),
        (
            vec![
                "render",
                "--migrate-level",
                "nope",
                fixture("bundle").to_str().unwrap(),
            ],
            false,
        ),
        (
            vec![
                "render",
                fixture("bundle/metadata/annotations.yaml")
                    .to_str()
                    .unwrap(),
            ],
            false,
        ),
        (vec!["validate"], false),
        (vec!["validate", "/nonexistent"], false),
        (
            vec!["validate", fixture("catalog").to_str().unwrap()],
            false,
        ),
        (
            vec!["validate", fixture("invalid-catalog").to_str().unwrap()],
            false,
        ),
        (vec!["generate", "dockerfile"], false),
        (vec!["no-such-command"], false),
    ] {
        let same = compare(&upstream, &args, false);
        if byte_equal {
            assert!(same, "{args:?}: bytes differ");
        }
    }
    compare(&upstream, &["init", "widget", "-o", "yaml"], true);
}

#[test]
fn validate_exit_codes_match_upstream_on_the_corpus() {
    let (Some(upstream), Some(testdata)) = (upstream(), olm_testkit::testdata()) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(testdata.join("catalogs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.push(fixture("catalog"));
    dirs.push(fixture("invalid-catalog"));
    for dir in dirs {
        compare(&upstream, &["validate", dir.to_str().unwrap()], false);
    }
}

/// The default builder and base image of upstream's `generate dockerfile`.
const UPSTREAM_OPM_IMAGE: &str = "quay.io/operator-framework/opm:latest";
/// Ours.
const OUR_OPM_IMAGE: &str = concat!("ghcr.io/olm-rs/opm:", env!("CARGO_PKG_VERSION"));

#[test]
fn generate_dockerfile_matches_upstream() {
    let Some(upstream) = upstream() else {
        return;
    };
    for extra in [
        vec![],
        vec!["-l", "b=2,a=1", "-l", "c=3"],
        vec!["-i", "scratch"],
        vec!["-i", "example.com/base:1", "-b", "example.com/builder:1"],
        vec!["--binary-image", "example.com/bin:1"],
    ] {
        let mut files = Vec::new();
        for binary in [upstream.clone(), ours()] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("catalog")).unwrap();
            let mut args = vec!["generate", "dockerfile", "catalog/"];
            args.extend(extra.iter().copied());
            let output = run(&binary, &args, dir.path());
            assert!(output.status.success(), "{binary:?} {args:?}");
            files.push(std::fs::read_to_string(dir.path().join("catalog.Dockerfile")).unwrap());
        }
        // The one deliberate difference: the default builder and base are
        // this version's opm image, not upstream's.
        let ours = files[1].replace(OUR_OPM_IMAGE, UPSTREAM_OPM_IMAGE);
        assert_eq!(files[0], ours, "{extra:?}");
    }
}

#[test]
fn upstream_renders_the_images_we_push() {
    let Some(upstream) = upstream() else {
        return;
    };
    let registry = Registry::start().unwrap();
    let cwd = std::env::temp_dir();
    let bundle_image = format!("{}/fixtures/widget-bundle:v0.2.0", registry.host());
    let catalog_image = format!("{}/fixtures/widget-catalog:latest", registry.host());
    // The catalog alone (no base): upstream's render reads /configs the same
    // with or without an opm below it, and the published opm image is not
    // reachable from tests.
    let pushes = [
        ("bundle", fixture("bundle"), &bundle_image, &[][..]),
        (
            "catalog",
            fixture("catalog"),
            &catalog_image,
            &["--base-image", "scratch"][..],
        ),
    ];
    for (kind, dir, image, extra) in pushes {
        let mut args = vec![
            "alpha",
            kind,
            "push",
            dir.to_str().unwrap(),
            image,
            "--insecure",
        ];
        args.extend_from_slice(extra);
        let output = run(&ours(), &args, &cwd);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            compare(&upstream, &["render", "--use-http", image], false),
            "{image}: bytes differ"
        );
    }
}

/// A copy of the fixture bundle at another version.
pub(crate) fn bundle_at_version(root: &Path, version: &str) -> PathBuf {
    let dir = root.join(format!("bundle-{version}"));
    std::fs::create_dir_all(dir.join("manifests")).unwrap();
    std::fs::create_dir_all(dir.join("metadata")).unwrap();
    let source = fixture("bundle");
    for file in [
        "manifests/gadgets.fixtures.example.com.crd.yaml",
        "metadata/annotations.yaml",
    ] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    let csv = std::fs::read_to_string(
        source.join("manifests/widget-operator.clusterserviceversion.yaml"),
    )
    .unwrap()
    .replace(
        "widget-operator.v0.2.0",
        &format!("widget-operator.v{version}"),
    )
    .replace("version: 0.2.0", &format!("version: {version}"))
    .replace("  replaces: widget-operator.v0.1.0\n", "");
    std::fs::write(
        dir.join("manifests/widget-operator.clusterserviceversion.yaml"),
        csv,
    )
    .unwrap();
    dir
}

#[test]
fn templates_match_upstream() {
    let Some(upstream) = upstream() else {
        return;
    };
    let registry = Registry::start().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut images = Vec::new();
    for version in ["0.1.0", "0.1.1", "0.2.0", "1.0.0", "1.0.1"] {
        let dir = bundle_at_version(scratch.path(), version);
        let image = format!("{}/fixtures/widget-bundle:v{version}", registry.host());
        let output = run(
            &ours(),
            &[
                "alpha",
                "bundle",
                "push",
                dir.to_str().unwrap(),
                &image,
                "--insecure",
            ],
            scratch.path(),
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        images.push(image);
    }
    let templates = [
        format!(
            "schema: olm.semver\ngenerateMajorChannels: true\ngenerateMinorChannels: true\ncandidate:\n  bundles:\n  - image: {4}\n  - image: {3}\nfast:\n  bundles:\n  - image: {2}\nstable:\n  bundles:\n  - image: {0}\n  - image: {1}\n  - image: {2}\n",
            images[0], images[1], images[2], images[3], images[4]
        ),
        format!(
            "schema: olm.semver\ngenerateMajorChannels: true\nstable:\n  bundles:\n  - image: {0}\n  - image: {1}\n  - image: {2}\n  - image: {3}\n",
            images[0], images[1], images[3], images[4]
        ),
        format!(
            "schema: olm.template.basic\nentries:\n- schema: olm.package\n  name: widget\n  defaultChannel: stable\n- schema: olm.channel\n  package: widget\n  name: stable\n  entries:\n  - name: widget-operator.v0.1.0\n  - name: widget-operator.v0.2.0\n    replaces: widget-operator.v0.1.0\n- schema: olm.bundle\n  image: {0}\n- schema: olm.bundle\n  image: {1}\n",
            images[0], images[2]
        ),
    ];
    for (i, template) in templates.iter().enumerate() {
        let file = scratch.path().join(format!("template-{i}.yaml"));
        std::fs::write(&file, template).unwrap();
        let file = file.to_str().unwrap();
        compare_ok(
            &upstream,
            &["alpha", "render-template", file, "--use-http"],
            false,
        );
        compare_ok(
            &upstream,
            &[
                "alpha",
                "render-template",
                file,
                "--use-http",
                "--migrate-level",
                "bundle-object-to-csv-metadata",
            ],
            false,
        );
    }
}
