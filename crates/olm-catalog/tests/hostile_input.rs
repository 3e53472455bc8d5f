//! Hostile input: every limit of `olm_catalog::limits` is hit with a clear
//! error that names the file (and document), and nothing panics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use olm_catalog::{
    bundle::{BundleError, LoadBundleOptions, RegistryBundle},
    document::DocumentErrorKind,
    fbc::{Catalog, LoadError, LoadOptions},
    files::FileError,
    limits::{self, Limits},
};
use proptest::prelude::*;

fn options(limits: Limits) -> LoadOptions {
    LoadOptions {
        limits,
        threads: 1,
        ..LoadOptions::default()
    }
}

fn document_kind(err: LoadError) -> (String, DocumentErrorKind) {
    match err {
        LoadError::Document(e) => (e.location.to_string(), e.kind),
        other => panic!("expected a document error, got {other}"),
    }
}

#[test]
fn the_default_limits_are_what_the_docs_say() {
    let l = Limits::default();
    assert_eq!(l.max_file_bytes, limits::MAX_FILE_BYTES);
    assert_eq!(l.max_document_bytes, limits::MAX_DOCUMENT_BYTES);
    assert_eq!(l.max_documents_per_file, limits::MAX_DOCUMENTS_PER_FILE);
    assert_eq!(l.max_nesting_depth, limits::MAX_NESTING_DEPTH);
    assert_eq!(Limits::bundle().max_total_bytes, limits::MAX_BUNDLE_BYTES);
    assert_eq!(Limits::bundle().max_files, limits::MAX_BUNDLE_FILES);
}

#[test]
fn oversized_files_are_refused_before_parsing() {
    let limits = Limits {
        max_file_bytes: 1024,
        ..Limits::default()
    };
    let big = vec![b'#'; 2048];
    let err = Catalog::load_files(
        [("pkg/catalog.yaml", big.clone())],
        &options(limits.clone()),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::Files(FileError::FileTooLarge {
                size: 2048,
                limit: 1024,
                ..
            })
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("pkg/catalog.yaml: file is 2048 bytes"),
        "{err}"
    );
    // The same from a directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("catalog.yaml"), &big).unwrap();
    let err = Catalog::load_dir_with(dir.path(), &options(limits)).unwrap_err();
    assert!(
        matches!(err, LoadError::Files(FileError::FileTooLarge { .. })),
        "{err}"
    );
}

#[test]
fn total_size_and_file_count_are_bounded() {
    let limits = Limits {
        max_files: 3,
        ..Limits::default()
    };
    let files: Vec<(String, Vec<u8>)> =
        (0..4).map(|i| (format!("f{i}.yaml"), Vec::new())).collect();
    let err = Catalog::load_files(files, &options(limits)).unwrap_err();
    assert!(
        matches!(err, LoadError::Files(FileError::TooManyFiles { limit: 3 })),
        "{err}"
    );
    let limits = Limits {
        max_total_bytes: 100,
        ..Limits::default()
    };
    let files: Vec<(String, Vec<u8>)> = (0..3)
        .map(|i| (format!("f{i}.yaml"), vec![b' '; 40]))
        .collect();
    let err = Catalog::load_files(files, &options(limits)).unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::Files(FileError::TooManyBytes { limit: 100 })
        ),
        "{err}"
    );
}

