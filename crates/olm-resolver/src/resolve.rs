//! Resolution of one namespace: turns the installed CSVs, the Subscriptions
//! and the visible catalogs into upstream's variables and constraints
//! (`pkg/controller/registry/resolver/resolver.go`), solves them, and reports
//! the bundles to install or the constraints that conflict.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use olm_catalog::{property, semver::Version};
use serde::Serialize;

use crate::{
    constraint::Dependency,
    model::Reach,
    model::{
        BundleData, CatalogKey, CatalogSnapshot, Entry, EntryId, Interner, NamespaceState,
        Subscription,
    },
    sat::{Outcome, Problem, Rule, VarId},
};

/// Everything one resolution reads.
#[derive(Debug, Clone)]
pub struct ResolveRequest<'a> {
    /// The namespace's installed CSVs and Subscriptions.
    pub state: &'a NamespaceState,
    /// Every catalog of the cluster (or at least those of the namespace and
    /// the global catalog namespace); others are ignored.
    pub catalogs: &'a [Arc<CatalogSnapshot>],
    /// The global catalog namespace (`olm` upstream, `openshift-marketplace`
    /// on OpenShift).
    pub global_namespace: &'a str,
    /// The OperatorGroup's `olm.operatorframework.io/exclude-global-namespace-resolution`.
    pub exclude_global: bool,
}

/// A bundle the namespace should run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedOperator {
    /// The CSV name.
    pub name: String,
    /// Its package.
    pub package: String,
    /// The channel it was chosen from.
    pub channel: String,
    /// Its version, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The catalog name.
    pub catalog: String,
    /// The catalog namespace.
    pub catalog_namespace: String,
    /// The bundle image, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_path: Option<String>,
    /// The installed CSV it upgrades (written into `spec.replaces`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// The Subscription it satisfies; none for a dependency (catalog-operator
    /// then creates a Subscription for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription: Option<String>,
    /// Set when the Subscription's `startingCSV` chose it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub starting_csv: bool,
}

/// What a Subscription resolves to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionDecision {
    /// The Subscription name.
    pub name: String,
    /// The CSV it will run.
    pub csv: String,
    /// Whether that CSV is already installed (no change).
    pub unchanged: bool,
}

/// A successful resolution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolution {
    /// The namespace.
    pub namespace: String,
    /// Bundles to install or upgrade to, in the order they were decided; the
    /// installed CSVs that stay are not listed.
    pub operators: Vec<ResolvedOperator>,
    /// Per Subscription, the CSV it resolves to.
    pub subscriptions: Vec<SubscriptionDecision>,
}

/// One constraint of a conflicting set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    /// The kind: `mandatory`, `prohibited`, `dependency`, `conflict` or
    /// `atMostOne`.
    pub kind: &'static str,
    /// Upstream's message for it.
    pub message: String,
    /// The same, in plain words, with what upstream leaves implicit.
    pub explanation: String,
}

/// Why a namespace cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Nothing satisfies every constraint: a minimal conflicting set.
    #[error("constraints not satisfiable: {}", .conflicts.iter().map(|c| c.message.as_str()).collect::<Vec<_>>().join(", "))]
    NotSatisfiable {
        /// The conflicting constraints.
        conflicts: Vec<Conflict>,
    },
    /// A catalog in scope is unhealthy; resolution waits for it.
    #[error("{}", .catalogs.iter().map(|c| format!("failed to populate resolver cache from source {c}: catalog source is unhealthy")).collect::<Vec<_>>().join(", "))]
    CatalogsUnhealthy {
        /// The unhealthy catalogs.
        catalogs: Vec<CatalogKey>,
    },
    /// The input cannot be resolved at all (a broken channel, an invalid
    /// requirement, an ambiguous installed CSV).
    #[error("{}", aggregate(.errors))]
    Invalid {
        /// Each problem.
        errors: Vec<String>,
    },
}

/// Kubernetes' `utilerrors.NewAggregate` formatting.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

impl ResolveError {
    /// The `ResolutionFailed` condition reason upstream sets for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotSatisfiable { .. } => "ConstraintsNotSatisfiable",
            Self::CatalogsUnhealthy { .. } | Self::Invalid { .. } => "ErrorPreventedResolution",
        }
    }
}

