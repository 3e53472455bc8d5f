//! The Greeting controller: watch Greetings, compute their status with
//! [`crate::status::desired_status`], write it with server-side apply when it
//! differs, and record an event when Ready changes.

use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{FutureExt, StreamExt, future};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{
        Controller,
        controller::Action,
        events::{Event, EventType, Recorder, Reporter},
        reflector::ObjectRef,
        watcher,
    },
};
use serde_json::json;

use crate::{
    Error,
    greeting::Greeting,
    health::Readiness,
    settings::WatchNamespaces,
    status::{self, desired_status, is_up_to_date, ready_condition},
};

/// The field manager of every status this operator writes, and the
/// reporting controller of its events.
pub const FIELD_MANAGER: &str = "example-operator";
/// The first retry after a failed reconcile.
const RETRY_FIRST: Duration = Duration::from_millis(500);
/// The longest wait between retries of a Greeting that keeps failing.
const RETRY_MAX: Duration = Duration::from_secs(300);

/// What every reconcile shares.
struct Context {
    client: Client,
    version: String,
    recorder: Recorder,
    /// Consecutive failures per Greeting, for the retry backoff; a success
    /// forgets the Greeting.
    failures: Mutex<HashMap<ObjectRef<Greeting>, u32>>,
}

/// Runs the controller over the Greetings of `namespaces` until `shutdown`
/// completes, then lets running reconciles finish and returns. Marks
/// `readiness` once every watch has listed its Greetings.
///
/// Each namespace gets a watch (and cache) of its own, so the operator needs
/// only namespaced permissions unless it watches all namespaces.
pub async fn run(
    client: Client,
    namespaces: &WatchNamespaces,
    version: &str,
    readiness: Readiness,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let shutdown = shutdown.boxed().shared();
    let apis: Vec<Api<Greeting>> = match namespaces {
        WatchNamespaces::All => vec![Api::all(client.clone())],
        WatchNamespaces::Only(names) => names
            .iter()
            .map(|namespace| Api::namespaced(client.clone(), namespace))
            .collect(),
    };
    let context = Arc::new(Context {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: FIELD_MANAGER.to_owned(),
                instance: None,
            },
        ),
        client,
        version: version.to_owned(),
        failures: Mutex::default(),
    });
    tracing::info!(%namespaces, version, "starting the greeting controller");

    let controllers: Vec<Controller<Greeting>> = apis
        .into_iter()
        .map(|api| {
            Controller::new(api, watcher::Config::default()).graceful_shutdown_on(shutdown.clone())
        })
        .collect();
    let stores: Vec<_> = controllers.iter().map(Controller::store).collect();
    let warm = async move {
        // A store whose watch ended before its first list never becomes
        // ready; that only happens on shutdown, when readiness is moot.
        let listed = future::join_all(stores.iter().map(|store| store.wait_until_ready())).await;
        if listed.iter().all(Result::is_ok) {
            readiness.set_ready();
            tracing::info!("every watch has listed its greetings; ready");
        }
    };
    let running = future::join_all(controllers.into_iter().map(|controller| {
        controller
            .run(reconcile, error_policy, context.clone())
            .for_each(|result| async move {
                match result {
                    Ok((greeting, _)) => tracing::debug!(%greeting, "reconciled"),
                    Err(error) => tracing::warn!(error = %error_chain(&error), "reconcile failed"),
                }
            })
    }));
    future::join(warm, running).await;
    tracing::info!("greeting controller stopped");
}

/// Brings one Greeting's status in line with its spec.
async fn reconcile(greeting: Arc<Greeting>, context: Arc<Context>) -> Result<Action, Error> {
    let action = write_status(&greeting, &context).await?;
    forget_failures(&context, &greeting);
    Ok(action)
}

/// Writes the status [`desired_status`] asks for, unless it is already there.
async fn write_status(greeting: &Greeting, context: &Context) -> Result<Action, Error> {
    let name = greeting.name_any();
    let namespace = greeting
        .namespace()
        .ok_or_else(|| Error::MissingNamespace { name: name.clone() })?;
    let previous = greeting.status.as_ref();
    // Whole seconds: the API server keeps condition times to the second.
    let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH);
    let desired = desired_status(
        &greeting.spec,
        greeting.metadata.generation,
        &context.version,
        previous,
        now,
    );
    if is_up_to_date(previous, &desired) {
        return Ok(Action::await_change());
    }

    let api: Api<Greeting> = Api::namespaced(context.client.clone(), &namespace);
    let apply = json!({
        "apiVersion": Greeting::api_version(&()),
        "kind": Greeting::kind(&()),
        "status": desired,
    });
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&apply),
    )
    .await
    .map_err(|source| Error::WriteStatus {
        namespace: namespace.clone(),
        name: name.clone(),
        source,
    })?;
    tracing::info!(
        greeting = %format!("{namespace}/{name}"),
        says = desired.message.as_deref().unwrap_or_default(),
        generation = desired.observed_generation,
        "status written"
    );

    let was = previous
        .and_then(ready_condition)
        .map(|ready| &ready.status);
    if let Some(ready) = ready_condition(&desired)
        && was != Some(&ready.status)
    {
        publish_transition(context, greeting, ready).await;
    }
    Ok(Action::await_change())
}

/// Records an event saying what Ready became. An event that cannot be
/// written is logged and dropped: it must not fail the reconcile that
/// already wrote the status.
async fn publish_transition(
    context: &Context,
    greeting: &Greeting,
    ready: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition,
) {
    let event = Event {
        type_: if ready.status == status::TRUE {
            EventType::Normal
        } else {
            EventType::Warning
        },
        reason: ready.reason.clone(),
        note: Some(ready.message.clone()),
        action: "UpdateStatus".to_owned(),
        secondary: None,
    };
    let reference = greeting.object_ref(&());
    if let Err(error) = context.recorder.publish(&event, &reference).await {
        tracing::warn!(
            greeting = %greeting.name_any(),
            error = %error_chain(&error),
            "cannot record an event"
        );
    }
}

/// Retries a failed Greeting after a delay that doubles with each
/// consecutive failure, from [`RETRY_FIRST`] up to [`RETRY_MAX`].
fn error_policy(greeting: Arc<Greeting>, error: &Error, context: Arc<Context>) -> Action {
    let failures = {
        let mut failures = context
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(ObjectRef::from_obj(&*greeting)).or_insert(0);
        *count = count.saturating_add(1);
        *count
    };
    let delay = retry_delay(failures);
    tracing::warn!(
        greeting = %greeting.name_any(),
        category = error.category(),
        error = %error_chain(error),
        failures,
        retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        "reconcile failed; retrying"
    );
    Action::requeue(delay)
}

fn forget_failures(context: &Context, greeting: &Greeting) {
    context
        .failures
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&ObjectRef::from_obj(greeting));
}

/// The wait before retry number `failures` (1 for the first).
fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    RETRY_FIRST.saturating_mul(1 << doublings).min(RETRY_MAX)
}

/// `error` and its causes, joined with `: `.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut chain = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        chain.push_str(": ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_up_to_a_cap() {
        let delays: Vec<Duration> = [1, 2, 3, 4, 10, 11, 100, u32::MAX]
            .into_iter()
            .map(retry_delay)
            .collect();
        assert_eq!(
            delays,
            [
                Duration::from_millis(500),
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(4),
                Duration::from_secs(256),
                RETRY_MAX,
                RETRY_MAX,
                RETRY_MAX,
            ]
        );
    }
}
