//! Keeping the store filled: a watch on every CatalogSource starts one
//! refresher per catalog, which fetches the catalog's packages over the
//! registry gRPC API when the catalog appears or changes, when the bus says
//! its content changed ([`Poke`]s, from catalog-operator's `CatalogUpdated`
//! events), periodically, and again after failures (with backoff). A refresh
//! builds everything first and swaps it in at once; a failed or slow refresh
//! leaves the last good packages served and is reported, never waited for by
//! a request. A registry named by its Service's DNS name is dialled as
//! [`RefreshSettings::resolver`] says (at its ClusterIP, outside the
//! cluster network).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::{Duration, SystemTime},
};

use futures::{StreamExt, TryStreamExt, stream};
use kube::{
    Api, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use olm_api::{
    catalog_source::CatalogSource, labels::property_type, package_manifest::PackageManifest,
};
use olm_bus::events::CatalogUpdated;
use olm_registry::{ClientOptions, RegistryClient, api};
use olm_runtime::service_address::AddressResolver;
use thiserror::Error;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::{
    manifest::{self, CatalogMeta, ChannelHead},
    metrics::{CatalogLabels, CatalogMetrics},
    store::{CatalogKey, Store},
};

/// Deadline of one whole refresh (upstream: 5 minutes).
pub const REFRESH_DEADLINE: Duration = Duration::from_secs(5 * 60);

/// Deadline to connect to a registry.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Deadline of one registry call.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Registry calls in flight at once per catalog.
pub const FETCH_CONCURRENCY: usize = 16;

/// First retry delay after a failed refresh; doubled up to
/// [`MAX_RETRY_DELAY`].
pub const FIRST_RETRY_DELAY: Duration = Duration::from_secs(2);

/// Longest retry delay after failed refreshes.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(120);

/// Upper bound on the packages taken from one catalog.
pub const MAX_PACKAGES_PER_CATALOG: usize = 50_000;

/// Why a refresh failed.
#[derive(Debug, Error)]
pub enum RefreshError {
    /// The catalog has no address to reach.
    #[error("catalog has no address yet (spec.address and status.registryService are empty)")]
    NoAddress,
    /// The Service the catalog's address names has no ClusterIP to dial.
    #[error("registry {address}: {source}")]
    ServiceAddress {
        /// The catalog's address.
        address: String,
        /// Why it could not be dialled; it names the Service.
        #[source]
        source: olm_runtime::Error,
    },
    /// A registry call failed.
    #[error("registry {address}: {source}")]
    Registry {
        /// The address called (followed by the ClusterIP dialled in its
        /// place, if any).
        address: String,
        /// What failed.
        #[source]
        source: olm_registry::ClientError,
    },
    /// The refresh did not finish in time.
    #[error("refresh did not finish within {0:?}")]
    Deadline(Duration),
    /// The catalog is larger than allowed.
    #[error("catalog lists more than {limit} packages")]
    TooManyPackages {
        /// The limit, [`MAX_PACKAGES_PER_CATALOG`] outside tests.
        limit: usize,
    },
}

/// What a refresher needs to know about its catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Metadata copied onto packages.
    pub meta: CatalogMeta,
    /// `host:port` of the registry, when known.
    pub address: Option<String>,
    /// Something that changes whenever the catalog's content may have
    /// changed (the connection's last observed state or poll time).
    pub content_hint: String,
}

/// The refresher's view of a CatalogSource.
pub fn target(catalog: &CatalogSource) -> Target {
    let status = catalog.status.as_ref();
    let content_hint = format!(
        "{:?}/{:?}",
        status
            .and_then(|s| s.connection_state.as_ref())
            .map(|c| c.last_observed_state.to_string()),
        status.and_then(|s| s.latest_image_registry_poll.as_ref()),
    );
    Target {
        meta: CatalogMeta {
            name: catalog.name_any(),
            namespace: catalog.namespace().unwrap_or_default(),
            display_name: catalog.spec.display_name.clone().unwrap_or_default(),
            publisher: catalog.spec.publisher.clone().unwrap_or_default(),
            labels: catalog.labels().clone(),
            creation_timestamp: catalog.metadata.creation_timestamp.clone(),
        },
        address: catalog.registry_address(),
        content_hint,
    }
}

fn registry_error(address: &str) -> impl Fn(olm_registry::ClientError) -> RefreshError + '_ {
    move |source| RefreshError::Registry {
        address: address.to_owned(),
        source,
    }
}