/// Catalog index 0 is the namespace's installed CSVs.
const EXISTING: usize = 0;

pub(crate) type EntryRef = (usize, EntryId);

/// A (package, channel, is-default-channel) of a catalog holding a match.
type ChannelSource = (Arc<str>, Arc<str>, bool);

pub(crate) struct Builder<'a> {
    namespace: &'a str,
    /// Index 0: the installed CSVs; then every catalog in scope.
    catalogs: Vec<Arc<CatalogSnapshot>>,
    pub(crate) problem: Problem,
    vars: HashMap<EntryRef, VarId>,
    processed: HashSet<EntryRef>,
    pub(crate) var_entries: Vec<Option<EntryRef>>,
    subscribed: HashSet<String>,
    dependency_cache: HashMap<(String, usize), Arc<Vec<EntryRef>>>,
    errors: Vec<String>,
    /// What each constraint is, for explanations: an empty-candidate
    /// dependency of a bundle.
    unmet: HashSet<usize>,
}

/// Resolves one namespace as upstream OLM would.
pub fn resolve(request: &ResolveRequest<'_>) -> Result<Resolution, ResolveError> {
    let prepared = prepare(request)?;
    let b = &prepared.builder;
    let out = b.problem.solve();
    match out {
        Outcome::Conflicts(indexes) => {
            // Upstream (OLM v0.46, solver.litMapping.Conflicts) sorts the
            // clauses of its message by their text; so do we, so the
            // message is upstream's word for word.
            let mut conflicts: Vec<Conflict> = indexes.iter().map(|&i| b.explain(i)).collect();
            conflicts.sort_by(|x, y| x.message.cmp(&y.message));
            Err(ResolveError::NotSatisfiable { conflicts })
        }
        Outcome::Selected(selected) => Ok(b.resolution(&selected, &prepared.subs)),
    }
}

type SubVar<'a> = (VarId, &'a Subscription, Option<EntryRef>, Vec<VarId>);

/// The variables and constraints of one namespace, before solving.
pub(crate) struct Prepared<'a> {
    pub(crate) builder: Builder<'a>,
    subs: Vec<SubVar<'a>>,
}

/// Builds the problem of one namespace.
pub(crate) fn prepare<'a>(request: &ResolveRequest<'a>) -> Result<Prepared<'a>, ResolveError> {
    let state = request.state;
    let namespace = state.namespace.as_str();
    let in_scope =
        |ns: &str| ns == namespace || (!request.exclude_global && ns == request.global_namespace);
    let scoped: Vec<Arc<CatalogSnapshot>> = request
        .catalogs
        .iter()
        .filter(|c| in_scope(&c.key.namespace))
        .cloned()
        .collect();
    let mut unhealthy: Vec<CatalogKey> = scoped
        .iter()
        .filter(|c| !c.healthy)
        .map(|c| c.key.clone())
        .collect();
    if !unhealthy.is_empty() {
        unhealthy.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        return Err(ResolveError::CatalogsUnhealthy {
            catalogs: unhealthy,
        });
    }

    let existing = Arc::new(existing_snapshot(state, &scoped));
    let mut catalogs = vec![existing];
    catalogs.extend(scoped);
    let mut b = Builder {
        namespace,
        catalogs,
        problem: Problem::default(),
        vars: HashMap::new(),
        processed: HashSet::new(),
        var_entries: Vec::new(),
        subscribed: state
            .subscriptions
            .iter()
            .filter(|s| !s.installed_csv.is_empty())
            .map(|s| s.installed_csv.clone())
            .collect(),
        dependency_cache: HashMap::new(),
        errors: Vec::new(),
        unmet: HashSet::new(),
    };

    // The installed CSVs, and everything they need.
    let installed: Vec<EntryRef> = (0..b.catalogs[EXISTING].entries.len())
        .map(|i| (EXISTING, i as EntryId))
        .collect();
    b.bundle_variables(installed);

    // Each Subscription.
    let mut sub_vars: Vec<SubVar<'a>> = Vec::new();
    for sub in &state.subscriptions {
        match b.subscription_variable(sub) {
            Ok(v) => sub_vars.push((v.0, sub, v.1, v.2)),
            Err(e) => b.errors.push(e),
        }
    }
    b.add_invariants();
    if !b.errors.is_empty() {
        return Err(ResolveError::Invalid { errors: b.errors });
    }
    Ok(Prepared {
        builder: b,
        subs: sub_vars,
    })
}

