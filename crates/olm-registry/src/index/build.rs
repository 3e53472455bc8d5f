//! Building a [`CatalogIndex`]: scan the files in parallel, then check the
//! catalog the way `opm serve` does before it answers, and lay the records
//! out in sorted vectors.

use std::{
    collections::{HashMap, HashSet},
    num::NonZeroUsize,
    path::{Path, PathBuf},
    sync::atomic::{AtomicUsize, Ordering},
};

use olm_catalog::{
    graph, semver,
    validate::{Rule, message},
};

use super::{
    BundleRec, CatalogIndex, ChannelRec, CustomRec, EntryRec, GvkRec, IndexOptions, IndexStats,
    PackageRec, Span,
    scan::{
        self, DocLoc, FileScan, RawBundle, RawChannel, RawCustom, RawDeprecations, RawDoc, RawGvk,
        RawPackage, ScanCounters, ScanProblem, SourceFile, SpillWriter,
    },
    store::BlobStore,
    strings::{PoolFull, StrId, StrPoolBuilder},
};
use crate::{error::IndexError, limits::IndexLimits};

/// The most threads that read files at once.
const MAX_SCAN_THREADS: usize = 8;

pub(super) fn build(root: &Path, options: &IndexOptions) -> Result<CatalogIndex, IndexError> {
    let limits = &options.limits;
    let root = std::path::absolute(root).map_err(|source| IndexError::Read {
        path: root.to_owned(),
        source,
    })?;
    let files = scan::list_files(&root, limits)?;
    let spill_dir = options.spill_dir.clone().unwrap_or_else(std::env::temp_dir);
    let threads = read_threads(options.threads).min(files.len().max(1));

    let counters = ScanCounters::default();
    let next = AtomicUsize::new(0);
    type WorkerOutput = Result<(Vec<(usize, FileScan)>, Option<std::fs::File>), IndexError>;
    let outputs: Vec<WorkerOutput> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                let (files, root, counters, next, spill_dir) =
                    (&files, &root, &counters, &next, &spill_dir);
                s.spawn(move || -> WorkerOutput {
                    let mut spill = SpillWriter::new(spill_dir.clone(), (files.len() + w) as u32);
                    let mut scans = Vec::new();
                    let mut buf = Vec::with_capacity(2 * scan::READ_CHUNK);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= files.len() {
                            break;
                        }
                        match scan::scan_file(
                            root, i as u32, &files[i], limits, counters, &mut spill, &mut buf,
                        )? {
                            Some(scan) => scans.push((i, scan)),
                            None => break,
                        }
                    }
                    Ok((scans, spill.finish()?))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });

    let mut scans: Vec<Option<FileScan>> = (0..files.len()).map(|_| None).collect();
    let mut spills = Vec::with_capacity(threads);
    let mut first_error = None;
    for output in outputs {
        match output {
            Ok((worker_scans, spill)) => {
                for (i, scan) in worker_scans {
                    scans[i] = Some(scan);
                }
                spills.push(spill);
            }
            Err(e) => {
                first_error.get_or_insert(e);
                spills.push(None);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let scans: Vec<FileScan> = scans.into_iter().map(Option::unwrap_or_default).collect();
    Assembler::new(root, files, limits).assemble(scans, spills)
}

/// How many threads read catalog files at once: `requested`, else the
/// available parallelism, at most [`MAX_SCAN_THREADS`].
pub(crate) fn read_threads(requested: Option<NonZeroUsize>) -> usize {
    requested
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get)
        .clamp(1, MAX_SCAN_THREADS)
}

/// Matches upstream's rule for custom-schema keys (`pkg/cache/meta_key.go`).
pub(crate) fn valid_meta_key_component(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A DNS-1123 label: what a package name must be.
fn is_dns1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let ok = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(ok)
        && bytes.last().is_some_and(ok)
        && bytes.iter().all(|b| ok(b) || *b == b'-')
}

struct Assembler<'a> {
    root: PathBuf,
    files: Vec<SourceFile>,
    limits: &'a IndexLimits,
    problems: Vec<ScanProblem>,
}

