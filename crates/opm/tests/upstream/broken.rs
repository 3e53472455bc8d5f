//! Broken catalogs, generated: one valid catalog and one variant per way a
//! catalog goes wrong. `opm validate` and `opm serve --cache-only` must give
//! upstream's verdict (exit code) on each, and `opm render` upstream's exit
//! code and output.

use std::path::Path;

use serde_json::{Value, json};

use super::{compare, upstream};

/// The valid base: two packages, a three-bundle upgrade graph with a skip
/// and a skipRange, a second channel, a dependency and a deprecation.
fn base() -> Vec<Value> {
    let bundle = |name: &str, package: &str, version: &str, extra: Vec<Value>| {
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": package, "version": version}}),
        ];
        properties.extend(extra);
        json!({
            "schema": "olm.bundle",
            "name": name,
            "package": package,
            "image": format!("quay.io/example/{name}:latest"),
            "properties": properties,
        })
    };
    vec![
        json!({"schema": "olm.package", "name": "widget", "defaultChannel": "stable", "description": "widgets"}),
        json!({"schema": "olm.channel", "package": "widget", "name": "stable", "entries": [
            {"name": "widget.v1.0.0"},
            {"name": "widget.v1.1.0", "replaces": "widget.v1.0.0"},
            {"name": "widget.v1.2.0", "replaces": "widget.v1.1.0", "skips": ["widget.v1.0.0"], "skipRange": ">=1.0.0 <1.2.0"},
        ]}),
        json!({"schema": "olm.channel", "package": "widget", "name": "fast", "entries": [
            {"name": "widget.v1.2.0"},
        ]}),
        bundle("widget.v1.0.0", "widget", "1.0.0", vec![]),
        bundle("widget.v1.1.0", "widget", "1.1.0", vec![]),
        bundle(
            "widget.v1.2.0",
            "widget",
            "1.2.0",
            vec![
                json!({"type": "olm.gvk", "value": {"group": "example.com", "kind": "Widget", "version": "v1"}}),
                json!({"type": "olm.package.required", "value": {"packageName": "gadget", "versionRange": ">=0.1.0"}}),
            ],
        ),
        json!({"schema": "olm.package", "name": "gadget", "defaultChannel": "alpha"}),
        json!({"schema": "olm.channel", "package": "gadget", "name": "alpha", "entries": [{"name": "gadget.v0.1.0"}]}),
        bundle("gadget.v0.1.0", "gadget", "0.1.0", vec![]),
        json!({"schema": "olm.deprecations", "package": "widget", "entries": [
            {"reference": {"schema": "olm.bundle", "name": "widget.v1.0.0"}, "message": "upgrade"},
        ]}),
    ]
}

fn remove(docs: &mut Vec<Value>, schema: &str, name: &str) {
    docs.retain(|d| !(d["schema"] == schema && d["name"] == name));
}

fn find<'a>(docs: &'a mut [Value], schema: &str, name: &str) -> &'a mut Value {
    docs.iter_mut()
        .find(|d| {
            d["schema"] == schema && (d["name"] == name || (name.is_empty() && d["name"].is_null()))
        })
        .unwrap()
}

