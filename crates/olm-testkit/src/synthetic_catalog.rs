//! A deterministic (seeded) file-based catalog shaped like the large real
//! ones, for benchmarks: bundle counts, channels per package, document sizes
//! and provided APIs per bundle drawn from the statistics of
//! `shared/testdata/catalogs/community-operators-prod-v4.21`, graphs of
//! replaces chains, skips and skipRanges. 1,000 packages and 20,000 bundles
//! make about 250 MB of pretty-printed JSON.
//!
//! One home for the catalog the registry's serve bench and the side-by-side
//! bench against upstream (`cargo xtask bench --vs-upstream`) both read.

#![allow(
    clippy::unwrap_used,
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss
)]

use std::{
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use serde_json::{Value, json};

/// SplitMix64: small, seeded, and the same on every machine.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// Bundles per package in community-operators-prod-v4.21 (33 packages).
const BUNDLES_PER_PACKAGE: &[usize] = &[
    1, 1, 2, 2, 2, 2, 2, 3, 4, 4, 4, 4, 4, 5, 5, 5, 6, 6, 9, 10, 12, 12, 21, 26, 32, 34, 35, 49,
    49, 56, 80, 106, 152,
];

/// Channels per package in the same catalog.
const CHANNELS_PER_PACKAGE: &[usize] = &[
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 4, 4, 5, 6,
    10, 12,
];

/// Pretty-printed bundle document sizes (bytes), at every 5th percentile.
const BUNDLE_BYTES_QUANTILES: &[usize] = &[
    3980, 6636, 8202, 11921, 12051, 12051, 12153, 12882, 15105, 17408, 18456, 19205, 19301, 20548,
    23428, 28687, 29646, 35409, 38289, 57588,
];

/// Provided APIs per bundle, at every 10th percentile.
const GVKS_PER_BUNDLE: &[usize] = &[1, 1, 1, 1, 1, 2, 5, 15, 20, 21];

const WORDS: &[&str] = &[
    "operator",
    "cluster",
    "install",
    "upgrade",
    "channel",
    "bundle",
    "catalog",
    "resource",
    "custom",
    "controller",
    "deploy",
    "manage",
    "storage",
    "network",
    "secure",
    "backup",
    "monitor",
    "scale",
    "database",
    "cache",
    "queue",
    "stream",
    "metrics",
    "policy",
    "service",
];

/// What [`write`] wrote.
#[derive(Debug, Clone, Copy)]
pub struct Generated {
    /// `olm.package` documents written.
    pub packages: usize,
    /// `olm.channel` documents written.
    pub channels: usize,
    /// `olm.bundle` documents written.
    pub bundles: usize,
    /// Channel entries over all channels.
    pub entries: usize,
    /// The catalog's size on disk.
    pub bytes: u64,
}

fn text(rng: &mut Rng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        out.push_str(rng.pick(WORDS));
        out.push(if rng.chance(8) { '\n' } else { ' ' });
    }
    out
}

fn base64ish(rng: &mut Rng, bytes: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..bytes / 4 * 4)
        .map(|_| ALPHABET[rng.below(64)] as char)
        .collect()
}

fn write_pretty(out: &mut impl Write, value: &Value) -> u64 {
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    serde::Serialize::serialize(value, &mut ser).unwrap();
    buf.push(b'\n');
    out.write_all(&buf).unwrap();
    buf.len() as u64
}