/// A package with the documents that belong to it, while checking.
struct PackageDocs<'r> {
    raw: &'r RawPackage,
    channels: Vec<&'r RawChannel>,
    bundles: Vec<&'r RawBundle>,
    deprecation: Option<&'r str>,
    channel_deprecations: HashMap<&'r str, &'r str>,
    bundle_deprecations: HashMap<&'r str, &'r str>,
}

impl<'a> Assembler<'a> {
    fn new(root: PathBuf, files: Vec<SourceFile>, limits: &'a IndexLimits) -> Self {
        Self {
            root,
            files,
            limits,
            problems: Vec::new(),
        }
    }

    fn problem(&mut self, loc: DocLoc, rule: Option<Rule>, message: String) {
        self.problems.push(ScanProblem { loc, rule, message });
    }

    fn assemble(
        mut self,
        scans: Vec<FileScan>,
        spills: Vec<Option<std::fs::File>>,
    ) -> Result<CatalogIndex, IndexError> {
        let mut packages: Vec<RawPackage> = Vec::new();
        let mut channels: Vec<RawChannel> = Vec::new();
        let mut bundles: Vec<RawBundle> = Vec::new();
        let mut deprecations: Vec<RawDeprecations> = Vec::new();
        let mut customs: Vec<RawCustom> = Vec::new();
        let mut file_gvks: Vec<Vec<RawGvk>> = Vec::with_capacity(scans.len());
        for scan in scans {
            file_gvks.push(scan.gvks);
            self.problems.extend(scan.problems);
            for doc in scan.docs {
                match doc {
                    RawDoc::Package(p) => packages.push(p),
                    RawDoc::Channel(c) => channels.push(c),
                    RawDoc::Bundle(b) => bundles.push(b),
                    RawDoc::Deprecations(d) => deprecations.push(d),
                    RawDoc::Custom(c) => customs.push(c),
                }
            }
        }
        let spilled_bytes: u64 = spills
            .iter()
            .flatten()
            .filter_map(|f| f.metadata().ok())
            .map(|m| m.len())
            .sum();

        let by_package = self.group(&packages, &channels, &bundles, &deprecations);
        for custom in &customs {
            if !valid_meta_key_component(&custom.schema)
                || !(custom.package.is_empty() || valid_meta_key_component(&custom.package))
            {
                self.problem(
                    custom.loc, None,
                    format!(
                        "invalid custom schema meta: schema {:?} and package {:?} must match ^[a-zA-Z0-9][a-zA-Z0-9._-]*$",
                        custom.schema, custom.package
                    ),
                );
            }
        }
        let heads = self.check_packages(&by_package);

        if !self.problems.is_empty() {
            let total = self.problems.len();
            let mut located = scan::locate(&self.root, &self.files, &self.problems);
            located.truncate(self.limits.max_reported_problems);
            return Err(IndexError::Invalid {
                problems: located,
                total,
            });
        }
        let bytes = self.files.iter().map(|f| f.len).sum();
        let file_count = self.files.len();
        let mut index = lay_out(&by_package, &heads, &customs, &file_gvks).map_err(|PoolFull| {
            IndexError::LimitExceeded {
                what: "bytes of names",
                field: "max_total_bytes",
                limit: u64::from(u32::MAX),
            }
        })?;
        drop(by_package);
        index.store = BlobStore::new(self.root, self.files, spills);
        index.stats.files = file_count;
        index.stats.bytes = bytes;
        index.stats.spilled_bytes = spilled_bytes;
        index.stats.heap_bytes = index.heap_bytes();
        Ok(index)
    }