/// A bundle entry without the heavy parts (CSV JSON, objects).
fn slim(bundle: api::Bundle) -> api::Bundle {
    api::Bundle {
        csv_name: bundle.csv_name,
        package_name: bundle.package_name,
        channel_name: bundle.channel_name,
        version: bundle.version,
        deprecation: bundle.deprecation,
        properties: bundle
            .properties
            .into_iter()
            .filter(|p| p.r#type == property_type::DEPRECATED)
            .collect(),
        ..api::Bundle::default()
    }
}

/// How catalogs are refreshed.
#[derive(Clone, Debug)]
pub struct RefreshSettings {
    /// How often every catalog is refreshed even without a change.
    pub interval: Duration,
    /// What a registry address naming a Service is dialled as
    /// (`--service-lookup`).
    pub resolver: AddressResolver,
}

/// Fetches every package of the catalog at `target.address`, dialled as
/// `resolver` says.
pub async fn fetch(
    target: &Target,
    options: ClientOptions,
    resolver: &AddressResolver,
) -> Result<Vec<PackageManifest>, RefreshError> {
    fetch_at_most(target, options, resolver, MAX_PACKAGES_PER_CATALOG).await
}

/// [`fetch`], refusing a catalog of more than `max_packages` packages; the
/// limit is a parameter so that a test can make it trip without serving
/// [`MAX_PACKAGES_PER_CATALOG`] packages.
async fn fetch_at_most(
    target: &Target,
    options: ClientOptions,
    resolver: &AddressResolver,
    max_packages: usize,
) -> Result<Vec<PackageManifest>, RefreshError> {
    let catalog_address = target.address.as_deref().ok_or(RefreshError::NoAddress)?;
    let dialled =
        resolver
            .resolve(catalog_address)
            .await
            .map_err(|source| RefreshError::ServiceAddress {
                address: catalog_address.to_owned(),
                source,
            })?;
    // Errors name the catalog's address, and what was dialled for it when
    // that differs, since either may be what is wrong.
    let address = if dialled == catalog_address {
        catalog_address.to_owned()
    } else {
        format!("{catalog_address} ({dialled})")
    };
    let address = address.as_str();
    let endpoint = if dialled.contains("://") {
        dialled
    } else {
        format!("http://{dialled}")
    };
    let client = RegistryClient::connect(&endpoint, options)
        .await
        .map_err(registry_error(address))?;
    let names = client
        .list_packages()
        .await
        .map_err(registry_error(address))?;
    if names.len() > max_packages {
        return Err(RefreshError::TooManyPackages {
            limit: max_packages,
        });
    }
    let mut entries: HashMap<String, Vec<api::Bundle>> = HashMap::new();
    let mut bundles = client
        .list_bundles()
        .await
        .map_err(registry_error(address))?;
    while let Some(bundle) = bundles.try_next().await.map_err(registry_error(address))? {
        let bundle = slim(bundle);
        entries
            .entry(bundle.package_name.clone())
            .or_default()
            .push(bundle);
    }
    let client = &client;
    let entries = &entries;
    let meta = &target.meta;
    let built: Vec<Option<PackageManifest>> = stream::iter(names)
        .map(|name| async move {
            let package = match client.get_package(&name).await {
                Ok(p) => p,
                Err(error) => {
                    tracing::warn!(package = %name, %error, "eliding package: error getting package");
                    return None;
                }
            };
            let mut heads: BTreeMap<String, ChannelHead> = BTreeMap::new();
            for channel in &package.channels {
                let head = client
                    .get_bundle_for_channel(&package.name, &channel.name)
                    .await
                    .map_err(|e| e.to_string());
                if let Err(error) = &head {
                    tracing::warn!(package = %name, channel = %channel.name, %error, "error getting bundle, eliding channel");
                }
                heads.insert(channel.name.clone(), head);
            }
            let bundles = entries.get(&name).map_or(&[][..], Vec::as_slice);
            manifest::build(meta, &package, &heads, bundles)
        })
        .buffer_unordered(FETCH_CONCURRENCY)
        .collect()
        .await;
    Ok(built.into_iter().flatten().collect())
}

/// The catalog a `CatalogUpdated` event names, if it names one.
pub fn poke_of(event: &CatalogUpdated) -> Option<Poke> {
    let catalog = event.catalog.as_ref()?;
    if catalog.namespace.is_empty() || catalog.name.is_empty() {
        return None;
    }
    Some((catalog.namespace.clone(), catalog.name.clone()))
}

/// Turns the bus's `CatalogUpdated` events (catalog-operator publishes one
/// when a catalog's registry becomes ready with new content) into
/// [`Poke`]s, until `stop` or the subscription ends. On a disabled bus the
/// subscription never yields and this only waits.
pub async fn forward_catalog_updates(
    mut updates: olm_bus::Subscription<CatalogUpdated>,
    pokes: mpsc::Sender<Poke>,
    stop: CancellationToken,
) {
    loop {
        let received = tokio::select! {
            () = stop.cancelled() => return,
            r = updates.recv() => r,
        };
        // The subscription ends only with the connection; the task must not
        // end before shutdown (that would stop the service).
        let Some(received) = received else {
            stop.cancelled().await;
            return;
        };
        let event = match received {
            Ok(received) => received.event,
            Err(error) => {
                tracing::debug!(error = %error, "undecodable catalog update on the bus; ignored");
                continue;
            }
        };
        let Some(poke) = poke_of(&event) else {
            continue;
        };
        tracing::debug!(namespace = %poke.0, catalog = %poke.1, reason = %event.reason, "catalog update from the bus");
        match pokes.try_send(poke) {
            Ok(()) => {}
            // Full: refreshes are already queued; the watch and the timer
            // catch up on anything dropped.
            Err(mpsc::error::TrySendError::Full(_)) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => {
                stop.cancelled().await;
                return;
            }
        }
    }
}

fn labels(key: &CatalogKey) -> CatalogLabels {
    CatalogLabels {
        namespace: key.0.clone(),
        name: key.1.clone(),
    }
}

/// A request to refresh one catalog now (the catalog's content changed,
/// says the bus). Pokes for catalogs the watch has not seen are ignored;
/// pokes that arrive while a refresh runs cause one more refresh after it.
pub type Poke = CatalogKey;

/// Capacity of the channel of [`Poke`]s; when it is full, further pokes are
/// dropped (the watch and the timer still refresh the catalog).
pub const POKE_CHANNEL_CAPACITY: usize = 1024;

/// Refreshes one catalog until cancelled: on start, on every change of its
/// target, on every poke, every `settings.interval`, and with backoff after
/// failures.
async fn refresher(
    key: CatalogKey,
    mut target: watch::Receiver<Target>,
    poke: Arc<Notify>,
    store: Arc<Store>,
    metrics: CatalogMetrics,
    settings: RefreshSettings,
    stop: CancellationToken,
) {
    let RefreshSettings { interval, resolver } = settings;
    let options = ClientOptions {
        connect_timeout: CONNECT_TIMEOUT,
        request_timeout: REQUEST_TIMEOUT,
        ..ClientOptions::default()
    };
    let mut retry = FIRST_RETRY_DELAY;
    loop {
        let current = target.borrow_and_update().clone();
        let started = std::time::Instant::now();
        let outcome = tokio::select! {
            () = stop.cancelled() => return,
            r = tokio::time::timeout(REFRESH_DEADLINE, fetch(&current, options, &resolver)) => {
                r.unwrap_or(Err(RefreshError::Deadline(REFRESH_DEADLINE)))
            }
        };
        let wait = match outcome {
            Ok(packages) => {
                let count = packages.len();
                store.replace_catalog(&key, packages, SystemTime::now());
                metrics
                    .packages
                    .get_or_create(&labels(&key))
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
                metrics.last_success.get_or_create(&labels(&key)).set(
                    SystemTime::now()
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64()),
                );
                tracing::info!(namespace = %key.0, catalog = %key.1, packages = count, elapsed_ms = started.elapsed().as_millis(), "catalog refreshed");
                retry = FIRST_RETRY_DELAY;
                interval
            }
            Err(error) => {
                tracing::warn!(namespace = %key.0, catalog = %key.1, error = &error as &dyn std::error::Error, "catalog refresh failed; serving the last known packages");
                metrics.refresh_failures.get_or_create(&labels(&key)).inc();
                store.record_failure(&key, error.to_string());
                let wait = retry;
                retry = (retry * 2).min(MAX_RETRY_DELAY);
                wait.min(interval)
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            changed = target.changed() => if changed.is_err() { return },
            () = poke.notified() => {
                tracing::debug!(namespace = %key.0, catalog = %key.1, "catalog content changed (bus); refreshing");
            }
            () = tokio::time::sleep(wait) => {}
        }
    }
}

struct Running {
    target: watch::Sender<Target>,
    poke: Arc<Notify>,
    stop: CancellationToken,
}

/// Watches CatalogSources in every namespace and keeps one refresher per
/// catalog; `pokes` ask for a catalog's refresh now. `synced` is called once
/// the first list is through.
pub async fn run(
    client: kube::Client,
    store: Arc<Store>,
    metrics: CatalogMetrics,
    settings: RefreshSettings,
    mut pokes: mpsc::Receiver<Poke>,
    synced: impl FnOnce() + Send,
    stop: CancellationToken,
) -> Result<(), watcher::Error> {
    let api: Api<CatalogSource> = Api::all(client);
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
    let mut running: HashMap<CatalogKey, Running> = HashMap::new();
    let mut seen_in_relist: Option<Vec<CatalogKey>> = None;
    let mut synced = Some(synced);
    let mut pokes_open = true;
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => break,
            poke = pokes.recv(), if pokes_open => {
                match poke {
                    Some(key) => match running.get(&key) {
                        Some(r) => r.poke.notify_one(),
                        None => tracing::debug!(namespace = %key.0, catalog = %key.1, "catalog update for an unknown catalog; ignored"),
                    },
                    None => pokes_open = false,
                }
                continue;
            }
            e = events.next() => e,
        };
        let Some(event) = event else { break };
        let event = match event {
            Ok(e) => e,
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "catalogsource watch failed; retrying"
                );
                continue;
            }
        };
        match event {
            watcher::Event::Init => seen_in_relist = Some(Vec::new()),
            watcher::Event::InitApply(catalog) | watcher::Event::Apply(catalog) => {
                let key = (catalog.namespace().unwrap_or_default(), catalog.name_any());
                if let Some(seen) = &mut seen_in_relist {
                    seen.push(key.clone());
                }
                let wanted = target(&catalog);
                match running.get(&key) {
                    Some(r) => {
                        r.target.send_if_modified(|t| {
                            let changed = *t != wanted;
                            *t = wanted;
                            changed
                        });
                    }
                    None => {
                        let (tx, rx) = watch::channel(wanted);
                        let child = stop.child_token();
                        let poke = Arc::new(Notify::new());
                        tokio::spawn(refresher(
                            key.clone(),
                            rx,
                            Arc::clone(&poke),
                            Arc::clone(&store),
                            metrics.clone(),
                            settings.clone(),
                            child.clone(),
                        ));
                        running.insert(
                            key,
                            Running {
                                target: tx,
                                poke,
                                stop: child,
                            },
                        );
                    }
                }
            }
            watcher::Event::Delete(catalog) => {
                let key = (catalog.namespace().unwrap_or_default(), catalog.name_any());
                if let Some(r) = running.remove(&key) {
                    r.stop.cancel();
                }
                store.remove_catalog(&key);
            }
            watcher::Event::InitDone => {
                if let Some(seen) = seen_in_relist.take() {
                    let gone: Vec<CatalogKey> = running
                        .keys()
                        .filter(|k| !seen.contains(k))
                        .cloned()
                        .collect();
                    for key in gone {
                        if let Some(r) = running.remove(&key) {
                            r.stop.cancel();
                        }
                        store.remove_catalog(&key);
                    }
                }
                if let Some(synced) = synced.take() {
                    synced();
                }
            }
        }
    }
    for r in running.values() {
        r.stop.cancel();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use olm_api::catalog_source::{CatalogSourceSpec, CatalogSourceStatus, RegistryServiceStatus};
    use olm_registry::{CatalogIndex, IndexOptions, RegistryServer};
    use serde_json::json;
    use tokio::net::TcpListener;

    use super::*;

    /// Serves, on loopback, a catalog of one-bundle packages named
    /// `packages`; returns its address and the directory to keep alive.
    async fn serve_catalog_of(packages: &[&str]) -> (String, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for package in packages {
            let bundle = format!("{package}.v0.1.0");
            // A bundle without a CSV gives no channel head, and a package
            // without one is elided.
            let csv = json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "ClusterServiceVersion",
                "metadata": {"name": bundle},
                "spec": {"displayName": package, "version": "0.1.0"},
            });
            let csv =
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, csv.to_string());
            for doc in [
                json!({"schema": "olm.package", "name": package, "defaultChannel": "fast"}),
                json!({"schema": "olm.channel", "package": package, "name": "fast",
                       "entries": [{"name": bundle}]}),
                json!({"schema": "olm.bundle", "package": package, "name": bundle,
                "image": format!("registry.invalid/{package}-bundle:v0.1.0"),
                "properties": [
                    {"type": "olm.package",
                     "value": {"packageName": package, "version": "0.1.0"}},
                    {"type": "olm.bundle.object", "value": {"data": csv}},
                ]}),
            ] {
                text.push_str(&format!("{doc}\n"));
            }
        }
        std::fs::write(dir.path().join("index.json"), text).unwrap();
        let index = CatalogIndex::build(dir.path(), &IndexOptions::default()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(RegistryServer::new(index).serve(listener, std::future::pending()));
        (address, dir)
    }

    #[test]
    fn address_prefers_spec_then_registry_service() {
        let mut catalog = CatalogSource::new("widgets", CatalogSourceSpec::default());
        catalog.metadata.namespace = Some("team".into());
        assert_eq!(catalog.registry_address(), None);
        catalog.status = Some(CatalogSourceStatus {
            registry_service: Some(RegistryServiceStatus {
                service_name: Some("widgets".into()),
                service_namespace: Some("team".into()),
                port: Some("50051".into()),
                ..RegistryServiceStatus::default()
            }),
            ..CatalogSourceStatus::default()
        });
        assert_eq!(
            catalog.registry_address().as_deref(),
            Some("widgets.team.svc:50051")
        );
        catalog.spec.address = Some("10.1.2.3:50051".into());
        assert_eq!(
            catalog.registry_address().as_deref(),
            Some("10.1.2.3:50051")
        );
    }

    #[test]
    fn pokes_name_the_event_s_catalog() {
        let event = |namespace: &str, name: &str| CatalogUpdated {
            catalog: Some(olm_bus::events::ObjectRef {
                namespace: namespace.into(),
                name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            poke_of(&event("olm", "operatorhubio")),
            Some(("olm".to_owned(), "operatorhubio".to_owned()))
        );
        assert_eq!(poke_of(&event("", "x")), None);
        assert_eq!(poke_of(&event("olm", "")), None);
        assert_eq!(poke_of(&CatalogUpdated::default()), None);
    }

    #[tokio::test]
    async fn unreachable_catalog_fails_within_the_connect_timeout() {
        let target = Target {
            meta: CatalogMeta::default(),
            address: Some("127.0.0.1:1".into()),
            content_hint: String::new(),
        };
        let options = ClientOptions {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(2),
            ..ClientOptions::default()
        };
        let dns = AddressResolver::dns();
        assert!(matches!(
            fetch(&target, options, &dns).await,
            Err(RefreshError::Registry { .. })
        ));
        let none = Target {
            address: None,
            ..target
        };
        assert!(matches!(
            fetch(&none, options, &dns).await,
            Err(RefreshError::NoAddress)
        ));
    }

    #[tokio::test]
    async fn catalogs_over_the_package_limit_are_refused() {
        let (address, _dir) = serve_catalog_of(&["alpha-op", "beta-op", "gamma-op"]).await;
        let target = Target {
            meta: CatalogMeta::default(),
            address: Some(address),
            content_hint: String::new(),
        };
        for (limit, expect_refused) in [(2, true), (3, false)] {
            let fetched = fetch_at_most(
                &target,
                ClientOptions::default(),
                &AddressResolver::dns(),
                limit,
            )
            .await;
            match fetched {
                Err(error @ RefreshError::TooManyPackages { .. }) if expect_refused => {
                    assert!(
                        matches!(error, RefreshError::TooManyPackages { limit: l } if l == limit)
                    );
                    assert_eq!(
                        error.to_string(),
                        format!("catalog lists more than {limit} packages")
                    );
                }
                Ok(packages) if !expect_refused => assert_eq!(packages.len(), 3),
                other => panic!("limit {limit}: unexpected {other:?}"),
            }
        }
        assert_eq!(
            RefreshError::TooManyPackages {
                limit: MAX_PACKAGES_PER_CATALOG
            }
            .to_string(),
            "catalog lists more than 50000 packages"
        );
    }
}