/// A variant: its name and how it breaks the base (documents, or raw files).
enum Variant {
    Docs(&'static str, fn(&mut Vec<Value>)),
    Files(&'static str, &'static [(&'static str, &'static str)]),
    /// Files that upstream's `validate` and `render` refuse and ours accept,
    /// on purpose (docs/opm.md lists it): YAML documents with nothing in
    /// them. Upstream's `serve` accepts them too, and so does ours.
    Lenient(&'static str, &'static [(&'static str, &'static str)]),
}

/// The valid base as YAML (a macro, so variants can `concat!` onto it).
macro_rules! base_yaml {
    () => {
        "schema: olm.package\nname: a\ndefaultChannel: s\n---\nschema: olm.channel\npackage: a\nname: s\nentries:\n- name: a.v1\n---\nschema: olm.bundle\nname: a.v1\npackage: a\nimage: x\nproperties:\n- type: olm.package\n  value: {packageName: a, version: 1.0.0}\n"
    };
}
const BASE_YAML: &str = base_yaml!();

fn variants() -> Vec<Variant> {
    use Variant::{Docs, Files, Lenient};
    vec![
        Docs("valid", |_| {}),
        Docs("package document missing", |d| {
            remove(d, "olm.package", "gadget");
        }),
        Docs("default channel missing", |d| {
            find(d, "olm.package", "widget")["defaultChannel"] = json!("nope");
        }),
        Docs("no default channel", |d| {
            find(d, "olm.package", "widget")
                .as_object_mut()
                .unwrap()
                .remove("defaultChannel");
        }),
        Docs("entry names no bundle", |d| {
            find(d, "olm.channel", "fast")["entries"] = json!([{"name": "widget.v9.9.9"}]);
        }),
        Docs("duplicate bundle", |d| {
            let copy = find(d, "olm.bundle", "widget.v1.0.0").clone();
            d.push(copy);
        }),
        Docs("duplicate package", |d| {
            d.push(json!({"schema": "olm.package", "name": "gadget", "defaultChannel": "alpha"}));
        }),
        Docs("duplicate channel", |d| {
            let copy = find(d, "olm.channel", "fast").clone();
            d.push(copy);
        }),
        Docs("replaces cycle", |d| {
            find(d, "olm.channel", "stable")["entries"] = json!([
                {"name": "widget.v1.0.0", "replaces": "widget.v1.2.0"},
                {"name": "widget.v1.1.0", "replaces": "widget.v1.0.0"},
                {"name": "widget.v1.2.0", "replaces": "widget.v1.1.0"},
            ]);
        }),
        Docs("two channel heads", |d| {
            find(d, "olm.channel", "stable")["entries"] = json!([
                {"name": "widget.v1.0.0"},
                {"name": "widget.v1.1.0"},
                {"name": "widget.v1.2.0", "replaces": "widget.v1.0.0"},
            ]);
        }),
        Docs("channel without entries", |d| {
            find(d, "olm.channel", "fast")["entries"] = json!([]);
        }),
        Docs("invalid skipRange", |d| {
            find(d, "olm.channel", "stable")["entries"][2]["skipRange"] = json!("not a range");
        }),
        Docs("version not semver", |d| {
            find(d, "olm.bundle", "widget.v1.1.0")["properties"][0]["value"]["version"] =
                json!("one.one");
        }),
        Docs("bundle without olm.package", |d| {
            find(d, "olm.bundle", "gadget.v0.1.0")["properties"] = json!([]);
        }),
        Docs("two olm.package properties", |d| {
            let props = find(d, "olm.bundle", "gadget.v0.1.0")["properties"]
                .as_array_mut()
                .unwrap();
            props.push(json!({"type": "olm.package", "value": {"packageName": "gadget", "version": "0.2.0"}}));
        }),
        Docs("olm.package property names another package", |d| {
            find(d, "olm.bundle", "gadget.v0.1.0")["properties"][0]["value"]["packageName"] =
                json!("widget");
        }),
        Docs("two olm.csv.metadata properties", |d| {
            let props = find(d, "olm.bundle", "gadget.v0.1.0")["properties"]
                .as_array_mut()
                .unwrap();
            for _ in 0..2 {
                props.push(json!({"type": "olm.csv.metadata", "value": {"annotations": {}}}));
            }
        }),
        Docs(
            "nulls in olm.csv.metadata, which Go reads as zero values",
            |d| {
                find(d, "olm.bundle", "gadget.v0.1.0")["properties"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"type": "olm.csv.metadata", "value": {
                        "keywords": ["k", null], "maintainers": [null], "installModes": [null],
                        "links": [{"name": null, "url": "u"}], "displayName": null,
                        "provider": null, "annotations": {"a": null},
                    }}));
            },
        ),
        Docs("olm.csv.metadata with a list of the wrong type", |d| {
            find(d, "olm.bundle", "gadget.v0.1.0")["properties"]
                .as_array_mut()
                .unwrap()
                .push(json!({"type": "olm.csv.metadata", "value": {"keywords": [1]}}));
        }),
        Docs("olm.bundle.object not base64", |d| {
            find(d, "olm.bundle", "gadget.v0.1.0")["properties"]
                .as_array_mut()
                .unwrap()
                .push(json!({"type": "olm.bundle.object", "value": {"data": "!!"}}));
        }),
        Docs("olm.bundle.object neither YAML nor JSON", |d| {
            // "hello: [unclosed", base64-encoded.
            find(d, "olm.bundle", "gadget.v0.1.0")["properties"]
                .as_array_mut()
                .unwrap()
                .push(json!({"type": "olm.bundle.object", "value": {"data": "aGVsbG86IFt1bmNsb3NlZA=="}}));
        }),
        Docs("bundle of an unknown package", |d| {
            find(d, "olm.bundle", "gadget.v0.1.0")["package"] = json!("nobody");
        }),
        Docs("bundle in no channel", |d| {
            d.push(json!({"schema": "olm.bundle", "name": "gadget.v0.0.1", "package": "gadget", "image": "quay.io/example/g:0",
                "properties": [{"type": "olm.package", "value": {"packageName": "gadget", "version": "0.0.1"}}]}));
        }),
        Docs("gvk property not an object", |d| {
            find(d, "olm.bundle", "widget.v1.2.0")["properties"][1]["value"] = json!("Widget");
        }),
        Docs("package.required range invalid", |d| {
            find(d, "olm.bundle", "widget.v1.2.0")["properties"][2]["value"]["versionRange"] =
                json!("~~1");
        }),
        Docs("bundle without name", |d| {
            find(d, "olm.bundle", "gadget.v0.1.0")
                .as_object_mut()
                .unwrap()
                .remove("name");
        }),
        Docs("unknown schema", |d| {
            d.push(json!({"schema": "example.com.custom", "package": "widget", "data": 1}));
        }),
        Docs("document without schema", |d| {
            d.push(json!({"name": "stray"}));
        }),
        Docs("deprecation of an unknown bundle", |d| {
            find(d, "olm.deprecations", "")["entries"][0]["reference"]["name"] =
                json!("widget.v0.0.0");
        }),
        Docs("deprecation of an object of an unknown schema", |d| {
            find(d, "olm.deprecations", "")["entries"][0]["reference"] =
                json!({"schema": "olm.thing", "name": "x\ty"});
        }),
        Docs("deprecation of an unknown package", |d| {
            d.push(json!({"schema": "olm.deprecations", "package": "nobody", "entries": []}));
        }),
        Docs("icon not base64", |d| {
            find(d, "olm.package", "widget")["icon"] =
                json!({"base64data": "%%%", "mediatype": "image/png"});
        }),
        Files(
            "invalid JSON",
            &[("catalog.json", "{\"schema\": \"olm.package\", ")],
        ),
        Files(
            "invalid YAML",
            &[("catalog.yaml", "schema: olm.package\nname: [unclosed\n")],
        ),
        Files("empty directory", &[]),
        Files(
            "JSON array instead of documents",
            &[(
                "catalog.json",
                "[{\"schema\": \"olm.package\", \"name\": \"a\"}]",
            )],
        ),
        Files(
            "a text file beside the catalog",
            &[
                ("catalog.yaml", BASE_YAML),
                ("README.md", "Not a catalog.\n"),
            ],
        ),
        Files(
            "byte order mark",
            &[("catalog.yaml", concat!("\u{feff}", base_yaml!()))],
        ),
        Files(
            "YAML list document",
            &[("catalog.yaml", BASE_YAML), ("x.yaml", "- a\n")],
        ),
        Files(
            "YAML scalar document",
            &[("catalog.yaml", BASE_YAML), ("x.yaml", "true\n")],
        ),
        Files(
            "JSON array after an object",
            &[
                ("catalog.yaml", BASE_YAML),
                ("x.json", "{\"schema\": \"x.custom\"}\n[1]\n"),
            ],
        ),
        Files(
            "trailing separator",
            &[("catalog.yaml", concat!(base_yaml!(), "---\n"))],
        ),
        Lenient(
            "a comment-only file beside the catalog",
            &[
                ("catalog.yaml", BASE_YAML),
                ("README.md", "# not a catalog\n"),
            ],
        ),
        Lenient(
            "blank line after a trailing separator",
            &[("catalog.yaml", concat!(base_yaml!(), "---\n\n"))],
        ),
        Lenient(
            "null document",
            &[("catalog.yaml", BASE_YAML), ("x.yaml", "null\n")],
        ),
        Lenient(
            "JSON null",
            &[("catalog.yaml", BASE_YAML), ("x.json", "null")],
        ),
    ]
}

