//! Fixture builders that read like sentences.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::sync::Arc;

use olm_resolver::{
    BundleInput, CatalogKey, CatalogSnapshot, InstalledCsv, NamespaceState, Resolution,
    ResolveError, ResolveRequest, Subscription, resolve,
};

pub const NS: &str = "operators";
pub const GLOBAL: &str = "olm";

#[derive(Clone)]
pub struct B(pub BundleInput);

/// A bundle `name` of `package` at `version`, in channel `stable`.
pub fn bundle(name: &str, package: &str, version: &str) -> B {
    B(BundleInput {
        name: name.into(),
        package: package.into(),
        channel: "stable".into(),
        bundle_path: format!("quay.io/example/{name}:latest"),
        properties: vec![(
            "olm.package".into(),
            format!(r#"{{"packageName":"{package}","version":"{version}"}}"#),
        )],
        ..Default::default()
    })
}

pub fn gvk(group: &str, version: &str, kind: &str) -> String {
    format!(r#"{{"group":"{group}","version":"{version}","kind":"{kind}"}}"#)
}

impl B {
    pub fn in_channel(mut self, channel: &str) -> Self {
        self.0.channel = channel.into();
        self
    }
    pub fn replaces(mut self, r: &str) -> Self {
        self.0.replaces = r.into();
        self
    }
    pub fn skips(mut self, s: &str) -> Self {
        self.0.skips.push(s.into());
        self
    }
    pub fn skip_range(mut self, r: &str) -> Self {
        self.0.skip_range = r.into();
        self
    }
    pub fn property(mut self, t: &str, v: &str) -> Self {
        self.0.properties.push((t.into(), v.into()));
        self
    }
    pub fn provides(self, g: &str, v: &str, k: &str) -> Self {
        self.property("olm.gvk", &gvk(g, v, k))
    }
    pub fn requires_api(self, g: &str, v: &str, k: &str) -> Self {
        self.property("olm.gvk.required", &gvk(g, v, k))
    }
    pub fn requires_package(self, p: &str, range: &str) -> Self {
        self.property(
            "olm.package.required",
            &format!(r#"{{"packageName":"{p}","versionRange":"{range}"}}"#),
        )
    }
    pub fn constraint(self, json: &str) -> Self {
        self.property("olm.constraint", json)
    }
    pub fn deprecated(self) -> Self {
        self.property("olm.deprecated", "{}")
    }
}

/// A catalog `name` in `namespace` with `priority`, default channels, and
/// bundles.
pub fn catalog(
    name: &str,
    namespace: &str,
    priority: i32,
    defaults: &[(&str, &str)],
    bundles: Vec<B>,
) -> Arc<CatalogSnapshot> {
    Arc::new(CatalogSnapshot::build(
        CatalogKey::new(name, namespace),
        priority,
        true,
        &defaults
            .iter()
            .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
            .collect::<Vec<_>>(),
        bundles.into_iter().map(|b| b.0).collect(),
    ))
}

pub fn unhealthy(c: Arc<CatalogSnapshot>) -> Arc<CatalogSnapshot> {
    let mut c = Arc::try_unwrap(c).unwrap();
    c.healthy = false;
    Arc::new(c)
}

/// A Subscription `name` to `package` in `channel` of catalog `source` in
/// the global namespace.
pub fn sub(name: &str, package: &str, channel: &str, source: &str) -> Subscription {
    Subscription {
        name: name.into(),
        package: package.into(),
        channel: channel.into(),
        catalog: source.into(),
        catalog_namespace: GLOBAL.into(),
        ..Default::default()
    }
}

pub trait SubExt {
    fn installed(self, csv: &str) -> Self;
    fn starting_at(self, csv: &str) -> Self;
    fn sourced_in(self, ns: &str) -> Self;
}

impl SubExt for Subscription {
    fn installed(mut self, csv: &str) -> Self {
        self.installed_csv = csv.into();
        self
    }
    fn starting_at(mut self, csv: &str) -> Self {
        self.starting_csv = csv.into();
        self
    }
    fn sourced_in(mut self, ns: &str) -> Self {
        self.catalog_namespace = ns.into();
        self
    }
}

/// An installed CSV with properties (type, JSON).
pub fn csv(name: &str, package: &str, version: &str, extra: &[(&str, String)]) -> InstalledCsv {
    let mut properties = vec![(
        "olm.package".to_owned(),
        format!(r#"{{"packageName":"{package}","version":"{version}"}}"#),
    )];
    properties.extend(extra.iter().map(|(t, v)| ((*t).to_owned(), v.clone())));
    InstalledCsv {
        name: name.into(),
        version: Some(version.into()),
        replaces: None,
        properties,
    }
}

pub fn run(
    csvs: Vec<InstalledCsv>,
    subs: Vec<Subscription>,
    catalogs: &[Arc<CatalogSnapshot>],
) -> Result<Resolution, ResolveError> {
    let state = NamespaceState {
        namespace: NS.into(),
        csvs,
        subscriptions: subs,
    };
    resolve(&ResolveRequest {
        state: &state,
        catalogs,
        global_namespace: GLOBAL,
        exclude_global: false,
    })
}

/// The CSV names a successful resolution installs, sorted.
pub fn installs(r: &Result<Resolution, ResolveError>) -> Vec<String> {
    match r {
        Ok(r) => {
            let mut names: Vec<String> = r.operators.iter().map(|o| o.name.clone()).collect();
            names.sort();
            names
        }
        Err(e) => panic!("expected a resolution, got: {e}"),
    }
}

pub fn failure(r: &Result<Resolution, ResolveError>) -> String {
    match r {
        Ok(r) => panic!("expected a failure, got {:?}", r.operators),
        Err(e) => e.to_string(),
    }
}