#[test]
fn oversized_and_too_many_documents() {
    let limits = Limits {
        max_document_bytes: 64,
        max_documents_per_file: 10,
        ..Limits::default()
    };
    let huge = format!("schema: olm.package\nname: {}\n", "a".repeat(100));
    let (location, kind) =
        document_kind(Catalog::load_file("c.yaml", huge.as_bytes(), &limits).unwrap_err());
    assert!(
        matches!(kind, DocumentErrorKind::DocumentTooLarge { limit: 64, .. }),
        "{kind}"
    );
    assert_eq!(location, "c.yaml, document index 0 (line 1)");
    let many = "schema: olm.package\n---\n".repeat(11);
    let (location, kind) =
        document_kind(Catalog::load_file("c.yaml", many.as_bytes(), &limits).unwrap_err());
    assert_eq!(kind, DocumentErrorKind::TooManyDocuments { limit: 10 });
    assert_eq!(location, "c.yaml, document index 10 (line 21)");
    let json_many = "{\"schema\":\"x\"}".repeat(11);
    let (_, kind) =
        document_kind(Catalog::load_file("c.json", json_many.as_bytes(), &limits).unwrap_err());
    assert_eq!(kind, DocumentErrorKind::TooManyDocuments { limit: 10 });
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for depth in [limits::MAX_NESTING_DEPTH + 1, 10_000, 1_000_000] {
        let yaml = format!("schema: x\nv: {}{}\n", "[".repeat(depth), "]".repeat(depth));
        let (_, kind) = document_kind(
            Catalog::load_file("deep.yaml", yaml.as_bytes(), &Limits::default()).unwrap_err(),
        );
        assert!(
            matches!(
                kind,
                DocumentErrorKind::TooDeep { .. } | DocumentErrorKind::Yaml { .. }
            ),
            "{kind}"
        );
        let json = format!(
            "{{\"schema\":\"x\",\"v\":{}{}}}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let (_, kind) = document_kind(
            Catalog::load_file("deep.json", json.as_bytes(), &Limits::default()).unwrap_err(),
        );
        assert_eq!(
            kind,
            DocumentErrorKind::TooDeep {
                limit: limits::MAX_NESTING_DEPTH
            }
        );
    }
    // Nested block mappings, too.
    let yaml: String = (0..500)
        .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
        .collect::<String>()
        + &" ".repeat(500)
        + "v\n";
    let (_, kind) = document_kind(
        Catalog::load_file("deep.yaml", yaml.as_bytes(), &Limits::default()).unwrap_err(),
    );
    assert!(matches!(kind, DocumentErrorKind::TooDeep { .. }), "{kind}");
    // Exactly at the limit is fine.
    let ok = format!(
        "{{\"schema\":\"x\",\"v\":{}{}}}",
        "[".repeat(99),
        "]".repeat(99)
    );
    Catalog::load_file("ok.json", ok.as_bytes(), &Limits::default()).unwrap();
}

#[test]
fn alias_expansion_bombs_are_refused() {
    let mut yaml = String::from("schema: x\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        yaml.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
    }
    let (_, kind) = document_kind(
        Catalog::load_file("bomb.yaml", yaml.as_bytes(), &Limits::default()).unwrap_err(),
    );
    assert!(
        matches!(kind, DocumentErrorKind::Yaml { ref message } if message.contains("repetition limit")),
        "{kind}"
    );
}

#[test]
fn malformed_yaml_and_json_name_file_and_document() {
    let (location, kind) = document_kind(
        Catalog::load_file(
            "p/catalog.yaml",
            b"schema: olm.package\nname: a\n---\nschema: [\n",
            &Limits::default(),
        )
        .unwrap_err(),
    );
    assert!(
        location.starts_with("p/catalog.yaml, document index 1"),
        "{location}"
    );
    assert!(matches!(kind, DocumentErrorKind::Yaml { .. }));
    let (location, kind) = document_kind(
        Catalog::load_file(
            "p/catalog.json",
            br#"{"schema":"olm.package"} {"schema": }"#,
            &Limits::default(),
        )
        .unwrap_err(),
    );
    assert!(
        location.starts_with("p/catalog.json, document index 1"),
        "{location}"
    );
    assert!(matches!(kind, DocumentErrorKind::Json { .. }));
    let (_, kind) = document_kind(
        Catalog::load_file("p/catalog.yaml", b"- just\n- a list\n", &Limits::default())
            .unwrap_err(),
    );
    assert_eq!(kind, DocumentErrorKind::NotAnObject { found: "an array" });
}

#[test]
fn invalid_utf8_is_refused_with_its_offset() {
    let err = Catalog::load_file(
        "bad.yaml",
        b"schema: olm.package\nname: \xc3\x28\n",
        &Limits::default(),
    )
    .unwrap_err();
    let (location, kind) = document_kind(err);
    assert_eq!(kind, DocumentErrorKind::InvalidUtf8 { offset: 26 });
    assert!(location.starts_with("bad.yaml"));
}