impl Variant {
    /// Writes the variant's catalog into `dir`; returns its name.
    fn write(&self, dir: &Path) -> &'static str {
        match self {
            Variant::Docs(name, mutate) => {
                let mut docs = base();
                mutate(&mut docs);
                write_docs(dir, &docs);
                name
            }
            Variant::Files(name, files) | Variant::Lenient(name, files) => {
                for (file, text) in *files {
                    std::fs::write(dir.join(file), text).unwrap();
                }
                name
            }
        }
    }
}

fn write_docs(dir: &Path, docs: &[Value]) {
    let mut text = String::new();
    for doc in docs {
        text.push_str(&serde_json::to_string_pretty(doc).unwrap());
        text.push('\n');
    }
    std::fs::write(dir.join("catalog.json"), text).unwrap();
}

#[test]
fn validate_and_render_verdicts_match_upstream_on_broken_catalogs() {
    let Some(upstream) = upstream() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let mut failing = 0;
    let variants = variants();
    for (i, variant) in variants.iter().enumerate() {
        let dir = scratch.path().join(format!("variant-{i}"));
        std::fs::create_dir(&dir).unwrap();
        let name = variant.write(&dir);
        let dir = dir.to_str().unwrap();
        println!("variant: {name}");
        if let Variant::Lenient(..) = variant {
            for command in ["validate", "render"] {
                let theirs = super::run(&upstream, &[command, dir], &std::env::temp_dir());
                let ours = super::run(&super::ours(), &[command, dir], &std::env::temp_dir());
                assert_eq!(theirs.status.code(), Some(1), "{name}: upstream {command}");
                assert_eq!(ours.status.code(), Some(0), "{name}: our {command}");
            }
        } else {
            // The verdict is the exit code; the reports' text differs on
            // purpose (ours lists every problem, upstream's the first).
            let validate = super::run(&upstream, &["validate", dir], &std::env::temp_dir());
            if !validate.status.success() {
                failing += 1;
            }
            compare(&upstream, &["validate", dir], false);
            compare(&upstream, &["render", dir], false);
        }
        // Serving refuses exactly what validating refuses.
        let scratch = tempfile::tempdir().unwrap();
        let cache = scratch.path().join("cache");
        let log = scratch.path().join("termination-log");
        compare(
            &upstream,
            &[
                "serve",
                dir,
                "--cache-only",
                "--cache-dir",
                cache.to_str().unwrap(),
                "-t",
                log.to_str().unwrap(),
            ],
            false,
        );
    }
    // The variants must exercise both verdicts, or they test nothing.
    assert!(
        failing > variants.len() / 2 && failing < variants.len(),
        "upstream refused {failing} of {} variants",
        variants.len()
    );
}

