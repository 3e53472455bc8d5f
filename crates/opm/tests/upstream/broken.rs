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
        let name = match variant {
            Variant::Docs(name, mutate) => {
                let mut docs = base();
                mutate(&mut docs);
                write_docs(&dir, &docs);
                name
            }
            Variant::Files(name, files) | Variant::Lenient(name, files) => {
                for (file, text) in *files {
                    std::fs::write(dir.join(file), text).unwrap();
                }
                name
            }
        };
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
