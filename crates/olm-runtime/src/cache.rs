//! Reflector caches for controllers: one watch per kind, a store the
//! reconcilers read, a readiness gate set on the first complete list, and a
//! hook that turns every change into reconcile requests of the objects that
//! care about it.

use std::fmt::Debug;

use crate::admin::ReadinessGate;
use futures::StreamExt;
use kube::{
    Api, Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;

/// A reflector that is built but not yet running.
pub struct Reflector<K: Resource<DynamicType = ()> + 'static> {
    /// The store it fills.
    pub store: Store<K>,
    /// Runs the watch until the future is dropped.
    pub task: futures::future::BoxFuture<'static, ()>,
}

/// Whether a watched object was created or changed, or deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Created or changed.
    Applied,
    /// Deleted.
    Deleted,
}

/// A watch hook that wakes one reconcile loop on any change, for a
/// controller that reconciles everything at once (one object to keep).
pub fn wake_on_change<K>(
    changed: &std::sync::Arc<tokio::sync::Notify>,
) -> impl Fn(&K, Change) + Send + Sync + 'static {
    let changed = changed.clone();
    move |_, _| changed.notify_one()
}

/// Drops what no reconcile reads and every object carries: the managed
/// fields, often the largest part of an object's metadata.
pub fn strip_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Builds a reflector over `api` (with `config`, for label selectors) whose
/// first complete list sets `gate` and whose every later change (apply or
/// delete) is handed to `on_change`. Managed fields are dropped before the
/// store keeps an object.
pub fn reflect<K, F>(
    api: Api<K>,
    config: watcher::Config,
    gate: ReadinessGate,
    on_change: F,
) -> Reflector<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    F: Fn(&K, Change) + Send + Sync + 'static,
{
    reflect_stream(
        watcher(api, config)
            .default_backoff()
            .modify(strip_managed_fields),
        gate,
        on_change,
    )
}

/// As [`reflect`], over any watch stream (a metadata-only watch, or one
/// whose objects are trimmed before they are stored).
pub fn reflect_stream<K, S, F>(stream: S, gate: ReadinessGate, on_change: F) -> Reflector<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    F: Fn(&K, Change) + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(writer, stream);
    let kind = K::kind(&()).into_owned();
    let task = async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(object)) => on_change(&object, Change::Applied),
                Ok(watcher::Event::Delete(object)) => on_change(&object, Change::Deleted),
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