/// The virtual catalog of installed CSVs, with packages inferred from the
/// Subscriptions that installed them where the CSV does not say.
fn existing_snapshot(state: &NamespaceState, catalogs: &[Arc<CatalogSnapshot>]) -> CatalogSnapshot {
    let mut interner = Interner::default();
    let key = CatalogKey::existing(&state.namespace);
    let mut entries = Vec::with_capacity(state.csvs.len());
    for csv in &state.csvs {
        let mut properties: Vec<(String, String)> = csv.properties.clone();
        let has_package = properties.iter().any(|(t, _)| t == property::PACKAGE);
        if !has_package && let Some(package) = infer_package(&csv.name, state, catalogs) {
            let version = csv.version.clone().unwrap_or_default();
            properties.push((
                property::PACKAGE.to_owned(),
                serde_json::json!({"packageName": package, "version": version}).to_string(),
            ));
        }
        let mut data = BundleData::from_properties(
            &mut interner,
            "",
            properties.iter().map(|(t, v)| (t.as_str(), v.as_str())),
        );
        data.has_package_property = properties.iter().any(|(t, _)| t == property::PACKAGE);
        if let Some(v) = csv
            .version
            .as_deref()
            .and_then(|v| Version::parse_tolerant(v).ok())
        {
            data.version = Some(v);
        }
        entries.push(Entry {
            name: interner.intern(&csv.name),
            channel: interner.intern(""),
            replaces: csv
                .replaces
                .as_deref()
                .filter(|r| !r.is_empty())
                .map(|r| interner.intern(r)),
            skips: Vec::new(),
            skip_range: None,
            parsed_skip_range: None,
            default_channel: false,
            bundle: Arc::new(data),
        });
    }
    CatalogSnapshot::from_entries(key, 0, true, entries)
}

/// Upstream's `inferProperties`: the package of a CSV without an
/// `olm.package` property is the package of the catalog entries named like it
/// in the catalog of the Subscription that installed it, if exactly one.
fn infer_package(
    csv: &str,
    state: &NamespaceState,
    catalogs: &[Arc<CatalogSnapshot>],
) -> Option<String> {
    let mut packages: HashSet<&str> = HashSet::new();
    for sub in state
        .subscriptions
        .iter()
        .filter(|s| s.installed_csv == csv)
    {
        for c in catalogs
            .iter()
            .filter(|c| *c.key.name == *sub.catalog && *c.key.namespace == *sub.catalog_namespace)
        {
            for (_, e) in c.package_entries(&sub.package) {
                if &*e.name == csv {
                    packages.insert(e.package());
                }
            }
        }
    }
    (packages.len() == 1).then(|| packages.into_iter().next().unwrap_or_default().to_owned())
}

fn bundle_id(catalog: &CatalogKey, entry: &Entry) -> String {
    format!("{catalog}/{}/{}", entry.channel, entry.name)
}

