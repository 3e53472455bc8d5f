//! The operator against a real kube-apiserver (olm-testkit's control plane):
//! the Greeting CRD is applied from the bundle, the controller runs
//! in-process watching throwaway namespaces, and the tests assert on the
//! Greetings' status as a user would read it.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{
    future::Future,
    io::Read,
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use example_operator::{
    Greeting, GreetingStatus, Readiness, WatchNamespaces,
    greeting::CRD_NAME,
    settings::{OPERATOR_VERSION_ENV, PROBE_ADDRESS_ENV, WATCH_NAMESPACE_ENV},
    status::{TRUE, ready_condition, reason},
};
use k8s_openapi::{
    api::events::v1::Event,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::Condition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::{OnceCell, oneshot},
    task::JoinHandle,
};

/// How long the operator may take to answer a change.
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);
/// How long the operator may take to stop once asked.
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// How long a Greeting nobody should touch is watched for a status.
const UNTOUCHED_GRACE: Duration = Duration::from_secs(2);

/// Applies the Greeting CRD from the newest bundle, as OLM would, once per
/// test binary, and waits until it is Established.
async fn crd_installed() {
    static INSTALLED: OnceCell<()> = OnceCell::const_new();
    INSTALLED
        .get_or_init(|| async {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
                "../bundles/example-operator/0.3.0/manifests/example.olm-rs.dev_greetings.yaml",
            );
            let crd: CustomResourceDefinition =
                serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let plane = olm_testkit::control_plane();
            Api::<CustomResourceDefinition>::all(plane.client().await)
                .patch(
                    CRD_NAME,
                    &PatchParams::apply("example-operator-tests").force(),
                    &Patch::Apply(&crd),
                )
                .await
                .unwrap();
            tokio::task::spawn_blocking(|| plane.wait_crd_established(CRD_NAME))
                .await
                .unwrap();
        })
        .await;
}

/// The controller running in this test; stopped by [`RunningOperator::stop`]
/// or, if the test fails first, when dropped.
struct RunningOperator {
    readiness: Readiness,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl RunningOperator {
    /// Starts the controller as version `version`, watching `namespaces`,
    /// and waits until its caches are warm.
    async fn start(client: Client, namespaces: &[&str], version: &str) -> RunningOperator {
        let namespaces = WatchNamespaces::parse(&namespaces.join(","));
        let readiness = Readiness::default();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn({
            let readiness = readiness.clone();
            let version = version.to_owned();
            async move {
                example_operator::run(client, &namespaces, &version, readiness, async {
                    let _ = stopped.await;
                })
                .await;
            }
        });
        let operator = RunningOperator {
            readiness,
            stop: Some(stop),
            task: Some(task),
        };
        eventually("the operator's caches warm", || async {
            operator
                .readiness
                .is_ready()
                .then_some(())
                .ok_or_else(|| "not ready".to_owned())
        })
        .await;
        operator
    }

    /// Asks the controller to stop, as SIGTERM does, and waits until it has.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().unwrap();
        tokio::time::timeout(STOP_DEADLINE, task)
            .await
            .unwrap_or_else(|_| panic!("the operator did not stop within {STOP_DEADLINE:?}"))
            .unwrap();
    }
}