#[test]
fn path_traversal_in_memory_is_refused() {
    for path in [
        "../evil.yaml",
        "a/../../evil.yaml",
        "/etc/passwd",
        "a\\..\\b",
    ] {
        let err = Catalog::load_files([(path, b"schema: x\n".to_vec())], &LoadOptions::default())
            .unwrap_err();
        assert!(
            matches!(err, LoadError::Files(FileError::UnsafePath { .. })),
            "{path}: {err}"
        );
        let err = RegistryBundle::load_files([(path, b"x".to_vec())], &LoadBundleOptions::new())
            .unwrap_err();
        assert!(
            matches!(err, BundleError::Files(FileError::UnsafePath { .. })),
            "{path}: {err}"
        );
    }
    let err = RegistryBundle::load_files(
        [("manifests/../metadata/annotations.yaml", b"x".to_vec())],
        &LoadBundleOptions::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("leaves the root"), "{err}");
}

#[cfg(unix)]
#[test]
fn symlinks_leaving_the_root_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.yaml"),
        "schema: olm.package\nname: stolen\n",
    )
    .unwrap();
    // A catalog.
    let catalog = tempfile::tempdir().unwrap();
    std::fs::create_dir(catalog.path().join("pkg")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        catalog.path().join("pkg/catalog.yaml"),
    )
    .unwrap();
    let err = Catalog::load_dir(catalog.path()).unwrap_err();
    assert!(
        matches!(err, LoadError::Files(FileError::SymlinkEscapes { .. })),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("pkg/catalog.yaml: symbolic link leaves the root directory"),
        "{err}"
    );
    // A relative link that climbs out.
    std::fs::remove_file(catalog.path().join("pkg/catalog.yaml")).unwrap();
    std::os::unix::fs::symlink(
        "../../../../../../../../etc/hostname",
        catalog.path().join("pkg/catalog.yaml"),
    )
    .unwrap();
    assert!(Catalog::load_dir(catalog.path()).is_err());
    // A bundle whose manifests directory is a link out.
    let bundle = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), bundle.path().join("manifests")).unwrap();
    std::fs::create_dir(bundle.path().join("metadata")).unwrap();
    let err = RegistryBundle::load_dir(bundle.path()).unwrap_err();
    assert!(
        matches!(err, BundleError::Files(FileError::SymlinkEscapes { .. })),
        "{err}"
    );
    // A bundle manifest linking out.
    let bundle = tempfile::tempdir().unwrap();
    std::fs::create_dir(bundle.path().join("manifests")).unwrap();
    std::fs::create_dir(bundle.path().join("metadata")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        bundle.path().join("manifests/csv.yaml"),
    )
    .unwrap();
    let err = RegistryBundle::load_dir(bundle.path()).unwrap_err();
    assert!(
        matches!(err, BundleError::Files(FileError::SymlinkEscapes { .. })),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn fifos_are_refused_instead_of_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("catalog.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        println!("skipping: mkfifo is not available");
        return;
    }
    let err = Catalog::load_dir(dir.path()).unwrap_err();
    assert!(
        matches!(err, LoadError::Files(FileError::NotARegularFile { .. })),
        "{err}"
    );
}

