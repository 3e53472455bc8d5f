//! The built `opm` binary on its own fixtures and the shared corpus: output,
//! files written and exit codes, including on bad input.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn opm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opm"))
        .args(args)
        .env_remove("HELP_ALPHA")
        .output()
        .unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The JSON documents of a stream.
fn documents(text: &str) -> Vec<serde_json::Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<serde_json::Value>()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn init_writes_an_olm_package() {
    let dir = tempfile::tempdir().unwrap();
    let readme = dir.path().join("README.md");
    std::fs::write(&readme, "# Widget\n").unwrap();
    let output = opm(&[
        "init",
        "widget",
        "-c",
        "stable",
        "-d",
        readme.to_str().unwrap(),
    ]);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "{\n    \"schema\": \"olm.package\",\n    \"name\": \"widget\",\n    \"defaultChannel\": \"stable\",\n    \"description\": \"# Widget\\n\"\n}\n"
    );
    let output = opm(&["init", "widget", "-o", "yaml"]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("name: widget"),
        "{}",
        stdout(&output)
    );

    let icon = dir.path().join("icon.png");
    std::fs::write(&icon, b"\x89PNG\r\n\x1a\n0000").unwrap();
    let output = opm(&["init", "widget", "-i", icon.to_str().unwrap()]);
    assert_exit(&output, 0);
    let doc = &documents(&stdout(&output))[0];
    assert_eq!(doc["icon"]["mediatype"], "image/png");
    assert_eq!(doc["icon"]["base64data"], "iVBORw0KGgowMDAw");
}

#[test]
fn init_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("icon.svg");
    std::fs::write(&svg, "<svg/>").unwrap();
    for args in [
        vec!["init"],
        vec!["init", "a", "b"],
        vec!["init", "widget", "-o", "xml"],
        vec!["init", "widget", "-i", "/nonexistent/icon.png"],
        vec!["init", "widget", "-i", svg.to_str().unwrap()],
    ] {
        let output = opm(&args);
        assert_exit(&output, 1);
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn render_bundle_directory() {
    let bundle = fixture("bundle");
    let output = opm(&["render", bundle.to_str().unwrap()]);
    assert_exit(&output, 0);
    let docs = documents(&stdout(&output));
    assert_eq!(docs.len(), 1);
    let doc = &docs[0];
    assert_eq!(doc["schema"], "olm.bundle");
    assert_eq!(doc["name"], "widget-operator.v0.2.0");
    assert_eq!(doc["package"], "widget");
    assert_eq!(doc["image"], "");
    let types: Vec<&str> = doc["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "olm.gvk",
            "olm.package",
            "olm.bundle.object",
            "olm.bundle.object"
        ]
    );
    assert_eq!(
        doc["relatedImages"],
        serde_json::json!([{"name": "controller", "image": "registry.fixture.example/widget/controller:v0.2.0"}])
    );
}

#[test]
fn render_with_an_image_template_and_migration() {
    let bundle = fixture("bundle");
    let output = opm(&[
        "render",
        bundle.to_str().unwrap(),
        "--alpha-image-ref-template",
        "registry.fixture.example/{{.Package}}/bundle:v{{.Version}}",
        "--migrate-level",
        "bundle-object-to-csv-metadata",
        "-o",
        "yaml",
    ]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.contains("image: registry.fixture.example/widget/bundle:v0.2.0"),
        "{text}"
    );
    assert!(text.contains("type: olm.csv.metadata"), "{text}");
    assert!(!text.contains("olm.bundle.object"), "{text}");
}

#[test]
fn render_catalog_directory_round_trips() {
    let catalog = fixture("catalog");
    let output = opm(&["render", catalog.to_str().unwrap()]);
    assert_exit(&output, 0);
    let original = std::fs::read_to_string(catalog.join("widget/catalog.json")).unwrap();
    assert_eq!(stdout(&output), original);
    // Several references are concatenated.
    let output = opm(&[
        "render",
        catalog.to_str().unwrap(),
        fixture("bundle").to_str().unwrap(),
    ]);
    assert_exit(&output, 0);
    assert_eq!(documents(&stdout(&output)).len(), 5);
}

/// Catalogs come out as upstream's loader and writer leave them: every
/// escape class in typed strings and raw values, numbers as float64, keys
/// of raw values sorted, the icon's base64 from a YAML block scalar
/// re-encoded. The expected bytes were written by upstream's `declcfg` code
/// (load, then `WriteJSON`) built with Go 1.26; `tests/upstream.rs` compares
/// with upstream's binary too.
#[test]
fn render_writes_catalogs_byte_for_byte_as_upstream() {
    let output = opm(&["render", fixture("catalog-escapes").to_str().unwrap()]);
    assert_exit(&output, 0);
    let expected = std::fs::read(fixture("catalog-escapes-rendered.json")).unwrap();
    if output.stdout != expected {
        let (ours, theirs) = (stdout(&output), String::from_utf8(expected).unwrap());
        let line = ours
            .lines()
            .zip(theirs.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "line {}: ours {:?} / upstream {:?}",
            line + 1,
            ours.lines().nth(line),
            theirs.lines().nth(line)
        );
    }
}

/// Upstream refuses an icon whose base64 Go cannot decode, and so do we,
/// naming the field and Go's offset.
#[test]
fn render_refuses_an_icon_that_is_not_base64() {
    let output = opm(&["render", fixture("catalog-bad-icon").to_str().unwrap()]);
    assert_exit(&output, 1);
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad/catalog.yaml")
            && stderr.contains("icon.base64data: illegal base64 data at input byte 4"),
        "{stderr}"
    );
}

