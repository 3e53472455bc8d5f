//! Loads and validates the catalog in the directory given as the first
//! argument and prints how long each step took; with `--generate <dir>
//! <packages> <bundles-per-package> <object-bytes>` it first writes a
//! synthetic catalog of that shape (JSON, `olm.bundle.object` payloads).
//! With `--lean` as second argument, payloads are left out while loading.

use std::{fmt::Write as _, path::Path, time::Instant};

use olm_catalog::{
    fbc::{Catalog, LoadOptions},
    validate::validate_catalog,
};

fn generate(
    dir: &Path,
    packages: usize,
    bundles: usize,
    object_bytes: usize,
) -> std::io::Result<()> {
    // A manifest as opm writes one: JSON, base64-encoded.
    let manifest = format!(
        r#"{{"apiVersion":"v1","data":{{"blob":"{}"}},"kind":"ConfigMap","metadata":{{"name":"cm"}}}}"#,
        "x".repeat(object_bytes * 3 / 4)
    );
    let payload = olm_catalog::property::BundleObject::encode(manifest.as_bytes()).data;
    for p in 0..packages {
        let name = format!("package-{p:04}");
        let package_dir = dir.join(&name);
        std::fs::create_dir_all(&package_dir)?;
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"{{"schema":"olm.package","name":"{name}","defaultChannel":"stable"}}"#
        );
        let mut entries = Vec::new();
        for b in 0..bundles {
            let entry = if b == 0 {
                format!(r#"{{"name":"{name}.v1.0.{b}"}}"#)
            } else {
                format!(
                    r#"{{"name":"{name}.v1.0.{b}","replaces":"{name}.v1.0.{}","skipRange":"<1.0.{b}"}}"#,
                    b - 1
                )
            };
            entries.push(entry);
        }
        let _ = writeln!(
            out,
            r#"{{"schema":"olm.channel","name":"stable","package":"{name}","entries":[{}]}}"#,
            entries.join(",")
        );
        for b in 0..bundles {
            let _ = writeln!(
                out,
                r#"{{"schema":"olm.bundle","name":"{name}.v1.0.{b}","package":"{name}","image":"quay.io/example/{name}:v1.0.{b}","properties":[{{"type":"olm.package","value":{{"packageName":"{name}","version":"1.0.{b}"}}}},{{"type":"olm.gvk","value":{{"group":"example.com","kind":"K{p}","version":"v1"}}}},{{"type":"olm.bundle.object","value":{{"data":"{payload}"}}}}]}}"#
            );
        }
        std::fs::write(package_dir.join("catalog.json"), out)?;
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--generate") {
        let number = |i: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(0);
        let dir = Path::new(args.get(2).map_or("synthetic-catalog", String::as_str));
        if let Err(e) = generate(dir, number(3), number(4), number(5)) {
            eprintln!("generate: {e}");
        }
        return;
    }
    let Some(dir) = args.get(1) else {
        eprintln!(
            "usage: load_catalog <dir> | --generate <dir> <packages> <bundles> <object-bytes>"
        );
        return;
    };
    let options = LoadOptions {
        drop_payloads: args.get(2).map(String::as_str) == Some("--lean"),
        ..LoadOptions::default()
    };
    let start = Instant::now();
    let catalog = match Catalog::load_dir_with(dir, &options) {
        Ok(catalog) => catalog,
        Err(e) => {
            eprintln!("{e}");
            return;
        }
    };
    let loaded = start.elapsed();
    let report = validate_catalog(&catalog);
    println!(
        "{} packages, {} channels, {} bundles, {} entries: loaded in {loaded:?}, validated in {:?}, {} problems",
        catalog.packages.len(),
        catalog.channels.len(),
        catalog.bundles.len(),
        catalog.channel_entry_count(),
        start.elapsed() - loaded,
        report.problems.len()
    );
}