#[test]
fn hostile_bundles_fail_cleanly() {
    let annotations = b"annotations:\n  operators.operatorframework.io.bundle.package.v1: p\n  operators.operatorframework.io.bundle.channels.v1: s\n".to_vec();
    // Too large.
    let options = LoadBundleOptions {
        limits: Limits {
            max_total_bytes: 1000,
            ..Limits::bundle()
        },
        image_labels: None,
    };
    let err = RegistryBundle::load_files(
        [
            ("manifests/csv.yaml", vec![b' '; 2000]),
            ("metadata/annotations.yaml", annotations.clone()),
        ],
        &options,
    )
    .unwrap_err();
    assert!(
        matches!(err, BundleError::Files(FileError::TooManyBytes { .. })),
        "{err}"
    );
    // Too deep.
    let deep = format!(
        "kind: ClusterServiceVersion\nspec: {}{}\n",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let err = RegistryBundle::load_files(
        [
            ("manifests/csv.yaml", deep.into_bytes()),
            ("metadata/annotations.yaml", annotations.clone()),
        ],
        &LoadBundleOptions::new(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, BundleError::Document(e) if matches!(e.kind, DocumentErrorKind::TooDeep { .. })),
        "{err}"
    );
    // Garbage everywhere: skipped manifests, then no objects.
    let err = RegistryBundle::load_files(
        [
            ("manifests/a.yaml", b"\xff\xfe".to_vec()),
            ("manifests/b.yaml", b": : :".to_vec()),
            ("metadata/annotations.yaml", annotations),
        ],
        &LoadBundleOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(err, BundleError::NoObjects), "{err}");
}

#[test]
fn bundles_with_too_many_files_are_refused() {
    let annotations = b"annotations:\n  operators.operatorframework.io.bundle.package.v1: p\n  operators.operatorframework.io.bundle.channels.v1: s\n".to_vec();
    // In memory, at the default limit: the annotations and as many empty
    // manifests as make one file too many.
    let manifests = |count: usize| {
        (0..count)
            .map(|i| (format!("manifests/m{i}.yaml"), Vec::new()))
            .chain([("metadata/annotations.yaml".to_owned(), annotations.clone())])
            .collect::<Vec<_>>()
    };
    for (files, trips) in [
        (limits::MAX_BUNDLE_FILES, false),
        (limits::MAX_BUNDLE_FILES + 1, true),
    ] {
        let err = RegistryBundle::load_files(manifests(files - 1), &LoadBundleOptions::new())
            .unwrap_err();
        let tripped = matches!(
            &err,
            BundleError::Files(FileError::TooManyFiles { limit }) if *limit == limits::MAX_BUNDLE_FILES
        );
        assert_eq!(tripped, trips, "{files} files: {err}");
        if trips {
            assert!(err.to_string().contains("more than 10000 files"), "{err}");
        }
    }
    // From a directory, under a tightened limit.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::create_dir_all(dir.path().join("metadata")).unwrap();
    std::fs::write(dir.path().join("metadata/annotations.yaml"), &annotations).unwrap();
    for i in 0..3 {
        std::fs::write(dir.path().join(format!("manifests/m{i}.yaml")), b"").unwrap();
    }
    let options = LoadBundleOptions {
        limits: Limits {
            max_files: 3,
            ..Limits::bundle()
        },
        image_labels: None,
    };
    let err = RegistryBundle::load_dir_with(dir.path(), &options).unwrap_err();
    assert!(
        matches!(
            err,
            BundleError::Files(FileError::TooManyFiles { limit: 3 })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("more than 3 files"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn catalog_loading_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Catalog::load_file("fuzz", &bytes, &Limits::default());
    }

    #[test]
    fn catalog_loading_of_yaml_like_text_never_panics(text in "[-a-z:{}\\[\\],\"'&*!# \n]{0,300}") {
        if let Ok(catalog) = Catalog::load_file("fuzz.yaml", text.as_bytes(), &Limits::default()) {
            let _ = olm_catalog::validate::validate_catalog(&catalog);
            let _ = olm_catalog::render::to_string(&catalog, olm_catalog::render::Format::Yaml);
        }
    }

    #[test]
    fn bundle_loading_never_panics(
        csv in "[-a-zA-Z:{}\\[\\],\" \n]{0,200}",
        annotations in "[-a-z.:{}\\[\\] \n]{0,200}",
    ) {
        let files = [
            ("manifests/csv.yaml", format!("kind: ClusterServiceVersion\n{csv}").into_bytes()),
            ("metadata/annotations.yaml", annotations.into_bytes()),
        ];
        if let Ok(bundle) = RegistryBundle::load_files(files, &LoadBundleOptions::new()) {
            let _ = olm_catalog::validate::validate_bundle(&bundle);
        }
    }
}