/// What `opm validate` and `opm serve` each say about a catalog directory:
/// refused or not, and the codes of the rules they cite.
#[derive(Debug, PartialEq, Eq)]
struct Verdict {
    refused: bool,
    rules: std::collections::BTreeSet<&'static str>,
}

fn validate_verdict(dir: &Path) -> Option<Verdict> {
    use olm_catalog::{
        fbc::{Catalog, LoadOptions},
        validate::validate_catalog,
    };
    let options = LoadOptions {
        drop_payloads: true,
        ..LoadOptions::default()
    };
    // A document that cannot be read refuses the catalog before any rule.
    let catalog = Catalog::load_dir_with(dir, &options).ok()?;
    let report = validate_catalog(&catalog);
    // Warnings of what upstream's serve refuses and its validate accepts.
    let serve_refuses: Vec<&'static str> = report
        .warnings()
        .map(|p| p.rule)
        .filter(|rule| *rule == olm_catalog::validate::Rule::CsvMetadataCount)
        .map(|rule| rule.code())
        .collect();
    Some(Verdict {
        refused: !report.is_valid() || !serve_refuses.is_empty(),
        rules: report
            .errors()
            .map(|p| p.rule.code())
            .chain(serve_refuses)
            .collect(),
    })
}

fn serve_verdict(dir: &Path) -> (Verdict, bool) {
    use olm_registry::{CatalogIndex, IndexError};
    match CatalogIndex::build(dir, &Default::default()) {
        Ok(_) => (
            Verdict {
                refused: false,
                rules: Default::default(),
            },
            false,
        ),
        Err(IndexError::Invalid { problems, total }) => {
            assert_eq!(problems.len(), total, "every problem is reported here");
            let unreadable = problems.iter().any(|p| p.rule.is_none());
            let rules = problems
                .iter()
                .filter_map(|p| p.rule.map(|r| r.code()))
                .collect();
            (
                Verdict {
                    refused: true,
                    rules,
                },
                unreadable,
            )
        }
        Err(other) => panic!("{}: {other}", dir.display()),
    }
}

/// One vocabulary for `opm validate` and `opm serve`: on every broken
/// variant, serving refuses exactly what validating refuses, citing the same
/// rules by the same codes. Validate's warnings do not refuse and are not
/// compared, except `csv-metadata-count`: upstream's serve refuses what its
/// validate accepts there, ours match each, and validate warns that serve
/// will refuse. No upstream binary is needed.
#[test]
fn serve_refuses_what_validate_refuses_with_the_same_rules() {
    let scratch = tempfile::tempdir().unwrap();
    let mut compared = 0;
    let mut differences = Vec::new();
    for (i, variant) in variants().iter().enumerate() {
        let dir = scratch.path().join(format!("variant-{i}"));
        std::fs::create_dir(&dir).unwrap();
        let name = variant.write(&dir);
        let (served, unreadable) = serve_verdict(&dir);
        match validate_verdict(&dir) {
            // Unreadable documents: both refuse, and only the verdict is
            // compared (validate stops at loading, serve reads on).
            None => {
                if !(served.refused && unreadable) {
                    differences.push(format!(
                        "{name}: validate cannot load it, serve says {served:?}"
                    ));
                }
            }
            Some(validated) => {
                compared += 1;
                if validated != served || unreadable {
                    differences.push(format!(
                        "{name}: validate {validated:?}, serve {served:?} (unreadable: {unreadable})"
                    ));
                }
            }
        }
    }
    assert!(compared >= 25, "variants compared by rule: {compared}");
    assert!(differences.is_empty(), "{differences:#?}");
}