#[test]
fn render_refuses_bad_input() {
    let file = fixture("bundle/metadata/annotations.yaml");
    for args in [
        vec!["render"],
        vec!["render", "-o", "xml", "."],
        vec!["render", "--migrate-level", "nope", "."],
        vec!["render", "--migrate", "--migrate-level", "none", "."],
        vec!["render", file.to_str().unwrap()],
        vec!["render", "Not A Reference!"],
        vec![
            "render",
            fixture("invalid-catalog/missing").to_str().unwrap(),
        ],
        vec!["render", "--alpha-image-ref-template", "{{.Nope}}", "."],
        vec!["render", "--unknown-flag", "."],
        vec!["no-such-command"],
    ] {
        let output = opm(&args);
        assert_exit(&output, 1);
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn help_exits_zero() {
    assert_exit(&opm(&["--help"]), 0);
    assert_exit(&opm(&["render", "--help"]), 0);
    assert_exit(&opm(&[]), 0);
    let output = opm(&["version"]);
    assert_exit(&output, 0);
    assert!(stdout(&output).starts_with("Version: "));
}

#[test]
fn validate_exit_codes_and_structured_output() {
    assert_exit(&opm(&["validate", fixture("catalog").to_str().unwrap()]), 0);
    let output = opm(&["validate", fixture("invalid-catalog").to_str().unwrap()]);
    assert_exit(&output, 1);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("default channel \"missing\""),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = opm(&[
        "validate",
        "-o",
        "json",
        fixture("invalid-catalog").to_str().unwrap(),
    ]);
    assert_exit(&output, 1);
    let result: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(result["passed"], false);
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("broken")
    );
    let output = opm(&[
        "validate",
        "-o",
        "yaml",
        fixture("catalog").to_str().unwrap(),
    ]);
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "passed: true\n\n");
    for args in [
        vec!["validate"],
        vec!["validate", "/nonexistent"],
        vec![
            "validate",
            fixture("catalog/widget/catalog.json").to_str().unwrap(),
        ],
        vec![
            "validate",
            "-o",
            "xml",
            fixture("catalog").to_str().unwrap(),
        ],
    ] {
        assert_exit(&opm(&args), 1);
    }
}

#[test]
fn generate_dockerfile_writes_upstreams_text() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("my-catalog");
    std::fs::create_dir(&catalog).unwrap();
    let output = opm(&[
        "generate",
        "dockerfile",
        catalog.to_str().unwrap(),
        "-l",
        "b=2,a=1",
    ]);
    assert_exit(&output, 0);
    let text = std::fs::read_to_string(dir.path().join("my-catalog.Dockerfile")).unwrap();
    // Upstream's text, with this version's opm image as the default builder
    // and base where upstream has quay.io/operator-framework/opm:latest.
    let opm_image = concat!("ghcr.io/olm-rs/opm:", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        text,
        format!(
            r#"# The builder image is expected to contain
# /bin/opm (with serve subcommand)
FROM {opm_image} as builder

# Copy FBC root into image at /configs and pre-populate serve cache
ADD my-catalog /configs
RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]

FROM {opm_image}
# The base image is expected to contain
# /bin/opm (with serve subcommand) and /bin/grpc_health_probe

# Configure the entrypoint and command
ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]

COPY --from=builder /configs /configs
COPY --from=builder /tmp/cache /tmp/cache

# Set FBC-specific label for the location of the FBC root directory
# in the image
LABEL operators.operatorframework.io.index.configs.v1=/configs

# Set other custom labels
LABEL "a"="1"
LABEL "b"="2"
"#
        )
    );
    // It never overwrites.
    assert_exit(
        &opm(&["generate", "dockerfile", catalog.to_str().unwrap()]),
        1,
    );
    std::fs::remove_file(dir.path().join("my-catalog.Dockerfile")).unwrap();
    for args in [
        vec![
            "generate",
            "dockerfile",
            catalog.to_str().unwrap(),
            "-b",
            "scratch",
        ],
        vec![
            "generate",
            "dockerfile",
            catalog.to_str().unwrap(),
            "-l",
            "novalue",
        ],
        vec!["generate", "dockerfile", "/nonexistent/dir"],
        vec!["generate", "dockerfile"],
    ] {
        assert_exit(&opm(&args), 1);
    }
    assert!(!dir.path().join("my-catalog.Dockerfile").exists());
}

#[test]
fn render_every_corpus_bundle_and_catalog() {
    let Some(testdata) = olm_testkit::testdata() else {
        return;
    };
    let mut bundles = 0;
    for package in std::fs::read_dir(testdata.join("bundles")).unwrap() {
        for version in std::fs::read_dir(package.unwrap().path()).unwrap() {
            let dir = version.unwrap().path();
            if !dir.join("manifests").is_dir() || !dir.join("metadata").is_dir() {
                continue;
            }
            let output = opm(&["render", dir.to_str().unwrap()]);
            // Upstream refuses a few real bundles too (for example with
            // no CSV); those must fail cleanly, with nothing on stdout.
            match output.status.code() {
                Some(0) => {
                    let docs = documents(&stdout(&output));
                    assert_eq!(docs.len(), 1, "{}", dir.display());
                    assert_eq!(docs[0]["schema"], "olm.bundle");
                    bundles += 1;
                }
                Some(1) => assert!(output.stdout.is_empty(), "{}", dir.display()),
                other => panic!("{}: exit {other:?}", dir.display()),
            }
        }
    }
    assert!(bundles > 400, "only {bundles} bundles rendered");
    for catalog in std::fs::read_dir(testdata.join("catalogs")).unwrap() {
        let dir = catalog.unwrap().path();
        let output = opm(&["render", dir.to_str().unwrap()]);
        assert_exit(&output, 0);
        assert!(documents(&stdout(&output)).len() > 10, "{}", dir.display());
    }
}