    /// Groups channels, bundles and deprecations under their packages,
    /// reporting references to unknown packages and duplicates.
    fn group<'r>(
        &mut self,
        packages: &'r [RawPackage],
        channels: &'r [RawChannel],
        bundles: &'r [RawBundle],
        deprecations: &'r [RawDeprecations],
    ) -> Vec<PackageDocs<'r>> {
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        let mut out: Vec<PackageDocs<'r>> = Vec::new();
        // (package index, name) of every channel and bundle accepted so far.
        let mut channel_keys: HashSet<(usize, &str)> = HashSet::new();
        let mut bundle_keys: HashSet<(usize, &str)> = HashSet::new();
        for p in packages {
            if p.name.is_empty() {
                self.problem(
                    p.loc,
                    Some(Rule::PackageNameMissing),
                    "config contains package with no name".to_owned(),
                );
                continue;
            }
            if !is_dns1123_label(&p.name) {
                self.problem(
                    p.loc,
                    Some(Rule::PackageNameInvalid),
                    format!(
                        "invalid package name {:?}: must be a dns-1123 label",
                        p.name
                    ),
                );
                continue;
            }
            if by_name.contains_key(p.name.as_str()) {
                self.problem(
                    p.loc,
                    Some(Rule::DuplicatePackage),
                    format!("duplicate package {:?}", p.name),
                );
                continue;
            }
            by_name.insert(&p.name, out.len());
            out.push(PackageDocs {
                raw: p,
                channels: Vec::new(),
                bundles: Vec::new(),
                deprecation: None,
                channel_deprecations: HashMap::new(),
                bundle_deprecations: HashMap::new(),
            });
        }
        for c in channels {
            let Some(&i) = by_name.get(c.package.as_str()) else {
                self.problem(
                    c.loc,
                    Some(Rule::ChannelUnknownPackage),
                    message::channel_unknown_package(&c.package, &c.name),
                );
                continue;
            };
            if c.name.is_empty() {
                self.problem(
                    c.loc,
                    Some(Rule::ChannelNameMissing),
                    message::channel_name_missing(&c.package),
                );
                continue;
            }
            if !channel_keys.insert((i, c.name.as_str())) {
                self.problem(
                    c.loc,
                    Some(Rule::DuplicateChannel),
                    format!("package {:?} has duplicate channel {:?}", c.package, c.name),
                );
                continue;
            }
            out[i].channels.push(c);
        }
        for b in bundles {
            if b.package.is_empty() {
                self.problem(
                    b.loc,
                    Some(Rule::BundlePackageMissing),
                    message::bundle_package_missing(&b.name),
                );
                continue;
            }
            let Some(&i) = by_name.get(b.package.as_str()) else {
                self.problem(
                    b.loc,
                    Some(Rule::BundleUnknownPackage),
                    message::bundle_unknown_package(&b.package, &b.name),
                );
                continue;
            };
            if b.name.is_empty() {
                self.problem(
                    b.loc,
                    Some(Rule::BundleNameMissing),
                    message::BUNDLE_NAME_MISSING.to_owned(),
                );
            }
            if !bundle_keys.insert((i, b.name.as_str())) {
                self.problem(
                    b.loc,
                    Some(Rule::DuplicateBundle),
                    format!("package {:?} has duplicate bundle {:?}", b.package, b.name),
                );
                continue;
            }
            out[i].bundles.push(b);
        }
        let mut seen: HashSet<&str> = HashSet::new();
        for d in deprecations {
            if d.package.is_empty() {
                self.problem(
                    d.loc,
                    Some(Rule::DeprecationPackageMissing),
                    message::DEPRECATION_PACKAGE_MISSING.to_owned(),
                );
                continue;
            }
            let Some(&i) = by_name.get(d.package.as_str()) else {
                self.problem(
                    d.loc,
                    Some(Rule::DeprecationUnknownPackage),
                    message::deprecation_unknown_package(&d.package),
                );
                continue;
            };
            if !seen.insert(&d.package) {
                self.problem(
                    d.loc,
                    Some(Rule::DuplicateDeprecation),
                    message::duplicate_deprecation(&d.package),
                );
                continue;
            }
            for (j, entry) in d.entries.iter().enumerate() {
                let pkg = &mut out[i];
                let message = entry.message.as_str();
                let error = match entry.schema.as_str() {
                    "" => Some((
                        Rule::DeprecationSchemaMissing,
                        message::deprecation_schema_missing(j, &d.package),
                    )),
                    scan::SCHEMA_BUNDLE => {
                        if bundle_keys.contains(&(i, entry.name.as_str())) {
                            pkg.bundle_deprecations.insert(&entry.name, message);
                            None
                        } else {
                            Some((
                                Rule::DeprecationUnknownBundle,
                                message::deprecation_unknown_bundle(&entry.name, &d.package),
                            ))
                        }
                    }
                    scan::SCHEMA_CHANNEL => {
                        if channel_keys.contains(&(i, entry.name.as_str())) {
                            pkg.channel_deprecations.insert(&entry.name, message);
                            None
                        } else {
                            Some((
                                Rule::DeprecationUnknownChannel,
                                message::deprecation_unknown_channel(&entry.name, &d.package),
                            ))
                        }
                    }
                    scan::SCHEMA_PACKAGE if entry.name.is_empty() => {
                        pkg.deprecation = Some(message);
                        None
                    }
                    scan::SCHEMA_PACKAGE => Some((
                        Rule::DeprecationPackageNameSet,
                        message::deprecation_package_name_set(&d.package, &entry.name),
                    )),
                    other => Some((
                        Rule::DeprecationUnknownSchema,
                        message::deprecation_unknown_schema(other, &entry.name, j, &d.package),
                    )),
                };
                if let Some((rule, message)) = error {
                    self.problem(d.loc, Some(rule), message);
                }
            }
        }
        out.sort_by(|a, b| a.raw.name.cmp(&b.raw.name));
        out
    }

    /// Checks each package's bundles and channel graphs; returns each
    /// channel's head name, by package and channel position.
    fn check_packages<'r>(&mut self, packages: &[PackageDocs<'r>]) -> Vec<Vec<&'r str>> {
        let mut heads = Vec::with_capacity(packages.len());
        for pkg in packages {
            let name = &pkg.raw.name;
            let mut versions: HashMap<&str, Vec<&str>> = HashMap::new();
            for b in &pkg.bundles {
                if let [(package, version)] = b.package_properties.as_slice() {
                    if package != name {
                        self.problem(
                            b.loc, Some(Rule::PackagePropertyMismatch),
                            format!("package {name:?} does not match \"olm.package\" property {package:?}"),
                        );
                    }
                    if let Err(err) = semver::Version::parse(version) {
                        self.problem(
                            b.loc,
                            Some(Rule::InvalidVersion),
                            format!(
                                "error parsing bundle {:?} version {version:?}: {err}",
                                b.name
                            ),
                        );
                    }
                    versions.entry(version).or_default().push(&b.name);
                } else {
                    self.problem(
                        b.loc, Some(Rule::PackagePropertyCount),
                        format!(
                            "package {name:?} bundle {:?} must have exactly 1 \"olm.package\" property, found {}",
                            b.name,
                            b.package_properties.len()
                        ),
                    );
                }
                if b.csv_metadata > 1 {
                    self.problem(
                        b.loc, Some(Rule::CsvMetadataCount),
                        format!(
                            "bundle {:?}: expected at most 1 property of type \"olm.csv.metadata\", found {}",
                            b.name, b.csv_metadata
                        ),
                    );
                }
                if b.image.is_empty() && b.objects == 0 {
                    self.problem(
                        b.loc,
                        Some(Rule::ImageMissing),
                        message::bundle_image_missing(&b.name),
                    );
                }
            }
            let mut duplicated: Vec<String> = versions
                .into_iter()
                .filter(|(_, names)| names.len() > 1)
                .map(|(v, mut names)| {
                    names.sort_unstable();
                    format!("{{{v}: [{}]}}", names.join(", "))
                })
                .collect();
            if !duplicated.is_empty() {
                duplicated.sort();
                self.problem(
                    pkg.raw.loc,
                    Some(Rule::DuplicateVersion),
                    format!(
                        "invalid package {name:?}: duplicate versions found in bundles: [{}]",
                        duplicated.join(" ")
                    ),
                );
            }

            let bundle_names: HashSet<&str> = pkg.bundles.iter().map(|b| b.name.as_str()).collect();
            let mut in_channels: HashSet<&str> = HashSet::new();
            let mut missing: Vec<&str> = Vec::new();
            let mut pkg_heads = Vec::with_capacity(pkg.channels.len());
            for c in &pkg.channels {
                let mut seen: HashSet<&str> = HashSet::new();
                for e in &c.entries {
                    if !seen.insert(&e.name) {
                        self.problem(
                            c.loc,
                            Some(Rule::DuplicateEntry),
                            format!(
                                "invalid package {name:?}, channel {:?}: duplicate entry {:?}",
                                c.name, e.name
                            ),
                        );
                    }
                    if bundle_names.contains(e.name.as_str()) {
                        in_channels.insert(&e.name);
                    } else {
                        missing.push(&e.name);
                    }
                    for (i, skip) in e.skips.iter().enumerate() {
                        if skip.is_empty() {
                            self.problem(
                                c.loc,
                                Some(Rule::EmptySkip),
                                format!("invalid bundle {:?}: skip[{i}] is empty", e.name),
                            );
                        }
                    }
                    // A skipRange is not parsed: upstream serves one that
                    // does not parse (validate warns about it).
                }
                let graph_entries: Vec<graph::ChannelEntry> = c
                    .entries
                    .iter()
                    .map(|e| graph::ChannelEntry {
                        name: e.name.clone(),
                        replaces: Some(e.replaces.clone()).filter(|r| !r.is_empty()),
                        skips: e.skips.clone(),
                        skip_range: Some(e.skip_range.clone()).filter(|r| !r.is_empty()),
                    })
                    .collect();
                let head = if c.entries.is_empty() {
                    self.problem(
                        c.loc, Some(Rule::ChannelEmpty),
                        format!(
                            "invalid package {name:?}: invalid channel {:?}: channel must contain at least one bundle",
                            c.name
                        ),
                    );
                    ""
                } else {
                    match graph::validate_replaces_chain(&graph_entries)
                        .and_then(|()| graph::channel_head(&graph_entries).map(|h| h.name.clone()))
                    {
                        Ok(head) => c
                            .entries
                            .iter()
                            .find(|e| e.name == head)
                            .map_or("", |e| e.name.as_str()),
                        Err(err) => {
                            self.problem(
                                c.loc,
                                Some(Rule::of_graph_error(&err)),
                                format!(
                                    "invalid package {name:?}: invalid channel {:?}: {err}",
                                    c.name
                                ),
                            );
                            ""
                        }
                    }
                };
                pkg_heads.push(head);
            }
            heads.push(pkg_heads);
            if !missing.is_empty() {
                missing.sort_unstable();
                missing.dedup();
                self.problem(
                    pkg.raw.loc, Some(Rule::EntryUnknownBundle),
                    format!(
                        "no olm.bundle blobs found in package {name:?} for olm.channel entries [{}]",
                        missing.join(" ")
                    ),
                );
            }
            for b in &pkg.bundles {
                if !in_channels.contains(b.name.as_str()) {
                    self.problem(
                        b.loc,
                        Some(Rule::BundleNotInChannel),
                        format!(
                            "package {name:?}, bundle {:?} not found in any channel entries",
                            b.name
                        ),
                    );
                }
            }
            if pkg.channels.is_empty() {
                self.problem(
                    pkg.raw.loc,
                    Some(Rule::PackageWithoutChannels),
                    format!("invalid package {name:?}: package must contain at least one channel"),
                );
            }
            let default = &pkg.raw.default_channel;
            if default.is_empty() {
                self.problem(
                    pkg.raw.loc,
                    Some(Rule::DefaultChannelMissing),
                    format!("invalid package {name:?}: default channel must be set"),
                );
            } else if !pkg.channels.iter().any(|c| &c.name == default) {
                self.problem(
                    pkg.raw.loc, Some(Rule::DefaultChannelUnknown),
                    format!("invalid package {name:?}: default channel {default:?} not found in channels list"),
                );
            }
        }
        heads
    }
}

