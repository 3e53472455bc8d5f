//! Every real catalog in the shared test data loads, validates, renders back
//! without loss, and has the counts SOURCES.md gives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use olm_catalog::{
    fbc::{Catalog, LoadOptions},
    graph,
    limits::Limits,
    render::{self, Format},
    validate::validate_catalog,
};

/// (catalog, packages, channels, bundles, channel entries) from SOURCES.md.
const CATALOGS: [(&str, usize, usize, usize, usize); 4] = [
    ("community-operators-prod-v4.21", 33, 78, 745, 873),
    ("community-operators-prod-v4.16", 18, 27, 221, 268),
    ("redhat-openshift-secondary-scheduler-v4.16", 1, 1, 9, 9),
    ("redhat-openshift-secondary-scheduler-v4.20", 1, 1, 14, 14),
];

fn catalogs() -> Option<Vec<(&'static str, PathBuf)>> {
    let testdata = common::testdata()?;
    Some(
        CATALOGS
            .iter()
            .map(|(name, ..)| (*name, testdata.join("catalogs").join(name)))
            .collect(),
    )
}

#[test]
fn catalogs_load_with_the_documented_counts() {
    let Some(catalogs) = catalogs() else { return };
    for ((name, path), (_, packages, channels, bundles, entries)) in
        catalogs.into_iter().zip(CATALOGS)
    {
        let start = std::time::Instant::now();
        let catalog = Catalog::load_dir(&path).unwrap();
        println!(
            "{name}: {} packages, {} channels, {} bundles, {} entries, {} other documents, loaded in {:?}",
            catalog.packages.len(),
            catalog.channels.len(),
            catalog.bundles.len(),
            catalog.channel_entry_count(),
            catalog.others.len(),
            start.elapsed()
        );
        assert_eq!(catalog.packages.len(), packages, "{name}");
        assert_eq!(catalog.channels.len(), channels, "{name}");
        assert_eq!(catalog.bundles.len(), bundles, "{name}");
        assert_eq!(catalog.channel_entry_count(), entries, "{name}");
    }
}

#[test]
fn catalogs_validate() {
    let Some(catalogs) = catalogs() else { return };
    for (name, path) in catalogs {
        let catalog = Catalog::load_dir(&path).unwrap();
        let report = validate_catalog(&catalog);
        assert!(report.problems.is_empty(), "{name}:\n{report}");
        // As `opm validate` reads it: payloads checked, then left out.
        let options = LoadOptions {
            drop_payloads: true,
            ..LoadOptions::default()
        };
        let lean = Catalog::load_dir_with(&path, &options).unwrap();
        assert!(lean.payloads_dropped && lean.payload_problems.is_empty());
        assert_eq!(lean.bundles.len(), catalog.bundles.len(), "{name}");
        let report = validate_catalog(&lean);
        assert!(report.problems.is_empty(), "{name}:\n{report}");
    }
}

#[test]
fn every_channel_has_exactly_one_head() {
    let Some(catalogs) = catalogs() else { return };
    for (name, path) in catalogs {
        let catalog = Catalog::load_dir(&path).unwrap();
        for channel in &catalog.channels {
            let head = graph::channel_head(&channel.entries)
                .unwrap_or_else(|e| panic!("{name}: {}/{}: {e}", channel.package, channel.name));
            // The resolver's order starts at the same head.
            let order = graph::sort_channel(&channel.entries).unwrap();
            assert_eq!(
                order[0].name, head.name,
                "{name}: {}/{}",
                channel.package, channel.name
            );
        }
    }
}

/// Sorts documents the way rendering does, so that a catalog read from its
/// rendering can be compared with the original.
fn canonical(mut catalog: Catalog) -> Catalog {
    catalog.clear_origins();
    catalog.packages.sort_by(|a, b| a.name.cmp(&b.name));
    catalog
        .channels
        .sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
    catalog
        .bundles
        .sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
    catalog
        .deprecations
        .sort_by(|a, b| a.package.cmp(&b.package));
    catalog
        .others
        .sort_by(|a, b| (&a.package, &a.schema).cmp(&(&b.package, &b.schema)));
    catalog
}

#[test]
fn render_then_load_is_lossless() {
    let Some(catalogs) = catalogs() else { return };
    for (name, path) in catalogs {
        let original = canonical(Catalog::load_dir(&path).unwrap());
        for format in [Format::Json, Format::Yaml] {
            let text = render::to_string(&original, format).unwrap();
            let again = canonical(
                Catalog::load_file("rendered", text.as_bytes(), &Limits::default()).unwrap(),
            );
            assert!(again == original, "{name}: {format:?} round trip differs");
            // Rendering is a fixed point.
            assert_eq!(
                render::to_string(&again, format).unwrap(),
                text,
                "{name}: {format:?}"
            );
        }
        // And through a directory tree, as opm writes catalogs.
        let dir = tempfile::tempdir().unwrap();
        render::write_dir(&original, Format::Json, dir.path()).unwrap();
        let again = canonical(Catalog::load_dir(dir.path()).unwrap());
        assert!(again == original, "{name}: directory round trip differs");
    }
}

#[test]
fn rendering_with_payloads_read_again_writes_the_same_text() {
    let Some(catalogs) = catalogs() else { return };
    for (name, path) in catalogs {
        let limits = Limits::default();
        let mut whole = Catalog::load_dir(&path).unwrap();
        whole.reencode_like_go(&limits).unwrap();
        // Payloads read back at the places the load noted, or by loading
        // their files again.
        for payload_spans in [true, false] {
            let options = LoadOptions {
                drop_payloads: true,
                payload_spans,
                ..LoadOptions::default()
            };
            let mut lean = Catalog::load_dir_with(&path, &options).unwrap();
            lean.reencode_like_go(&limits).unwrap();
            for format in [Format::Json, Format::Yaml] {
                let mut payloads = if format == Format::Json {
                    render::PayloadsFromFiles::reading_ahead(&path, limits.clone(), &lean)
                } else {
                    render::PayloadsFromFiles::new(&path, limits.clone(), &lean)
                };
                let mut text = Vec::new();
                render::write_filling(&lean, format, &mut text, &mut payloads).unwrap();
                let want = render::to_string(&whole, format).unwrap();
                assert!(
                    String::from_utf8(text).unwrap() == want,
                    "{name}: {format:?} differs, spans noted: {payload_spans}"
                );
            }
        }
    }
}