/// The same on real catalogs: each corpus catalog as it is, and the small
/// ones again with each kind of document removed in turn (the first bundle,
/// the first channel, the package), which breaks them in real shapes.
#[test]
fn serve_and_validate_agree_on_corpus_catalogs_and_their_breakages() {
    let Some(testdata) = olm_testkit::testdata() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let mut differences = Vec::new();
    let mut compare_dir = |name: String, dir: &Path| {
        let (served, unreadable) = serve_verdict(dir);
        let validated = validate_verdict(dir);
        if validated.as_ref() != Some(&served) || unreadable {
            differences.push(format!("{name}: validate {validated:?}, serve {served:?}"));
        }
        served.refused
    };
    let mut catalogs = 0;
    for catalog in std::fs::read_dir(testdata.join("catalogs")).unwrap() {
        let catalog = catalog.unwrap().path();
        let name = catalog.file_name().unwrap().to_string_lossy().into_owned();
        catalogs += 1;
        assert!(!compare_dir(name.clone(), &catalog), "{name} is valid");
        let files: Vec<_> = walk_files(&catalog);
        let size: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
        if size > 1 << 20 {
            continue;
        }
        for schema in ["olm.bundle", "olm.channel", "olm.package"] {
            let dir = scratch.path().join(format!("{name}-without-{schema}"));
            std::fs::create_dir(&dir).unwrap();
            let mut docs: Vec<Value> = Vec::new();
            for file in &files {
                let text = std::fs::read_to_string(file).unwrap();
                docs.extend(
                    serde_json::Deserializer::from_str(&text)
                        .into_iter::<Value>()
                        .map(Result::unwrap),
                );
            }
            let first = docs.iter().position(|d| d["schema"] == schema).unwrap();
            docs.remove(first);
            write_docs(&dir, &docs);
            assert!(
                compare_dir(format!("{name} without its first {schema}"), &dir),
                "{name} without its first {schema} is refused"
            );
        }
    }
    assert!(catalogs >= 4, "corpus catalogs: {catalogs}");
    assert!(differences.is_empty(), "{differences:#?}");
}

/// Every file under `dir`.
fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk_files(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Upstream's words for an object of an unknown schema in a deprecation: Go
/// prints the reference with `%#v`. Validate and serve say the same, and
/// upstream's `opm validate` says it too when it is built here.
#[test]
fn an_unknown_deprecation_schema_reads_as_upstream_words_it() {
    let expected = r#"cannot deprecate object declcfg.PackageScopedReference{Schema:"olm.thing", Name:"x\ty"} referenced by entry 0 for package "widget": object schema unknown"#;
    let scratch = tempfile::tempdir().unwrap();
    let mut docs = base();
    find(&mut docs, "olm.deprecations", "")["entries"][0]["reference"] =
        json!({"schema": "olm.thing", "name": "x\ty"});
    write_docs(scratch.path(), &docs);

    let catalog = olm_catalog::fbc::Catalog::load_dir(scratch.path()).unwrap();
    let report = olm_catalog::validate::validate_catalog(&catalog);
    let validated: Vec<&str> = report.errors().map(|p| p.message.as_str()).collect();
    assert_eq!(validated, [expected]);

    let Err(olm_registry::IndexError::Invalid { problems, .. }) =
        olm_registry::CatalogIndex::build(scratch.path(), &Default::default())
    else {
        panic!("serve accepted a deprecation of an unknown schema");
    };
    let served: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(served, [expected]);

    if let Some(upstream) = upstream() {
        let dir = scratch.path().to_str().unwrap();
        let theirs = super::run(&upstream, &["validate", dir], &std::env::temp_dir());
        // logrus quotes its message, escaping quotes and backslashes.
        let logged = expected.replace('\\', "\\\\").replace('"', "\\\"");
        let stderr = String::from_utf8_lossy(&theirs.stderr);
        assert!(stderr.contains(&logged), "upstream said: {stderr}");
    }
}