impl Drop for RunningOperator {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Polls `check` until it returns `Ok`, failing the test with its last error
/// after [`ANSWER_DEADLINE`].
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = tokio::time::Instant::now();
    let mut last = String::from("not checked yet");
    while started.elapsed() < ANSWER_DEADLINE {
        match check().await {
            Ok(value) => return value,
            Err(error) => last = error,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not within {ANSWER_DEADLINE:?}; last: {last}");
}

/// A Greeting named `name` in `namespace` for `whom`.
fn greeting_for(namespace: &str, name: &str, whom: &str) -> Greeting {
    serde_json::from_value(json!({
        "apiVersion": "example.olm-rs.dev/v1",
        "kind": "Greeting",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"name": whom},
    }))
    .unwrap()
}

/// Waits until the Greeting's status says `message` for generation
/// `generation`, by version `version`, and returns it.
async fn wait_for_status(
    greetings: &Api<Greeting>,
    name: &str,
    message: Option<&str>,
    generation: i64,
    version: &str,
) -> (Greeting, GreetingStatus) {
    eventually(
        &format!("greeting {name} says {message:?} for generation {generation}"),
        || async {
            let greeting = greetings.get(name).await.map_err(|e| e.to_string())?;
            let status = greeting.status.clone().unwrap_or_default();
            let ready_generation = ready_condition(&status).and_then(|c| c.observed_generation);
            let current = status.message.as_deref() == message
                && status.observed_generation == Some(generation)
                && ready_generation == Some(generation)
                && status.operator_version.as_deref() == Some(version);
            if current {
                Ok((greeting, status))
            } else {
                Err(format!("status {status:?}"))
            }
        },
    )
    .await
}

fn ready(status: &GreetingStatus) -> Condition {
    ready_condition(status).cloned().unwrap()
}

#[tokio::test]
async fn a_greeting_is_greeted_and_its_status_follows_the_spec() {
    crd_installed().await;
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("greet-follow").await;
    let namespace = namespace.name().to_owned();
    let client = plane.client().await;
    let greetings: Api<Greeting> = Api::namespaced(client.clone(), &namespace);
    let operator = RunningOperator::start(client.clone(), &[&namespace], "0.2.0-test").await;

    greetings
        .create(
            &PostParams::default(),
            &greeting_for(&namespace, "salute", "Ada"),
        )
        .await
        .unwrap();
    let (_, first) =
        wait_for_status(&greetings, "salute", Some("Hello, Ada!"), 1, "0.2.0-test").await;
    let greeted = ready(&first);
    assert_eq!(
        (greeted.status.as_str(), greeted.reason.as_str()),
        (TRUE, reason::GREETED)
    );

    let change = json!({"spec": {"name": "Grace", "excited": true}});
    greetings
        .patch("salute", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    let (_, second) = wait_for_status(
        &greetings,
        "salute",
        Some("Hello, Grace!!!"),
        2,
        "0.2.0-test",
    )
    .await;
    assert_eq!(
        ready(&second).last_transition_time,
        greeted.last_transition_time,
        "Ready stayed True, so its transition time must not move"
    );

    // A blank name passes the schema's minLength but greets no one.
    let blank = json!({"spec": {"name": "  "}});
    greetings
        .patch("salute", &PatchParams::default(), &Patch::Merge(&blank))
        .await
        .unwrap();
    let (_, third) = wait_for_status(&greetings, "salute", None, 3, "0.2.0-test").await;
    let refused = ready(&third);
    assert_eq!(
        (refused.status.as_str(), refused.reason.as_str()),
        ("False", reason::NAME_MISSING)
    );

    // Each Ready transition left an event on the Greeting.
    let events: Api<Event> = Api::namespaced(client, &namespace);
    let reasons = eventually("events for both transitions", || async {
        let mut reasons: Vec<(String, String)> = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|event| {
                event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("salute")
            })
            .map(|event| {
                (
                    event.type_.unwrap_or_default(),
                    event.reason.unwrap_or_default(),
                )
            })
            .collect();
        reasons.sort();
        if reasons.len() >= 2 {
            Ok(reasons)
        } else {
            Err(format!("events {reasons:?}"))
        }
    })
    .await;
    assert_eq!(
        reasons,
        [
            ("Normal".to_owned(), reason::GREETED.to_owned()),
            ("Warning".to_owned(), reason::NAME_MISSING.to_owned()),
        ]
    );

    operator.stop().await;
}

#[tokio::test]
async fn greetings_outside_the_watched_namespaces_are_left_alone() {
    crd_installed().await;
    let plane = olm_testkit::control_plane();
    let watched = plane.namespace("greet-watched").await;
    let elsewhere = plane.namespace("greet-elsewhere").await;
    let (watched, elsewhere) = (watched.name().to_owned(), elsewhere.name().to_owned());
    let client = plane.client().await;
    let operator = RunningOperator::start(client.clone(), &[&watched], "0.2.0-test").await;

    let unwatched: Api<Greeting> = Api::namespaced(client.clone(), &elsewhere);
    unwatched
        .create(
            &PostParams::default(),
            &greeting_for(&elsewhere, "ignored", "Bob"),
        )
        .await
        .unwrap();
    let greetings: Api<Greeting> = Api::namespaced(client.clone(), &watched);
    greetings
        .create(
            &PostParams::default(),
            &greeting_for(&watched, "salute", "Ada"),
        )
        .await
        .unwrap();
    wait_for_status(&greetings, "salute", Some("Hello, Ada!"), 1, "0.2.0-test").await;

    tokio::time::sleep(UNTOUCHED_GRACE).await;
    let ignored = unwatched.get("ignored").await.unwrap();
    assert_eq!(
        ignored.status, None,
        "a Greeting outside WATCH_NAMESPACE was touched"
    );
    operator.stop().await;
}

#[tokio::test]
async fn an_upgraded_operator_rewrites_the_version_and_an_unchanged_one_writes_nothing() {
    crd_installed().await;
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("greet-upgrade").await;
    let namespace = namespace.name().to_owned();
    let client = plane.client().await;
    let greetings: Api<Greeting> = Api::namespaced(client.clone(), &namespace);

    let old = RunningOperator::start(client.clone(), &[&namespace], "0.1.0").await;
    greetings
        .create(
            &PostParams::default(),
            &greeting_for(&namespace, "salute", "Ada"),
        )
        .await
        .unwrap();
    let (_, before) = wait_for_status(&greetings, "salute", Some("Hello, Ada!"), 1, "0.1.0").await;
    old.stop().await;

    // The same version again finds every status up to date and writes
    // nothing: the Greeting's resourceVersion does not move.
    let written = greetings.get("salute").await.unwrap().resource_version();
    let same = RunningOperator::start(client.clone(), &[&namespace], "0.1.0").await;
    tokio::time::sleep(UNTOUCHED_GRACE).await;
    assert_eq!(
        greetings.get("salute").await.unwrap().resource_version(),
        written
    );
    same.stop().await;

    let new = RunningOperator::start(client.clone(), &[&namespace], "0.2.0").await;
    let (_, after) = wait_for_status(&greetings, "salute", Some("Hello, Ada!"), 1, "0.2.0").await;
    assert_eq!(
        ready(&after).last_transition_time,
        ready(&before).last_transition_time
    );
    new.stop().await;
}

#[tokio::test]
async fn the_schema_refuses_a_greeting_without_a_name() {
    crd_installed().await;
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("greet-schema").await;
    let namespace = namespace.name().to_owned();
    let greetings: Api<Greeting> = Api::namespaced(plane.client().await, &namespace);
    let refused = greetings
        .create(
            &PostParams::default(),
            &greeting_for(&namespace, "nobody", ""),
        )
        .await;
    match refused {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 422, "{status:?}"),
        other => panic!("an empty spec.name was not refused: {other:?}"),
    }
}

