//! Malformed catalogs are reported, not crashed on; limits are named and hold;
//! bad requests get the right status codes.

use olm_registry::{CatalogIndex, IndexError, IndexLimits, IndexOptions, MAX_NAME_BYTES, api};

use crate::fixtures::{bundle, catalog, channel, code, package, serve, serve_index};

fn build(dir: &std::path::Path) -> Result<CatalogIndex, IndexError> {
    CatalogIndex::build(dir, &IndexOptions::default())
}

fn build_limited(dir: &std::path::Path, limits: IndexLimits) -> Result<CatalogIndex, IndexError> {
    CatalogIndex::build(
        dir,
        &IndexOptions {
            limits,
            ..IndexOptions::default()
        },
    )
}

fn problems(result: Result<CatalogIndex, IndexError>) -> Vec<String> {
    match result {
        Err(IndexError::Invalid { problems, total }) => {
            assert!(total >= problems.len());
            problems.iter().map(ToString::to_string).collect()
        }
        Err(other) => panic!("expected an invalid catalog, got: {other}"),
        Ok(_) => panic!("expected an invalid catalog, but it was indexed"),
    }
}

fn valid_package(name: &str) -> String {
    [
        package(name, "stable"),
        channel(name, "stable", &format!(r#"[{{"name":"{name}.v1.0.0"}}]"#)),
        bundle(name, &format!("{name}.v1.0.0"), "1.0.0", ""),
    ]
    .join("\n")
}

/// Payloads are decoded as they are indexed, as upstream's cache build
/// decodes them: one that does not decode refuses the catalog, under the
/// rule validate reports; a `null` where Go reads a zero value does not.
#[test]
fn payloads_that_do_not_decode_refuse_the_catalog() {
    let with = |extra: &str| {
        catalog(&[(
            "p/catalog.json",
            &[
                package("p", "stable"),
                channel("p", "stable", r#"[{"name":"p.v1.0.0"}]"#),
                bundle("p", "p.v1.0.0", "1.0.0", extra),
            ]
            .join("\n"),
        )])
    };
    let cases = [
        (
            r#"{"type":"olm.bundle.object","value":{"data":"!!"}}"#,
            "invalid base64",
            "[invalid-bundle-object]",
        ),
        (
            // base64 of "hello: [unclosed"
            r#"{"type":"olm.bundle.object","value":{"data":"aGVsbG86IFt1bmNsb3NlZA=="}}"#,
            "invalid yaml",
            "[invalid-bundle-object]",
        ),
        (
            r#"{"type":"olm.csv.metadata","value":{"keywords":[1]}}"#,
            "invalid olm.csv.metadata value",
            "[invalid-property]",
        ),
    ];
    for (extra, why, rule) in cases {
        let dir = with(extra);
        let found = problems(build(dir.path())).join("\n");
        assert!(
            found.contains(why) && found.contains(rule),
            "{extra}: {found}"
        );
    }
    // A bundle object that decodes, and nulls Go reads as zero values.
    let fine = [
        // base64 of {"kind":"ConfigMap"}
        r#"{"type":"olm.bundle.object","value":{"data":"eyJraW5kIjoiQ29uZmlnTWFwIn0="}}"#,
        r#"{"type":"olm.csv.metadata","value":{"keywords":["k",null],"maintainers":[null],"provider":null}}"#,
    ];
    for extra in fine {
        let dir = with(extra);
        assert!(build(dir.path()).is_ok(), "{extra}");
    }
}

#[test]
fn malformed_documents_are_reported_with_file_and_line() {
    let dir = catalog(&[
        ("good/catalog.json", &valid_package("good")),
        // A JSON syntax error on line 3: the rest of the file cannot be followed.
        (
            "broken-json/catalog.json",
            "{\"schema\":\"olm.package\",\n\"name\":\"x\",\n\"defaultChannel\": stable}\n",
        ),
        // A YAML syntax error in the second document.
        (
            "broken-yaml/catalog.yaml",
            "---\nschema: olm.package\nname: y\ndefaultChannel: stable\n---\nschema: [unclosed\n",
        ),
        // Valid JSON, but an OLM document of the wrong shape.
        (
            "wrong-shape/catalog.json",
            r#"{"schema":"olm.channel","package":"good","name":"beta","entries":"all of them"}"#,
        ),
        // No schema at all.
        ("no-schema/catalog.json", r#"{"name":"orphan"}"#),
        // Binary noise.
        ("noise.bin", "\u{0}\u{1}\u{2}\u{3}garbage\u{7f}"),
    ]);
    let found = problems(build(dir.path()));
    let joined = found.join("\n");
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("broken-json/catalog.json:3: invalid json")),
        "{joined}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("broken-yaml/catalog.yaml:") && p.contains("invalid yaml")),
        "{joined}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("wrong-shape/catalog.json:1: parse olm.channel")),
        "{joined}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains("missing root schema field")),
        "{joined}"
    );
    assert!(found.iter().any(|p| p.starts_with("noise.bin")), "{joined}");
}

#[test]
fn icons_are_decoded_as_upstreams_loader_decodes_them() {
    let with_icon = |name: &str, icon: &str| {
        valid_package(name).replacen(
            r#""schema":"olm.package","#,
            &format!(r#""schema":"olm.package","icon":{icon},"#),
            1,
        )
    };
    // Go's decoder: standard alphabet, padding, line breaks skipped; null
    // and a missing base64data are no icon.
    let dir = catalog(&[
        (
            "a/catalog.json",
            &with_icon("a", r#"{"base64data":"aGk=","mediatype":"image/png"}"#),
        ),
        (
            "b/catalog.json",
            &with_icon("b", r#"{"base64data":"aG\nk=","mediatype":"image/png"}"#),
        ),
        ("c/catalog.json", &with_icon("c", "null")),
        (
            "d/catalog.json",
            &with_icon("d", r#"{"mediatype":"image/png"}"#),
        ),
    ]);
    build(dir.path()).unwrap();

    let dir = catalog(&[
        ("good/catalog.json", &valid_package("good")),
        (
            "bad-data/catalog.json",
            &with_icon("bad-data", r#"{"base64data":"%%%"}"#),
        ),
        (
            "bad-shape/catalog.json",
            &with_icon("bad-shape", r#""aGk=""#),
        ),
    ]);
    let found = problems(build(dir.path()));
    let joined = found.join("\n");
    assert_eq!(found.len(), 2, "{joined}");
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("bad-data/catalog.json:1: icon data is not valid base64")),
        "{joined}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("bad-shape/catalog.json:1: invalid icon")),
        "{joined}"
    );
}

#[test]
fn documents_that_are_not_objects_are_refused_and_null_ones_passed_over() {
    let yaml_package = "schema: olm.package\nname: y\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: y\nname: stable\nentries:\n- name: y.v1.0.0\n---\nschema: olm.bundle\nname: y.v1.0.0\npackage: y\nimage: x\nproperties:\n- type: olm.package\n  value: {packageName: y, version: 1.0.0}\n";
    // As upstream's serve: null documents, JSON or YAML, are no documents,
    // and a leading byte order mark is dropped.
    let dir = catalog(&[
        (
            "good/catalog.json",
            &format!("{}\nnull\n", valid_package("good")),
        ),
        (
            "y/catalog.yaml",
            &format!("\u{feff}{}---\nnull\n", yaml_package),
        ),
    ]);
    let index = build(dir.path()).unwrap();
    assert_eq!(index.stats().packages, 2);
    assert_eq!(index.stats().custom_documents, 0);

    let dir = catalog(&[
        ("good/catalog.json", &valid_package("good")),
        (
            "json-array/catalog.json",
            "{\"schema\":\"x.custom\"}\n[\"a\"]\n",
        ),
        ("yaml-list/catalog.yaml", "- a\n"),
        ("yaml-scalar/catalog.yaml", "hello\n"),
        ("json-number/catalog.json", "{\"schema\":\"x.custom\"}\n1\n"),
    ]);
    let found = problems(build(dir.path()));
    let joined = found.join("\n");
    for (file, kind) in [
        ("json-array/catalog.json:2", "array"),
        ("yaml-list/catalog.yaml:1", "array"),
        ("yaml-scalar/catalog.yaml:1", "string"),
        ("json-number/catalog.json:2", "number"),
    ] {
        let wanted = format!(
            "{file}: invalid document: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
        );
        assert!(found.iter().any(|p| p == &wanted), "{wanted}\n{joined}");
    }
    assert_eq!(found.len(), 4, "{joined}");
}

#[test]
fn a_skip_range_that_does_not_parse_is_served_as_upstream_serves_it() {
    let dir = catalog(&[(
        "p/catalog.json",
        &[
            package("p", "stable"),
            channel(
                "p",
                "stable",
                r#"[{"name":"p.v1.0.0"},{"name":"p.v1.1.0","replaces":"p.v1.0.0","skipRange":"not a range"}]"#,
            ),
            bundle("p", "p.v1.0.0", "1.0.0", ""),
            bundle("p", "p.v1.1.0", "1.1.0", ""),
        ]
        .join("\n"),
    )]);
    build(dir.path()).unwrap();
}

#[test]
fn inconsistent_models_are_reported_in_upstreams_words() {
    let dir = catalog(&[(
        "bad/catalog.json",
        &[
            package("bad", "stable"),
            package("bad", "stable"),
            // Two heads; and an entry with no bundle.
            channel(
                "bad",
                "stable",
                r#"[{"name":"bad.v1.0.0"},{"name":"bad.v2.0.0"},{"name":"bad.v3.0.0"}]"#,
            ),
            channel("nowhere", "stable", r#"[]"#),
            bundle("bad", "bad.v1.0.0", "1.0.0", ""),
            bundle("bad", "bad.v2.0.0", "not-semver", ""),
            bundle("bad", "bad.v4.0.0", "4.0.0", ""),
            package("Not_A_Label", "stable"),
        ]
        .join("\n"),
    )]);
    let found = problems(build(dir.path()));
    let joined = found.join("\n");
    for expected in [
        r#"duplicate package "bad""#,
        r#"unknown package "nowhere" for channel "stable""#,
        r#"error parsing bundle "bad.v2.0.0" version "not-semver""#,
        "multiple channel heads found in graph: bad.v1.0.0, bad.v2.0.0, bad.v3.0.0",
        r#"no olm.bundle blobs found in package "bad" for olm.channel entries [bad.v3.0.0]"#,
        r#"package "bad", bundle "bad.v4.0.0" not found in any channel entries"#,
        r#"invalid package name "Not_A_Label""#,
    ] {
        assert!(
            joined.contains(expected),
            "missing {expected:?} in:\n{joined}"
        );
    }
    // Every problem names its file and line.
    assert!(
        found.iter().all(|p| p.starts_with("bad/catalog.json:")),
        "{joined}"
    );
}

#[test]
fn limits_are_named_when_exceeded() {
    let dir = catalog(&[
        ("a/catalog.json", &valid_package("a")),
        ("b/catalog.json", &valid_package("b")),
        ("c/catalog.json", &valid_package("c")),
    ]);
    let limit_field = |result: Result<CatalogIndex, IndexError>| match result {
        Err(IndexError::LimitExceeded { field, .. }) => field,
        Err(other) => panic!("expected a limit error, got: {other}"),
        Ok(_) => panic!("expected a limit error, but the catalog was indexed"),
    };
    let cases: [(IndexLimits, &str); 6] = [
        (
            IndexLimits {
                max_files: 2,
                ..IndexLimits::default()
            },
            "max_files",
        ),
        (
            IndexLimits {
                max_packages: 2,
                ..IndexLimits::default()
            },
            "max_packages",
        ),
        (
            IndexLimits {
                max_bundles: 2,
                ..IndexLimits::default()
            },
            "max_bundles",
        ),
        (
            IndexLimits {
                max_channel_entries: 2,
                ..IndexLimits::default()
            },
            "max_channel_entries",
        ),
        (
            IndexLimits {
                max_documents: 5,
                ..IndexLimits::default()
            },
            "max_documents",
        ),
        (
            IndexLimits {
                max_document_bytes: 100,
                ..IndexLimits::default()
            },
            "max_document_bytes",
        ),
    ];
    for (limits, field) in cases {
        assert_eq!(limit_field(build_limited(dir.path(), limits)), field);
    }
    let err = build_limited(
        dir.path(),
        IndexLimits {
            max_total_bytes: 10,
            ..IndexLimits::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "catalog exceeds the limit of 10 bytes in all files (IndexLimits::max_total_bytes)"
    );
}

#[test]
fn problems_past_the_reported_limit_are_counted_not_listed() {
    let packages: Vec<String> = (0..7)
        .map(|i| package(&format!("Not_A_Label_{i}"), "stable"))
        .collect();
    let dir = catalog(&[("labels/catalog.json", &packages.join("\n"))]);
    let invalid = |result: Result<CatalogIndex, IndexError>| match result {
        Err(IndexError::Invalid { problems, total }) => (problems, total),
        Err(other) => panic!("expected an invalid catalog, got: {other}"),
        Ok(_) => panic!("expected an invalid catalog, but it was indexed"),
    };
    // Under the default limit, every problem is listed.
    let (all, total) = invalid(build(dir.path()));
    assert_eq!(all.len(), total);
    assert!(total >= 7, "{total}");
    let limit = 3;
    let error = build_limited(
        dir.path(),
        IndexLimits {
            max_reported_problems: limit,
            ..IndexLimits::default()
        },
    )
    .unwrap_err();
    let text = error.to_string();
    let (listed, counted) = invalid(Err(error));
    assert_eq!(counted, total);
    assert_eq!(
        listed.iter().map(ToString::to_string).collect::<Vec<_>>(),
        all[..limit]
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + limit + 1, "{text}");
    assert_eq!(lines[0], format!("invalid catalog: {total} problem(s)"));
    assert_eq!(
        lines[limit + 1],
        format!("  ... and {} more", total - limit),
        "{text}"
    );
}

#[test]
fn an_unterminated_huge_document_is_refused_not_buffered() {
    // An object that never closes: the indexer must stop at the document
    // limit instead of reading the whole file into memory.
    let mut text = String::from("{\"schema\":\"olm.bundle\",\"name\":\"");
    text.push_str(&"x".repeat(3 << 20));
    let dir = catalog(&[("huge/catalog.json", &text)]);
    let err = build_limited(
        dir.path(),
        IndexLimits {
            max_document_bytes: 1 << 20,
            ..IndexLimits::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            IndexError::LimitExceeded {
                field: "max_document_bytes",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_path_that_is_not_a_directory_is_refused() {
    let dir = catalog(&[("file.json", "{}")]);
    let err = build(&dir.path().join("file.json")).unwrap_err();
    assert!(matches!(err, IndexError::NotADirectory { .. }), "{err}");
    let err = build(&dir.path().join("missing")).unwrap_err();
    assert!(matches!(err, IndexError::Read { .. }), "{err}");
}

#[cfg(unix)]
#[test]
fn symbolic_links_leading_outside_the_catalog_are_refused() {
    use std::os::unix::fs::symlink;

    // The served root is `parent/catalog`; `parent/secret.json` is a valid
    // catalog file outside it, so a scan that followed the link would
    // serve it without complaint.
    let cases: &[(&str, &str, &str)] = &[
        ("an absolute link", "evil/catalog.json", "/etc/passwd"),
        (
            "a relative link climbing out",
            "evil/catalog.json",
            "../../secret.json",
        ),
        (
            "a link to a link outside",
            "evil/catalog.json",
            "../hop.json",
        ),
        (
            "an ignore file outside",
            "evil/.indexignore",
            "../../secret.json",
        ),
    ];
    for (name, link, target) in cases {
        let parent = tempfile::tempdir().unwrap();
        std::fs::write(parent.path().join("secret.json"), valid_package("secret")).unwrap();
        let root = parent.path().join("catalog");
        std::fs::create_dir_all(root.join("evil")).unwrap();
        std::fs::write(root.join("app.json"), valid_package("app")).unwrap();
        symlink("../secret.json", root.join("hop.json")).unwrap();
        std::fs::write(root.join(".indexignore"), "hop.json\n").unwrap();
        symlink(target, root.join(link)).unwrap();

        let err = build(&root)
            .err()
            .unwrap_or_else(|| panic!("{name}: indexed"));
        let text = err.to_string();
        assert!(
            matches!(&err, IndexError::Read { path, .. } if path.ends_with(link)),
            "{name}: {text}"
        );
        assert!(
            text.contains("outside the catalog root")
                && text.contains("must resolve inside the served directory"),
            "{name}: {text}"
        );
    }
}

#[cfg(unix)]
#[test]
fn symbolic_links_inside_the_catalog_are_followed() {
    // A link to a file the scan itself skips (ignored), so the package is
    // read once, through the link.
    let dir = catalog(&[
        ("store/app.json", &valid_package("app")),
        (".indexignore", "store/\n"),
    ]);
    std::fs::create_dir_all(dir.path().join("app")).unwrap();
    std::os::unix::fs::symlink("../store/app.json", dir.path().join("app/catalog.json")).unwrap();
    // A root reached through a link of its own still works.
    let outer = tempfile::tempdir().unwrap();
    let linked_root = outer.path().join("configs");
    std::os::unix::fs::symlink(dir.path(), &linked_root).unwrap();
    for root in [dir.path(), linked_root.as_path()] {
        let index = build(root).unwrap();
        assert_eq!(index.package_names().collect::<Vec<_>>(), ["app"]);
    }
}

#[tokio::test]
async fn bad_requests_get_invalid_argument_and_unknown_names_not_found() {
    let dir = catalog(&[("app/catalog.json", &valid_package("app"))]);
    let (_server, client) = serve(dir.path()).await;
    let huge = "a".repeat(MAX_NAME_BYTES + 1);

    let err = client.get_package("").await.unwrap_err();
    assert_eq!(code(&err), tonic::Code::InvalidArgument);
    let err = client.get_package(&huge).await.unwrap_err();
    assert_eq!(code(&err), tonic::Code::InvalidArgument);
    assert!(
        !err.to_string().contains(&huge),
        "a huge name is not echoed back"
    );
    let err = client
        .get_bundle("app", "", "app.v1.0.0")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::InvalidArgument);
    let err = client
        .get_bundle_for_channel("app", &huge)
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::InvalidArgument);
    let err = client
        .get_channel_entries_that_replace("")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::InvalidArgument);
    let err = client
        .get_default_bundle_that_provides(olm_registry::GvkQuery::new("", "", "Kind"))
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::InvalidArgument);

    let err = client.get_package("nope").await.unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
    let err = client
        .get_bundle_for_channel("nope", "stable")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
    let err = client
        .get_bundle_that_replaces("app.v0.9.0", "nope", "stable")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
    assert!(err.to_string().contains("package nope not found"));
}

#[tokio::test]
async fn a_catalog_changed_after_indexing_is_reported_not_served_as_garbage() {
    let dir = catalog(&[("app/catalog.json", &valid_package("app"))]);
    let index = build(dir.path()).unwrap();
    let (_server, client) = serve_index(index).await;
    std::fs::write(
        dir.path().join("app/catalog.json"),
        format!(
            "{}\n{}",
            valid_package("app"),
            r#"{"schema":"example.com.more"}"#
        ),
    )
    .unwrap();
    let err = client
        .get_bundle_for_channel("app", "stable")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::Internal);
    assert!(
        err.to_string().contains("changed after it was indexed"),
        "{err}"
    );
    // Answers from the index alone still work.
    let package: api::Package = client.get_package("app").await.unwrap();
    assert_eq!(package.channels[0].csv_name, "app.v1.0.0");
}
