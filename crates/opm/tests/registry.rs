//! `opm alpha bundle push` / `alpha catalog push` (alone, and on a base
//! image), then `opm render IMAGE` and `opm alpha render-template basic`,
//! against the real docker-registry on loopback; and `opm serve` answering
//! a registry client.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use olm_testkit::registry::Registry;

fn opm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opm"))
        .args(args)
        .output()
        .unwrap()
}

fn opm_with_stdin(args: &[&str], stdin: &str) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_opm"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn ok(output: Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn bundle_push_then_render_from_the_registry() {
    let registry = Registry::start().unwrap();
    let image = format!("{}/fixtures/widget-bundle:v0.2.0", registry.host());
    let bundle = fixture("bundle");
    let pushed = ok(opm(&[
        "alpha",
        "bundle",
        "push",
        bundle.to_str().unwrap(),
        &image,
        "--insecure",
    ]));
    assert!(
        pushed.starts_with(&format!(
            "{}/fixtures/widget-bundle@sha256:",
            registry.host()
        )),
        "{pushed}"
    );

    // Without --insecure (or --use-http) the client speaks HTTPS and fails.
    let output = opm(&["alpha", "bundle", "push", bundle.to_str().unwrap(), &image]);
    assert_eq!(output.status.code(), Some(1));

    let from_image = ok(opm(&["render", "--use-http", &image]));
    let from_dir = ok(opm(&[
        "render",
        bundle.to_str().unwrap(),
        "--alpha-image-ref-template",
        &format!(
            "{}/fixtures/widget-bundle:v{{{{.Version}}}}",
            registry.host()
        ),
    ]));
    assert_eq!(from_image, from_dir);

    // The basic template renders bundle entries from their images.
    let template = format!(
        "schema: olm.template.basic\nentries:\n- schema: olm.package\n  name: widget\n  defaultChannel: stable\n- schema: olm.channel\n  package: widget\n  name: stable\n  entries:\n  - name: widget-operator.v0.2.0\n- schema: olm.bundle\n  image: {image}\n"
    );
    let rendered = ok(opm_with_stdin(
        &["alpha", "render-template", "basic", "--use-http"],
        &template,
    ));
    let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&rendered)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let schemas: Vec<&str> = docs.iter().map(|d| d["schema"].as_str().unwrap()).collect();
    assert_eq!(schemas, ["olm.package", "olm.channel", "olm.bundle"]);
    assert_eq!(docs[2]["image"], image.as_str());
    assert!(
        rendered.ends_with(&from_image),
        "bundle differs from opm render"
    );
    // Auto-detected from the schema, from a file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("template.yaml");
    std::fs::write(&file, &template).unwrap();
    assert_eq!(
        ok(opm(&[
            "alpha",
            "render-template",
            file.to_str().unwrap(),
            "--use-http"
        ])),
        rendered
    );
    // A bundle entry with more than an image is refused.
    let bad = template.replace(
        &format!("  image: {image}"),
        &format!("  image: {image}\n  package: widget"),
    );
    let output = opm_with_stdin(&["alpha", "render-template", "basic", "--use-http"], &bad);
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn catalog_push_then_render_from_the_registry() {
    let registry = Registry::start().unwrap();
    let image = format!("{}/fixtures/widget-catalog:latest", registry.host());
    let catalog = fixture("catalog");
    ok(opm(&[
        "alpha",
        "catalog",
        "push",
        catalog.to_str().unwrap(),
        &image,
        "--insecure",
        "--base-image",
        "scratch",
    ]));
    let from_image = ok(opm(&["render", "--use-http", &image]));
    let from_dir = ok(opm(&["render", catalog.to_str().unwrap()]));
    assert_eq!(from_image, from_dir);
    // An invalid catalog is never pushed.
    let bad = format!("{}/fixtures/broken:latest", registry.host());
    let output = opm(&[
        "alpha",
        "catalog",
        "push",
        fixture("invalid-catalog").to_str().unwrap(),
        &bad,
        "--insecure",
        "--base-image",
        "scratch",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let output = opm(&["render", "--use-http", &bad]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not found"));
}

/// A stand-in for the `opm` image: an executable at `/bin/opm`, a user, an
/// environment, a label, and an entrypoint and command of its own that the
/// catalog image must replace.
fn fixture_opm_base() -> olm_oci::BuiltImage {
    olm_oci::ImageBuilder::new()
        .add_executable("bin/opm", b"#!/bin/sh\necho fixture opm\n".to_vec())
        .unwrap()
        .add_file(
            "etc/passwd",
            b"nonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n".to_vec(),
        )
        .unwrap()
        .entrypoint(&["/bin/fixture-entrypoint"])
        .cmd(&["--fixture-flag"])
        .user("65532:65532")
        .env("PATH", "/bin")
        .label("org.opencontainers.image.title", "fixture-opm")
        .build()
        .unwrap()
}

fn push_image(registry: &Registry, image: &str, built: &olm_oci::BuiltImage) {
    let reference = olm_oci::Reference::parse(image).unwrap();
    let client =
        olm_oci::Client::new(olm_oci::ClientOptions::default().plain_http(registry.host()))
            .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(client.push_image(&reference, built))
        .unwrap();
}

#[test]
fn catalog_push_builds_on_a_base_image_that_serves_it() {
    let registry = Registry::start().unwrap();
    let base_image = format!("{}/fixtures/opm-base:v1", registry.host());
    let base = fixture_opm_base();
    push_image(&registry, &base_image, &base);
    let image = format!("{}/fixtures/served-catalog:latest", registry.host());
    let catalog = fixture("catalog");
    let pushed = ok(opm(&[
        "alpha",
        "catalog",
        "push",
        catalog.to_str().unwrap(),
        &image,
        "--base-image",
        &base_image,
        "--insecure",
    ]));
    assert!(
        pushed.starts_with(&format!(
            "{}/fixtures/served-catalog@sha256:",
            registry.host()
        )),
        "{pushed}"
    );

    let reference = olm_oci::Reference::parse(&image).unwrap();
    let client =
        olm_oci::Client::new(olm_oci::ClientOptions::default().plain_http(registry.host()))
            .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let pulled = runtime
        .block_on(client.pull_to_memory(&reference, &olm_oci::ExtractOptions::default()))
        .unwrap();
    let manifest = &pulled.manifest.manifest;
    assert_eq!(
        manifest.layers.len(),
        2,
        "the base's layer, then the catalog"
    );
    assert_eq!(manifest.layers[0], base.parsed.layers[0]);
    let base_config: serde_json::Value = serde_json::from_slice(&base.config).unwrap();
    let config = &pulled.manifest.config;
    assert_eq!(config.rootfs.diff_ids.len(), 2);
    assert_eq!(
        config.rootfs.diff_ids[0],
        base_config["rootfs"]["diff_ids"][0]
    );
    let run = &config.config;
    assert_eq!(
        run.entrypoint.as_deref(),
        Some(&["/bin/opm".to_owned()][..])
    );
    assert_eq!(
        run.cmd,
        Some(vec![
            "serve".to_owned(),
            "/configs".to_owned(),
            "--cache-dir=/tmp/cache".to_owned()
        ])
    );
    assert_eq!(run.user.as_deref(), Some("65532:65532"), "inherited");
    assert_eq!(run.env, Some(vec!["PATH=/bin".to_owned()]), "inherited");
    let labels = pulled.manifest.labels();
    assert_eq!(
        labels["operators.operatorframework.io.index.configs.v1"],
        "/configs"
    );
    assert_eq!(labels["org.opencontainers.image.title"], "fixture-opm");

    // The base's files and the whole catalog under /configs.
    assert!(pulled.files.contains_key("bin/opm"));
    assert!(pulled.files.contains_key("etc/passwd"));
    let catalog_file = "widget/catalog.json";
    assert_eq!(
        pulled.files[&format!("configs/{catalog_file}")],
        std::fs::read(catalog.join(catalog_file)).unwrap()
    );
    // And it renders as the directory does.
    let from_image = ok(opm(&["render", "--use-http", &image]));
    let from_dir = ok(opm(&["render", catalog.to_str().unwrap()]));
    assert_eq!(from_image, from_dir);
}

#[test]
fn catalog_push_on_a_missing_base_names_it_and_pushes_nothing() {
    let registry = Registry::start().unwrap();
    let missing = format!("{}/fixtures/no-such-base:v1", registry.host());
    let image = format!("{}/fixtures/orphan-catalog:latest", registry.host());
    let output = opm(&[
        "alpha",
        "catalog",
        "push",
        fixture("catalog").to_str().unwrap(),
        &image,
        "--base-image",
        &missing,
        "--insecure",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("pull base image {missing}")),
        "{stderr}"
    );
    assert!(stderr.contains("not found"), "{stderr}");
    let output = opm(&["render", "--use-http", &image]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not found"));
}

#[test]
fn render_of_an_unlabelled_image_names_the_problem() {
    let registry = Registry::start().unwrap();
    let image = format!("{}/fixtures/plain:latest", registry.host());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let reference = olm_oci::Reference::parse(&image).unwrap();
        let client =
            olm_oci::Client::new(olm_oci::ClientOptions::default().plain_http(registry.host()))
                .unwrap();
        let built = olm_oci::ImageBuilder::new()
            .label("org.example.other", "x")
            .add_file("hello.txt", b"hi".to_vec())
            .unwrap()
            .build()
            .unwrap();
        client.push_image(&reference, &built).await.unwrap();
    });
    let output = opm(&["render", "--use-http", &image]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("image type could not be determined, found labels"),
        "{stderr}"
    );
    assert!(stderr.contains("org.example.other=x"), "{stderr}");
}

#[test]
fn serve_answers_a_registry_client() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let cache = tempfile::tempdir().unwrap();
    let termination_log = cache.path().join("termination-log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_opm"))
        .args([
            "serve",
            fixture("catalog").to_str().unwrap(),
            "--port",
            &port.to_string(),
            "--cache-dir",
            cache.path().join("cache").to_str().unwrap(),
            "-t",
            termination_log.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let packages = runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let endpoint = format!("http://127.0.0.1:{port}");
            if let Ok(client) = olm_registry::RegistryClient::connect(
                &endpoint,
                olm_registry::ClientOptions::default(),
            )
            .await
                && let Ok(packages) = client.list_packages().await
            {
                break packages;
            }
            assert!(Instant::now() < deadline, "opm serve did not answer");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(packages, vec!["widget".to_owned()]);

    // --cache-only indexes and exits; a bad catalog exits 1.
    let output = opm(&[
        "serve",
        fixture("catalog").to_str().unwrap(),
        "--cache-only",
        "-t",
        termination_log.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0));
    let output = opm(&[
        "serve",
        "/nonexistent",
        "--cache-only",
        "-t",
        termination_log.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        std::fs::read_to_string(&termination_log)
            .unwrap()
            .contains("failed to load or rebuild cache")
    );
    let output = opm(&[
        "serve",
        fixture("catalog").to_str().unwrap(),
        "--cache-enforce-integrity",
        "-t",
        termination_log.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
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
fn semver_template_generates_channels_from_pushed_bundles() {
    let registry = Registry::start().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut images = Vec::new();
    for version in ["0.1.0", "0.1.1", "0.2.0", "1.0.0"] {
        let dir = bundle_at_version(scratch.path(), version);
        let image = format!("{}/fixtures/widget-bundle:v{version}", registry.host());
        ok(opm(&[
            "alpha",
            "bundle",
            "push",
            dir.to_str().unwrap(),
            &image,
            "--insecure",
        ]));
        images.push(image);
    }
    let template = format!(
        "schema: olm.semver\ngenerateMajorChannels: true\ngenerateMinorChannels: true\ncandidate:\n  bundles:\n  - image: {3}\nstable:\n  bundles:\n  - image: {0}\n  - image: {1}\n  - image: {2}\n",
        images[0], images[1], images[2], images[3]
    );
    let rendered = ok(opm_with_stdin(
        &["alpha", "render-template", "semver", "--use-http"],
        &template,
    ));
    let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&rendered)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let package = &docs[0];
    assert_eq!(package["schema"], "olm.package");
    assert_eq!(package["defaultChannel"], "stable-v0.2");
    assert_eq!(package["description"], "Manages widgets for tests.");
    let channels: Vec<(&str, &serde_json::Value)> = docs
        .iter()
        .filter(|d| d["schema"] == "olm.channel")
        .map(|d| (d["name"].as_str().unwrap(), &d["entries"]))
        .collect();
    let names: Vec<&str> = channels.iter().map(|c| c.0).collect();
    assert_eq!(
        names,
        [
            "candidate-v1",
            "candidate-v1.0",
            "stable-v0",
            "stable-v0.1",
            "stable-v0.2"
        ]
    );
    assert_eq!(
        *channels[2].1,
        serde_json::json!([
            {"name": "widget-operator.v0.1.0"},
            {"name": "widget-operator.v0.1.1", "skips": ["widget-operator.v0.1.0"]},
            {"name": "widget-operator.v0.2.0", "replaces": "widget-operator.v0.1.1", "skips": ["widget-operator.v0.1.0"]}
        ])
    );
    assert_eq!(
        docs.iter().filter(|d| d["schema"] == "olm.bundle").count(),
        4
    );
}