/// Lays out a checked catalog in the index's sorted vectors.
fn lay_out(
    packages: &[PackageDocs<'_>],
    heads: &[Vec<&str>],
    customs: &[RawCustom],
    file_gvks: &[Vec<RawGvk>],
) -> Result<CatalogIndex, PoolFull> {
    let mut strings = StrPoolBuilder::new();

    // Distinct GVKs first, sorted by string id, so their positions are final.
    let mut gvk_ids: HashMap<(StrId, StrId, StrId), u32> = HashMap::new();
    let mut gvks: Vec<GvkRec> = Vec::new();
    for pkg in packages {
        for b in &pkg.bundles {
            for g in b.provided.iter().chain(&b.required) {
                let rec = intern_gvk(&mut strings, &file_gvks[b.loc.file as usize][*g as usize])?;
                if let std::collections::hash_map::Entry::Vacant(slot) =
                    gvk_ids.entry((rec.group, rec.version, rec.kind))
                {
                    slot.insert(0);
                    gvks.push(rec);
                }
            }
        }
    }
    gvks.sort_unstable();
    for (i, g) in gvks.iter().enumerate() {
        gvk_ids.insert((g.group, g.version, g.kind), i as u32);
    }

    let mut package_recs = Vec::with_capacity(packages.len());
    let mut channel_recs = Vec::new();
    let mut entry_recs = Vec::new();
    let mut bundle_recs: Vec<BundleRec> = Vec::new();
    let mut skips = Vec::new();
    let mut bundle_gvks = Vec::new();
    for (p, pkg) in packages.iter().enumerate() {
        let p = p as u32;
        // Bundles sorted by name; remember each one's id for the entries.
        let mut sorted_bundles: Vec<&RawBundle> = pkg.bundles.clone();
        sorted_bundles.sort_by(|a, b| a.name.cmp(&b.name));
        let mut bundle_ids: HashMap<&str, u32> = HashMap::with_capacity(sorted_bundles.len());
        for b in sorted_bundles {
            let id = bundle_recs.len() as u32;
            bundle_ids.insert(&b.name, id);
            let table = &file_gvks[b.loc.file as usize];
            let provided = gvk_span(&mut strings, &gvk_ids, &mut bundle_gvks, table, &b.provided)?;
            let required = gvk_span(&mut strings, &gvk_ids, &mut bundle_gvks, table, &b.required)?;
            bundle_recs.push(BundleRec {
                name: strings.intern(&b.name)?,
                package: p,
                version: strings.intern(&b.package_properties[0].1)?,
                image: strings.intern(&b.image)?,
                provided,
                required,
                entries: Span::default(),
                blob: b.blob,
                deprecation: pkg
                    .bundle_deprecations
                    .get(b.name.as_str())
                    .map(|m| strings.intern(m))
                    .transpose()?,
            });
        }
        let mut order: Vec<usize> = (0..pkg.channels.len()).collect();
        order.sort_by(|a, b| pkg.channels[*a].name.cmp(&pkg.channels[*b].name));
        let channel_start = channel_recs.len() as u32;
        for c_pos in order {
            let c = pkg.channels[c_pos];
            let c_id = channel_recs.len() as u32;
            let mut entries: Vec<&scan::RawEntry> = c.entries.iter().collect();
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            let entry_start = entry_recs.len() as u32;
            let mut head = entry_start;
            for e in entries {
                if e.name == heads[p as usize][c_pos] {
                    head = entry_recs.len() as u32;
                }
                let skip_start = skips.len() as u32;
                for s in &e.skips {
                    skips.push(strings.intern(s)?);
                }
                entry_recs.push(EntryRec {
                    bundle: bundle_ids[e.name.as_str()],
                    channel: c_id,
                    replaces: strings.intern(&e.replaces)?,
                    skips: Span {
                        start: skip_start,
                        len: skips.len() as u32 - skip_start,
                    },
                    skip_range: strings.intern(&e.skip_range)?,
                });
            }
            channel_recs.push(ChannelRec {
                name: strings.intern(&c.name)?,
                package: p,
                entries: Span {
                    start: entry_start,
                    len: entry_recs.len() as u32 - entry_start,
                },
                head,
                deprecation: pkg
                    .channel_deprecations
                    .get(c.name.as_str())
                    .map(|m| strings.intern(m))
                    .transpose()?,
            });
        }
        package_recs.push(PackageRec {
            name: strings.intern(&pkg.raw.name)?,
            default_channel: strings.intern(&pkg.raw.default_channel)?,
            channels: Span {
                start: channel_start,
                len: channel_recs.len() as u32 - channel_start,
            },
            blob: pkg.raw.blob,
            deprecation: pkg.deprecation.map(|m| strings.intern(m)).transpose()?,
        });
    }

    // Entries of each bundle, grouped by bundle.
    let mut counts = vec![0u32; bundle_recs.len()];
    for e in &entry_recs {
        counts[e.bundle as usize] += 1;
    }
    let mut start = 0u32;
    for (b, count) in bundle_recs.iter_mut().zip(&counts) {
        b.entries = Span { start, len: 0 };
        start += count;
    }
    let mut bundle_entries = vec![0u32; entry_recs.len()];
    for (id, e) in entry_recs.iter().enumerate() {
        let span = &mut bundle_recs[e.bundle as usize].entries;
        bundle_entries[(span.start + span.len) as usize] = id as u32;
        span.len += 1;
    }

    let mut providers: Vec<(u32, u32)> = bundle_recs
        .iter()
        .enumerate()
        .flat_map(|(id, b)| {
            bundle_gvks[b.provided.range()]
                .iter()
                .map(move |g| (*g, id as u32))
        })
        .collect();
    providers.sort_unstable();
    providers.dedup();

    let mut custom_recs = Vec::with_capacity(customs.len());
    for c in customs {
        custom_recs.push(CustomRec {
            schema: strings.intern(&c.schema)?,
            package: strings.intern(&c.package)?,
            blob: c.blob,
        });
    }

    let strings = strings.finish();
    custom_recs.sort_by(|a, b| {
        (strings.get(a.schema), strings.get(a.package))
            .cmp(&(strings.get(b.schema), strings.get(b.package)))
    });
    let mut list_order: Vec<u32> = (0..entry_recs.len() as u32).collect();
    list_order.sort_by(|a, b| {
        let key = |id: &u32| {
            let e = &entry_recs[*id as usize];
            let c = &channel_recs[e.channel as usize];
            (
                strings.get(c.name),
                strings.get(package_recs[c.package as usize].name),
                strings.get(bundle_recs[e.bundle as usize].name),
            )
        };
        key(a).cmp(&key(b))
    });

    let stats = IndexStats {
        packages: package_recs.len(),
        channels: channel_recs.len(),
        bundles: bundle_recs.len(),
        channel_entries: entry_recs.len(),
        custom_documents: custom_recs.len(),
        ..IndexStats::default()
    };
    Ok(CatalogIndex {
        strings,
        packages: package_recs,
        channels: channel_recs,
        entries: entry_recs,
        bundles: bundle_recs,
        skips,
        gvks,
        bundle_gvks,
        bundle_entries,
        providers,
        list_order,
        customs: custom_recs,
        store: BlobStore::new(PathBuf::new(), Vec::new(), Vec::new()),
        stats,
        answers: crate::answer_cache::AnswerCache::new(crate::answer_cache::ANSWER_CACHE_BYTES),
    })
}

fn intern_gvk(strings: &mut StrPoolBuilder, g: &RawGvk) -> Result<GvkRec, PoolFull> {
    Ok(GvkRec {
        group: strings.intern(&g.group)?,
        version: strings.intern(&g.version)?,
        kind: strings.intern(&g.kind)?,
    })
}

fn gvk_span(
    strings: &mut StrPoolBuilder,
    ids: &HashMap<(StrId, StrId, StrId), u32>,
    out: &mut Vec<u32>,
    table: &[RawGvk],
    gvks: &[u32],
) -> Result<Span, PoolFull> {
    let start = out.len() as u32;
    for g in gvks {
        let rec = intern_gvk(strings, &table[*g as usize])?;
        out.push(ids[&(rec.group, rec.version, rec.kind)]);
    }
    Ok(Span {
        start,
        len: out.len() as u32 - start,
    })
}

impl CatalogIndex {
    fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.strings.heap_bytes()
            + self.packages.capacity() * size_of::<PackageRec>()
            + self.channels.capacity() * size_of::<ChannelRec>()
            + self.entries.capacity() * size_of::<EntryRec>()
            + self.bundles.capacity() * size_of::<BundleRec>()
            + self.skips.capacity() * size_of::<StrId>()
            + self.gvks.capacity() * size_of::<GvkRec>()
            + (self.bundle_gvks.capacity()
                + self.bundle_entries.capacity()
                + self.list_order.capacity())
                * 4
            + self.providers.capacity() * 8
            + self.customs.capacity() * size_of::<CustomRec>()
    }
}