/// Writes a catalog of `packages` packages and `bundles` bundles into `dir`
/// (one `<package>/catalog.json` each), the same for the same `seed`.
///
/// # Panics
///
/// When `dir` cannot be written (a test or bench fixture).
pub fn write(dir: &Path, packages: usize, bundles: usize, seed: u64) -> Generated {
    let mut rng = Rng::new(seed);
    // Bundle counts drawn from the real distribution, then scaled to the
    // requested total.
    let mut counts: Vec<usize> = (0..packages)
        .map(|_| rng.pick(BUNDLES_PER_PACKAGE))
        .collect();
    let drawn: usize = counts.iter().sum();
    for c in &mut counts {
        *c = ((*c * bundles) as f64 / drawn as f64).round().max(1.0) as usize;
    }
    let mut total: usize = counts.iter().sum();
    while total != bundles {
        let i = rng.below(packages);
        if total > bundles && counts[i] > 1 {
            counts[i] -= 1;
            total -= 1;
        } else if total < bundles {
            counts[i] += 1;
            total += 1;
        }
    }
    // Scale document sizes so the catalog lands near 250 MB at 20,000 bundles.
    let mean_quantile =
        BUNDLE_BYTES_QUANTILES.iter().sum::<usize>() as f64 / BUNDLE_BYTES_QUANTILES.len() as f64;
    let size_scale = 9_000.0 / mean_quantile;

    let mut out = Generated {
        packages,
        channels: 0,
        bundles,
        entries: 0,
        bytes: 0,
    };
    for (p, &count) in counts.iter().enumerate() {
        let name = format!("synthetic-{p:04}-operator");
        let group = format!("{}.example.com", &name[..14]);
        let path = dir.join(&name).join("catalog.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut file = BufWriter::new(std::fs::File::create(&path).unwrap());

        let channels = rng.pick(CHANNELS_PER_PACKAGE).min(count.max(1));
        let channel_names: Vec<String> = (0..channels)
            .map(|c| match c {
                0 => "stable".to_owned(),
                1 => "fast".to_owned(),
                2 => "candidate".to_owned(),
                n => format!("stable-v{n}"),
            })
            .collect();
        out.bytes += write_pretty(
            &mut file,
            &json!({
                "schema": "olm.package",
                "name": name,
                "defaultChannel": "stable",
                "icon": {"base64data": base64ish(&mut rng, 4_000), "mediatype": "image/svg+xml"},
                "description": text(&mut rng, 2_000),
            }),
        );

        // Versions 0.1.0, 0.2.0, ...; each replaces the one before.
        let versions: Vec<String> = (0..count)
            .map(|i| format!("{}.{}.{}", i / 100, (i / 10) % 10 + 1, i % 10))
            .collect();
        let bundle_names: Vec<String> = versions.iter().map(|v| format!("{name}.v{v}")).collect();
        let shared_api = rng.chance(5);
        for (c, channel) in channel_names.iter().enumerate() {
            // The default channel holds every bundle; others the newest part.
            let start = if c == 0 {
                0
            } else {
                count - (count / 4).max(1)
            };
            let mut entries = Vec::new();
            for i in start..count {
                let mut entry = json!({"name": bundle_names[i]});
                if i > start || (i > 0 && rng.chance(85)) {
                    entry["replaces"] = json!(bundle_names[i - 1]);
                }
                if rng.chance(5) {
                    // Like most real skips: release candidates that never
                    // made it into the catalog.
                    let skips: Vec<String> = (1..=rng.below(3) + 1)
                        .map(|k| format!("{name}.v{}-rc.{k}", versions[i]))
                        .collect();
                    entry["skips"] = json!(skips);
                }
                if rng.chance(10) {
                    entry["skipRange"] = json!(format!("<{}", versions[i]));
                }
                entries.push(entry);
            }
            out.entries += entries.len();
            out.channels += 1;
            out.bytes += write_pretty(
                &mut file,
                &json!({"schema": "olm.channel", "package": name, "name": channel, "entries": entries}),
            );
        }

        for (i, bundle) in bundle_names.iter().enumerate() {
            let gvks = rng.pick(GVKS_PER_BUNDLE);
            let mut properties = Vec::new();
            let mut owned = Vec::new();
            for k in 0..gvks {
                let kind = format!("Kind{k}");
                properties.push(json!({"type": "olm.gvk", "value": {"group": group, "kind": kind, "version": "v1"}}));
                owned.push(
                    json!({"name": format!("kind{k}s.{group}"), "version": "v1", "kind": kind,
                    "displayName": format!("Kind {k}"), "description": text(&mut rng, 120)}),
                );
            }
            if shared_api {
                properties.push(json!({"type": "olm.gvk", "value": {"group": "shared.example.com", "kind": "Widget", "version": "v1"}}));
            }
            properties.push(json!({"type": "olm.package", "value": {"packageName": name, "version": versions[i]}}));
            let target = (BUNDLE_BYTES_QUANTILES[rng.below(BUNDLE_BYTES_QUANTILES.len())] as f64
                * size_scale) as usize;
            let description_bytes = target.saturating_sub(1_500 + 250 * gvks).max(200);
            properties.push(json!({"type": "olm.csv.metadata", "value": {
                "annotations": {
                    "alm-examples": format!("[{{\"apiVersion\":\"{group}/v1\",\"kind\":\"Kind0\",\"metadata\":{{\"name\":\"example\"}}}}]"),
                    "capabilities": "Basic Install",
                    "categories": "Developer Tools",
                    "containerImage": format!("quay.io/example/{name}:v{}", versions[i]),
                    "createdAt": "2024-01-01T00:00:00Z",
                },
                "crdDescriptions": {"owned": owned},
                "description": text(&mut rng, description_bytes),
                "displayName": format!("Synthetic operator {p}"),
                "installModes": [
                    {"supported": true, "type": "OwnNamespace"},
                    {"supported": true, "type": "SingleNamespace"},
                    {"supported": false, "type": "MultiNamespace"},
                    {"supported": true, "type": "AllNamespaces"},
                ],
                "keywords": [rng.pick(WORDS), rng.pick(WORDS)],
                "links": [{"name": "Documentation", "url": format!("https://example.com/{name}")}],
                "maintainers": [{"email": "team@example.com", "name": "Example Team"}],
                "maturity": "stable",
                "provider": {"name": "Example"},
            }}));
            out.bytes += write_pretty(
                &mut file,
                &json!({
                    "schema": "olm.bundle",
                    "name": bundle,
                    "package": name,
                    "image": format!("quay.io/example/{name}-bundle@sha256:{:064x}", rng.next_u64()),
                    "properties": properties,
                    "relatedImages": [{"name": "operator", "image": format!("quay.io/example/{name}:v{}", versions[i])}],
                }),
            );
        }
        file.flush().unwrap();
    }
    out
}

/// The catalog of [`write`] in `parent/generated-<packages>x<bundles>-seed<seed>`,
/// written the first time only (a `.complete` marker says it was written
/// whole), so the benches that read the same catalog share one copy.
///
/// # Panics
///
/// When the directory cannot be written (a bench fixture).
pub fn written_once(parent: &Path, packages: usize, bundles: usize, seed: u64) -> PathBuf {
    let dir = parent.join(format!("generated-{packages}x{bundles}-seed{seed}"));
    let done = dir.join(".complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating the generated catalog's directory");
        let started = std::time::Instant::now();
        write(&dir, packages, bundles, seed);
        std::fs::write(&done, "").expect("marking the generated catalog complete");
        println!(
            "generated {} in {:.1} s",
            dir.display(),
            started.elapsed().as_secs_f64()
        );
    }
    dir
}