/// The operator's process; killed if the test ends before stopping it.
struct OperatorProcess(Child);

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback address nothing listens on (it is released again, and
/// nothing else on this machine binds ephemeral ports on purpose).
fn free_loopback_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// The status line of a plain HTTP/1.1 GET of `path`, as a kubelet probe
/// sees it.
async fn probe(address: SocketAddr, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(address)
        .await
        .map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .map_err(|e| e.to_string())?;
    Ok(response.lines().next().unwrap_or_default().to_owned())
}

/// The binary as the Deployment runs it: configured by environment only,
/// ready once its caches are warm, greeting, logging JSON lines to stderr,
/// and exiting 0 on SIGTERM.
#[tokio::test]
async fn the_binary_greets_logs_json_lines_and_exits_cleanly_on_sigterm() {
    crd_installed().await;
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("greet-binary").await;
    let namespace = namespace.name().to_owned();
    let probes = free_loopback_address();
    let mut operator = OperatorProcess(
        Command::new(env!("CARGO_BIN_EXE_example-operator"))
            .env("KUBECONFIG", plane.kubeconfig_path())
            .env(WATCH_NAMESPACE_ENV, &namespace)
            .env(OPERATOR_VERSION_ENV, "0.3.0-binary")
            .env(PROBE_ADDRESS_ENV, probes.to_string())
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = operator.0.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut logs = String::new();
        let _ = stderr.read_to_string(&mut logs);
        logs
    });

    eventually("the binary answers /readyz", || async {
        match probe(probes, "/readyz").await? {
            line if line == "HTTP/1.1 200 OK" => Ok(()),
            line => Err(line),
        }
    })
    .await;
    assert_eq!(probe(probes, "/healthz").await.unwrap(), "HTTP/1.1 200 OK");

    let greetings: Api<Greeting> = Api::namespaced(plane.client().await, &namespace);
    greetings
        .create(
            &PostParams::default(),
            &greeting_for(&namespace, "salute", "Ada"),
        )
        .await
        .unwrap();
    wait_for_status(&greetings, "salute", Some("Hello, Ada!"), 1, "0.3.0-binary").await;

    let pid = operator.0.id().to_string();
    let signalled = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(signalled.success(), "kill -TERM {pid} failed");
    let exit = eventually("the binary exits after SIGTERM", || {
        let exited = operator.0.try_wait();
        async move {
            exited
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "still running".to_owned())
        }
    })
    .await;
    let logs = logs.join().unwrap();
    assert!(exit.success(), "exit {exit:?}; logs:\n{logs}");

    let lines: Vec<serde_json::Value> = logs
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
        })
        .collect();
    for message in [
        "status written",
        "SIGTERM received; shutting down",
        "stopped",
    ] {
        assert!(
            lines
                .iter()
                .any(|line| line["fields"]["message"] == message),
            "no log line {message:?} in:\n{logs}"
        );
    }
}
