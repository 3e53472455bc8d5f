//! One registry gRPC connection per catalog, kept between reconciles and
//! re-made when the catalog's address changes or the registry stops
//! answering. Other parts of the service (resolution) take their clients
//! from here.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use olm_api::catalog_source::ConnectivityState;
use olm_registry::{ClientOptions, RegistryClient};

/// What a probe of a registry found.
#[derive(Debug, Clone)]
pub struct Probe {
    /// gRPC connectivity in upstream's words (`READY`, `TRANSIENT_FAILURE`).
    pub state: ConnectivityState,
    /// Why it is not READY.
    pub error: Option<String>,
}

#[derive(Clone)]
struct Entry {
    address: String,
    client: RegistryClient,
}

/// The registry connections of every catalog, keyed by namespace and name.
#[derive(Clone, Default)]
pub struct Connections {
    entries: Arc<Mutex<HashMap<(String, String), Entry>>>,
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
    /// the address is unchanged, connects otherwise, and asks the gRPC health
    /// service. A failure drops the connection so the next probe reconnects.
    pub async fn probe(
        &self,
        namespace: &str,
        name: &str,
        address: &str,
        timeout: Duration,
    ) -> Probe {
        let key = (namespace.to_owned(), name.to_owned());
        let existing = self.get(&key).filter(|e| e.address == address);
        let client = match existing {
            Some(entry) => entry.client,
            None => {
                let options = ClientOptions {
                    connect_timeout: timeout,
                    request_timeout: timeout,
                    ..ClientOptions::default()
                };
                match RegistryClient::connect(&endpoint(address), options).await {
                    Ok(client) => client,
                    Err(error) => {
                        self.forget(namespace, name);
                        return Probe {
                            state: ConnectivityState::TRANSIENT_FAILURE,
                            error: Some(olm_runtime::events::error_chain(&error)),
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
                            client,
                        },
                    );
                Probe {
                    state: ConnectivityState::READY,
                    error: None,
                }
            }
            Ok(false) => {
                self.forget(namespace, name);
                Probe {
                    state: ConnectivityState::CONNECTING,
                    error: Some("the registry reports it is not serving yet".to_owned()),
                }
            }
            Err(error) => {
                self.forget(namespace, name);
                Probe {
                    state: ConnectivityState::TRANSIENT_FAILURE,
                    error: Some(olm_runtime::events::error_chain(&error)),
                }
            }
        }
    }
}
