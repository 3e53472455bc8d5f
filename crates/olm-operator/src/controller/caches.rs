//! The reflectors olm-operator reads from: one watch per kind, a store the
//! reconcilers read, a readiness gate set on the first complete list, and a
//! hook that turns every change into reconcile requests of the objects that
//! care about it.

use std::fmt::Debug;

use futures::StreamExt;
use kube::{
    Api, Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, Store},
        watcher,
    },
};
use olm_runtime::admin::ReadinessGate;
use serde::de::DeserializeOwned;

/// A reflector that is built but not yet running.
pub(crate) struct Reflector<K: Resource<DynamicType = ()> + 'static> {
    /// The store it fills.
    pub(crate) store: Store<K>,
    /// Runs the watch until the future is dropped.
    pub(crate) task: futures::future::BoxFuture<'static, ()>,
}

/// Builds a reflector over `api` (with `config`, for label selectors) whose
/// first complete list sets `gate` and whose every later change (apply or
/// delete) is handed to `on_change`.
pub(crate) fn reflect<K, F>(
    api: Api<K>,
    config: watcher::Config,
    gate: ReadinessGate,
    on_change: F,
) -> Reflector<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    F: Fn(&K) + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    let kind = K::kind(&()).into_owned();
    let task = async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) => {
                    on_change(&object);
                }
                Ok(watcher::Event::InitDone) => {
                    tracing::debug!(kind, "cache warm");
                    gate.set();
                }
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                Err(error) => tracing::warn!(
                    kind,
                    error = &error as &dyn std::error::Error,
                    "watch failed; retrying with backoff"
                ),
            }
        }
    };
    Reflector {
        store,
        task: Box::pin(task),
    }
}