fn list_with_or(ids: &[String]) -> String {
    match ids {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

fn list_with_and(ids: &[String]) -> String {
    match ids {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl Builder<'_> {
    pub(crate) fn entry(&self, (c, id): EntryRef) -> &Entry {
        &self.catalogs[c].entries[id as usize]
    }

    fn var_name(&self, r: EntryRef) -> String {
        bundle_id(&self.catalogs[r.0].key, self.entry(r))
    }

    /// The variable of one entry, created on first use with its own
    /// constraints (Mandatory for an installed CSV no Subscription claims,
    /// Prohibited for a deprecated bundle).
    fn variable(&mut self, r: EntryRef) -> (VarId, bool) {
        if let Some(&v) = self.vars.get(&r) {
            return (v, false);
        }
        let name = self.var_name(r);
        let v = self.problem.add_var(name.clone());
        self.vars.insert(r, v);
        self.pad_var_entries();
        self.var_entries[v] = Some(r);
        let entry = self.entry(r).clone();
        if r.0 == EXISTING && !self.subscribed.contains(&*entry.name) {
            self.problem.add(
                v,
                Rule::Mandatory,
                format!(
                    "clusterserviceversion {} exists and is not referenced by a subscription",
                    entry.name
                ),
            );
        }
        if entry.bundle.deprecated {
            self.problem
                .add(v, Rule::Prohibited, format!("bundle {name} is deprecated"));
        }
        (v, true)
    }

    fn pad_var_entries(&mut self) {
        while self.var_entries.len() < self.problem.names.len() {
            self.var_entries.push(None);
        }
    }

    /// Upstream's `getBundleVariables`: variables for `stack` and, through
    /// their requirements, everything they may need.
    fn bundle_variables(&mut self, mut stack: Vec<EntryRef>) {
        while let Some(r) = stack.pop() {
            let (v, _) = self.variable(r);
            if !self.processed.insert(r) {
                continue;
            }
            let entry = self.entry(r).clone();
            for e in &entry.bundle.dependency_errors {
                self.errors.push(e.to_string());
            }
            if !entry.bundle.dependency_errors.is_empty() {
                continue;
            }
            for d in &entry.bundle.dependencies {
                let candidates = match self.dependency_candidates(d, r.0) {
                    Ok(c) => c,
                    Err(e) => {
                        self.errors.push(e);
                        continue;
                    }
                };
                let mut ids = Vec::with_capacity(candidates.len());
                for &c in candidates.iter() {
                    let (cv, _) = self.variable(c);
                    ids.push(cv);
                    stack.push(c);
                }
                if ids.is_empty() {
                    self.unmet.insert(self.problem.constraints.len());
                }
                self.problem.add(
                    v,
                    Rule::Dependency(ids),
                    format!("bundle {} requires an operator {d}", entry.name),
                );
            }
        }
    }

    /// The candidates of one requirement of a bundle from catalog `own`, in
    /// upstream's preference order (`FindPreferred` then `sortBundles`, then
    /// the requirement as a filter).
    fn dependency_candidates(
        &mut self,
        d: &Dependency,
        own: usize,
    ) -> Result<Arc<Vec<EntryRef>>, String> {
        let key = (d.cache_key(), own);
        if let Some(c) = self.dependency_cache.get(&key) {
            return Ok(c.clone());
        }
        // Every (catalog, package, channel) holding a match; for installed
        // CSVs, the CSV itself.
        let mut sources: HashMap<usize, Vec<ChannelSource>> = HashMap::new();
        let mut existing_matches: Vec<EntryRef> = Vec::new();
        let mut matched: HashSet<EntryRef> = HashSet::new();
        for (ci, catalog) in self.catalogs.iter().enumerate() {
            let mut seen: HashSet<(Arc<str>, Arc<str>)> = HashSet::new();
            let mut visit = |id: EntryId| {
                let e = &catalog.entries[id as usize];
                if !d.matches(e) {
                    return;
                }
                matched.insert((ci, id));
                if ci == EXISTING {
                    existing_matches.push((ci, id));
                } else if seen.insert((e.package().clone(), e.channel.clone())) {
                    sources.entry(ci).or_default().push((
                        e.package().clone(),
                        e.channel.clone(),
                        e.default_channel,
                    ));
                }
            };
            match catalog.reach(d) {
                Reach::Some(ids) => ids.into_iter().for_each(&mut visit),
                Reach::All => (0..catalog.entries.len() as EntryId).for_each(&mut visit),
            }
        }
        let mut order: Vec<usize> = sources.keys().copied().collect();
        order.sort_by(|&a, &b| {
            let (ca, cb) = (&self.catalogs[a], &self.catalogs[b]);
            (a != own)
                .cmp(&(b != own))
                .then(cb.priority.cmp(&ca.priority))
                .then(
                    (*ca.key.namespace != *self.namespace)
                        .cmp(&(*cb.key.namespace != *self.namespace)),
                )
                .then(ca.key.namespace.cmp(&cb.key.namespace))
                .then(ca.key.name.cmp(&cb.key.name))
        });
        let mut result = existing_matches;
        for ci in order {
            let mut combos = sources.remove(&ci).unwrap_or_default();
            combos.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
            let catalog = &self.catalogs[ci];
            for (package, channel, _) in combos {
                let sorted = catalog.sorted_channel(&package, &channel)?;
                result.extend(
                    sorted
                        .iter()
                        .map(|&id| (ci, id))
                        .filter(|r| matched.contains(r)),
                );
            }
        }
        let result = Arc::new(result);
        self.dependency_cache.insert(key, result.clone());
        Ok(result)
    }

    /// Upstream's `getSubscriptionVariables`: the Subscription's variable,
    /// the installed entry it tracks, and its candidates.
    fn subscription_variable(
        &mut self,
        sub: &Subscription,
    ) -> Result<(VarId, Option<EntryRef>, Vec<VarId>), String> {
        let var = self.problem.add_var(format!("subscription:{}", sub.name));
        self.pad_var_entries();
        let current: Vec<EntryRef> = if sub.installed_csv.is_empty() {
            Vec::new()
        } else {
            self.catalogs[EXISTING]
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| *e.name == *sub.installed_csv)
                .map(|(i, _)| (EXISTING, i as EntryId))
                .collect()
        };
        if current.len() > 1 {
            return Err(format!(
                "multiple name matches for status.installedCSV of subscription {}/{}: {}",
                self.namespace,
                sub.name,
                current
                    .iter()
                    .map(|&r| self.entry(r).name.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let current = current.first().copied();
        self.problem.add(
            var,
            Rule::Mandatory,
            format!("subscription {} exists", sub.name),
        );

        let catalog = self
            .catalogs
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, c)| {
                *c.key.name == *sub.catalog && *c.key.namespace == *sub.catalog_namespace
            })
            .map(|(i, _)| i);
        let starting = (current.is_none() && !sub.starting_csv.is_empty())
            .then_some(sub.starting_csv.as_str());
        let (mut nall, mut npkg, mut nch, mut ncsv) = (0usize, 0usize, 0usize, 0usize);
        let mut matched: Vec<EntryId> = Vec::new();
        if let Some(ci) = catalog {
            let c = &self.catalogs[ci];
            nall = c.entries.len();
            for (id, e) in c.package_entries(&sub.package) {
                npkg += 1;
                if !sub.channel.is_empty() && *e.channel != *sub.channel {
                    continue;
                }
                nch += 1;
                if starting.is_some_and(|s| *e.name != *s) {
                    continue;
                }
                ncsv += 1;
                matched.push(id);
            }
        }
        let invalid = if nall == 0 {
            Some(format!(
                "no operators found from catalog {} in namespace {} referenced by subscription {}",
                sub.catalog, sub.catalog_namespace, sub.name
            ))
        } else if npkg == 0 {
            Some(format!(
                "no operators found in package {} in the catalog referenced by subscription {}",
                sub.package, sub.name
            ))
        } else if nch == 0 {
            Some(format!(
                "no operators found in channel {} of package {} in the catalog referenced by subscription {}",
                sub.channel, sub.package, sub.name
            ))
        } else if ncsv == 0 {
            Some(format!(
                "no operators found with name {} in channel {} of package {} in the catalog referenced by subscription {}",
                sub.starting_csv, sub.channel, sub.package, sub.name
            ))
        } else {
            None
        };
        if let Some(reason) = invalid {
            self.problem.add(var, Rule::Prohibited, reason);
            return Ok((var, current, Vec::new()));
        }
        let Some(ci) = catalog else {
            return Ok((var, current, Vec::new()));
        };

        // Default channel first, then channels by name; each channel in
        // sortChannel order.
        let c = self.catalogs[ci].clone();
        let mut channels: Vec<(bool, Arc<str>)> = Vec::new();
        for &id in &matched {
            let e = &c.entries[id as usize];
            if !channels.iter().any(|(_, ch)| *ch == e.channel) {
                channels.push((e.default_channel, e.channel.clone()));
            }
        }
        channels.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut sorted: Vec<EntryId> = Vec::with_capacity(matched.len());
        for (_, channel) in &channels {
            let subset: Vec<EntryId> = matched
                .iter()
                .copied()
                .filter(|&id| c.entries[id as usize].channel == *channel)
                .collect();
            let full = c.sorted_channel(&sub.package, channel)?;
            if full.len() == subset.len() {
                sorted.extend_from_slice(full);
            } else {
                sorted.extend(c.sort_subset(&subset, &sub.package, channel)?);
            }
        }
        let (current_name, current_version) = match current {
            Some(r) => {
                let e = self.entry(r);
                (Some(e.name.clone()), e.bundle.version.clone())
            }
            None => (None, None),
        };
        let mut candidates: Vec<EntryRef> = Vec::new();
        for &id in &sorted {
            let o = &c.entries[id as usize];
            if let Some(name) = &current_name
                && !o.upgrades_from(name, current_version.as_ref())
            {
                continue;
            }
            // Every matched entry of the same bundle (several channels when
            // the Subscription names none).
            for &other in &sorted {
                if c.entries[other as usize].name == o.name && !candidates.contains(&(ci, other)) {
                    candidates.push((ci, other));
                }
            }
        }
        self.bundle_variables(candidates.clone());
        let mut dep_ids: Vec<VarId> = candidates.iter().map(|r| self.vars[r]).collect();
        if let Some(cur) = current {
            let cur_var = self.vars[&cur];
            let cur_name = self.var_name(cur);
            for &cv in &dep_ids {
                self.problem.add(
                    cv,
                    Rule::Conflict(cur_var),
                    format!("{} conflicts with {cur_name}", self.problem.names[cv]),
                );
            }
            dep_ids.push(cur_var);
        }
        let names: Vec<String> = dep_ids
            .iter()
            .map(|&v| self.problem.names[v].clone())
            .collect();
        let message = match names.len() {
            0 => format!(
                "no operators found matching the criteria of subscription {}",
                sub.name
            ),
            1 => format!("subscription {} requires {}", sub.name, names[0]),
            _ => format!(
                "subscription {} requires at least one of {}",
                sub.name,
                list_with_or(&names)
            ),
        };
        self.problem
            .add(var, Rule::Dependency(dep_ids.clone()), message);
        Ok((var, current, dep_ids))
    }

    /// At most one provider per API and one operator per package.
    fn add_invariants(&mut self) {
        self.pad_var_entries();
        let mut gvks: Vec<(String, Vec<VarId>)> = Vec::new();
        let mut gvk_index: HashMap<String, usize> = HashMap::new();
        let mut packages: Vec<(String, Vec<VarId>)> = Vec::new();
        let mut package_index: HashMap<String, usize> = HashMap::new();
        for v in 0..self.var_entries.len() {
            let Some(r) = self.var_entries[v] else {
                continue;
            };
            let bundle = self.entry(r).bundle.clone();
            for g in &bundle.provided {
                let key = format!("{} ({}/{})", g.kind, g.group, g.version);
                let i = *gvk_index.entry(key.clone()).or_insert_with(|| {
                    gvks.push((key, Vec::new()));
                    gvks.len() - 1
                });
                if gvks[i].1.last() != Some(&v) {
                    gvks[i].1.push(v);
                }
            }
            if bundle.has_package_property {
                let key = bundle.package.to_string();
                let i = *package_index.entry(key.clone()).or_insert_with(|| {
                    packages.push((key, Vec::new()));
                    packages.len() - 1
                });
                packages[i].1.push(v);
            }
        }
        // Upstream sorts each set by identifier (slices.Sort in
        // addInvariants), which is the order its message lists them in.
        let by_name = |this: &Self, mut vars: Vec<VarId>| {
            vars.sort_by(|&a, &b| this.problem.names[a].cmp(&this.problem.names[b]));
            vars
        };
        for (gvk, providers) in gvks {
            let providers = by_name(self, providers);
            if providers.len() > 1 {
                let names: Vec<String> = providers
                    .iter()
                    .map(|&v| self.problem.names[v].clone())
                    .collect();
                self.problem.add(
                    providers[0],
                    Rule::AtMostOne(providers),
                    format!("{} provide {gvk}", list_with_and(&names)),
                );
            }
        }
        for (package, members) in packages {
            let members = by_name(self, members);
            if members.len() > 1 {
                let names: Vec<String> = members
                    .iter()
                    .map(|&v| self.problem.names[v].clone())
                    .collect();
                self.problem.add(
                    members[0],
                    Rule::AtMostOne(members),
                    format!("{} originate from package {package}", list_with_and(&names)),
                );
            }
        }
    }

    fn explain(&self, index: usize) -> Conflict {
        let c = &self.problem.constraints[index];
        let (kind, explanation) = match &c.rule {
            Rule::Mandatory => ("mandatory", c.message.clone()),
            Rule::Prohibited => ("prohibited", c.message.clone()),
            Rule::Dependency(_) if self.unmet.contains(&index) => (
                "dependency",
                format!(
                    "{}; no catalog visible to namespace {} has one",
                    c.message, self.namespace
                ),
            ),
            Rule::Dependency(_) => ("dependency", c.message.clone()),
            Rule::Conflict(other) => (
                "conflict",
                format!(
                    "{} would replace {}, so they cannot both be installed",
                    self.problem.names[c.subject], self.problem.names[*other]
                ),
            ),
            Rule::AtMostOne(_) => (
                "atMostOne",
                if let Some((_, package)) = c.message.rsplit_once(" originate from package ") {
                    format!(
                        "only one operator of package {package} may run in namespace {}, but these are all required: {}",
                        self.namespace,
                        c.message
                            .trim_end_matches(&format!(" originate from package {package}"))
                    )
                } else {
                    format!(
                        "only one operator may provide an API in namespace {}: {}",
                        self.namespace, c.message
                    )
                },
            ),
        };
        Conflict {
            kind,
            message: c.message.clone(),
            explanation,
        }
    }

    fn resolution(&self, selected: &[VarId], subs: &[SubVar<'_>]) -> Resolution {
        let chosen: HashSet<VarId> = selected.iter().copied().collect();
        let mut operators = Vec::new();
        let mut decisions = Vec::new();
        let mut owner: HashMap<VarId, (&Subscription, Option<EntryRef>)> = HashMap::new();
        for (_, sub, current, deps) in subs {
            for &d in deps {
                owner.entry(d).or_insert((sub, *current));
            }
            let pick = deps.iter().find(|d| chosen.contains(d));
            if let Some(&p) = pick
                && let Some(r) = self.var_entries[p]
            {
                decisions.push(SubscriptionDecision {
                    name: sub.name.clone(),
                    csv: self.entry(r).name.to_string(),
                    unchanged: r.0 == EXISTING,
                });
            }
        }
        for &v in selected {
            let Some(r) = self.var_entries[v] else {
                continue;
            };
            if r.0 == EXISTING {
                continue;
            }
            let e = self.entry(r);
            let catalog = &self.catalogs[r.0].key;
            let (subscription, replaces, starting) = match owner.get(&v) {
                Some((sub, current)) => (
                    Some(sub.name.clone()),
                    current.map(|c| self.entry(c).name.to_string()),
                    current.is_none()
                        && !sub.starting_csv.is_empty()
                        && *sub.starting_csv == *e.name,
                ),
                None => (None, None, false),
            };
            operators.push(ResolvedOperator {
                name: e.name.to_string(),
                package: e.package().to_string(),
                channel: e.channel.to_string(),
                version: e.bundle.version.as_ref().map(ToString::to_string),
                catalog: catalog.name.to_string(),
                catalog_namespace: catalog.namespace.to_string(),
                bundle_path: e.bundle.bundle_path.as_deref().map(str::to_owned),
                replaces,
                subscription,
                starting_csv: starting,
            });
        }
        Resolution {
            namespace: self.namespace.to_owned(),
            operators,
            subscriptions: decisions,
        }
    }
}
