//! One registry gRPC connection per catalog, kept between reconciles and
//! re-made when the catalog's address changes or the registry stops
//! answering. Other parts of the service (resolution) take their clients
//! from here. The address dialled is the catalog's, or the ClusterIP standing
//! for its Service under `--service-lookup cluster-ip`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use olm_api::catalog_source::ConnectivityState;
use olm_registry::{ClientOptions, RegistryClient};
use olm_runtime::service_address::AddressResolver;

/// What a probe of a registry found.
#[derive(Debug, Clone)]
pub struct Probe {
    /// gRPC connectivity in upstream's words (`READY`, `TRANSIENT_FAILURE`).
    pub state: ConnectivityState,
    /// Why it is not READY.
    pub error: Option<String>,
    /// The address the probe dialled: the catalog's address, or the
    /// ClusterIP standing for its Service; `None` when that could not be
    /// worked out.
    pub dialled: Option<String>,
}

#[derive(Clone)]
struct Entry {
    /// The catalog's address, as status reports it.
    address: String,
    /// What was dialled for it.
    dialled: String,
    client: RegistryClient,
}

/// The registry connections of every catalog, keyed by namespace and name.
#[derive(Clone, Default)]
pub struct Connections {
    entries: Arc<Mutex<HashMap<(String, String), Entry>>>,
    resolver: AddressResolver,
}

/// `host:port` as a gRPC endpoint URI.
fn endpoint(address: &str) -> String {
    if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    }
}

impl Connections {
    /// No connections yet; catalogs' addresses will be dialled as
    /// `resolver` says (the default dials them as given).
    pub fn new(resolver: AddressResolver) -> Self {
        Self {
            entries: Arc::default(),
            resolver,
        }
    }

    fn get(&self, key: &(String, String)) -> Option<Entry> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// A connected client of the catalog, if its last probe succeeded.
    pub fn client(&self, namespace: &str, name: &str) -> Option<RegistryClient> {
        self.get(&(namespace.to_owned(), name.to_owned()))
            .map(|e| e.client)
    }

    /// Drops the catalog's connection (the catalog is gone or changed).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// Checks the catalog's registry at `address`: reuses the connection when
    /// the address is unchanged, connects otherwise (to the address the
    /// resolver gives for it), and asks the gRPC health service. A failure
    /// drops the connection so the next probe reconnects, looking the
    /// Service up again.
    pub async fn probe(
        &self,
        namespace: &str,
        name: &str,
        address: &str,
        timeout: Duration,
    ) -> Probe {
        let key = (namespace.to_owned(), name.to_owned());
        let existing = self.get(&key).filter(|e| e.address == address);
        let (client, dialled) = match existing {
            Some(entry) => (entry.client, entry.dialled),
            None => {
                let dialled = match self.resolver.resolve(address).await {
                    Ok(dialled) => dialled,
                    Err(error) => {
                        self.forget(namespace, name);
                        return Probe {
                            state: ConnectivityState::TRANSIENT_FAILURE,
                            error: Some(olm_runtime::events::error_chain(&error)),
                            dialled: None,
                        };
                    }
                };
                let options = ClientOptions {
                    connect_timeout: timeout,
                    request_timeout: timeout,
                    ..ClientOptions::default()
                };
                match RegistryClient::connect(&endpoint(&dialled), options).await {
                    Ok(client) => (client, dialled),
                    Err(error) => {
                        self.forget(namespace, name);
                        return Probe {
                            state: ConnectivityState::TRANSIENT_FAILURE,
                            error: Some(olm_runtime::events::error_chain(&error)),
                            dialled: Some(dialled),
                        };
                    }
                }
            }
        };
        match client.health_check("").await {
            Ok(true) => {
                self.entries
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(
                        key,
                        Entry {
                            address: address.to_owned(),
                            dialled: dialled.clone(),
                            client,
                        },
                    );
                Probe {
                    state: ConnectivityState::READY,
                    error: None,
                    dialled: Some(dialled),
                }
            }
            Ok(false) => {
                self.forget(namespace, name);
                Probe {
                    state: ConnectivityState::CONNECTING,
                    error: Some("the registry reports it is not serving yet".to_owned()),
                    dialled: Some(dialled),
                }
            }
            Err(error) => {
                self.forget(namespace, name);
                Probe {
                    state: ConnectivityState::TRANSIENT_FAILURE,
                    error: Some(olm_runtime::events::error_chain(&error)),
                    dialled: Some(dialled),
                }
            }
        }
    }
}
