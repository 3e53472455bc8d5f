//! `olm-operator bus-credentials`, the real binary against a real API server
//! (olm-testkit): it creates every service's seed Secret and the server's
//! `auth.conf`, keeps them on a rerun, repairs a corrupted seed, adopts an
//! owner, agrees with a second run started at the same time, and works with
//! exactly the permissions its module documents.

// A test binary: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{
    collections::BTreeMap,
    path::Path,
    process::{Output, Stdio},
    time::Duration,
};

use k8s_openapi::{
    ByteString,
    api::{
        core::v1::{Secret, ServiceAccount},
        rbac::v1::{Role, RoleBinding},
    },
};
use kube::{Api, Client, api::PostParams};
use olm_bus::auth::{self, SERVICES};
use serde_json::json;

/// The prefix the chart uses, and the binary's default.
const DEFAULT_PREFIX: &str = "olm-bus";
/// The ServiceAccount the Secrets are given to in these tests.
const OWNER: &str = "sample-installer";
/// How long a new Role may take to be enforced.
const RBAC_DEADLINE: Duration = Duration::from_secs(30);
/// Every service with a bus identity.
fn services() -> Vec<&'static str> {
    SERVICES.iter().map(|p| p.service).collect()
}

/// Runs `olm-operator bus-credentials` on `namespace` with `kubeconfig` and
/// `args`, with nothing taken from this process's environment.
async fn bus_credentials(kubeconfig: &Path, namespace: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_olm-operator"))
        .arg("bus-credentials")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", namespace])
        .args(args)
        .env_clear()
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

/// The `secret/<name> <outcome>` lines of a successful run, by name; fails
/// if the run failed or printed a seed in `seeds`.
fn outcomes(output: &Output, seeds: &[String]) -> BTreeMap<String, String> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "bus-credentials failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert_no_seed(output, seeds);
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("secret/"))
        .map(|line| {
            let (name, outcome) = line.split_once(' ').unwrap();
            (name.to_owned(), outcome.to_owned())
        })
        .collect()
}

fn assert_no_seed(output: &Output, seeds: &[String]) {
    let all = [output.stdout.as_slice(), output.stderr.as_slice()].concat();
    let all = String::from_utf8_lossy(&all);
    for seed in seeds {
        assert!(!all.contains(seed.as_str()), "a seed was printed:\n{all}");
    }
}

/// `outcome` for every service's Secret and `server` for the server's.
fn expect(prefix: &str, outcome: &str, server: &str) -> BTreeMap<String, String> {
    services()
        .into_iter()
        .map(|service| (format!("{prefix}-{service}"), outcome.to_owned()))
        .chain([(format!("{prefix}-server"), server.to_owned())])
        .collect()
}

/// The Secrets as stored: each service's seed (in [`SERVICES`] order) and
/// the server's Secret.
struct Stored {
    seeds: Vec<String>,
    service_secrets: Vec<Secret>,
    server: Secret,
}

impl Stored {
    async fn read(secrets: &Api<Secret>, prefix: &str) -> Stored {
        let mut seeds = Vec::new();
        let mut service_secrets = Vec::new();
        for service in services() {
            let secret = secrets.get(&format!("{prefix}-{service}")).await.unwrap();
            let seed = &secret.data.as_ref().unwrap()["seed"].0;
            seeds.push(String::from_utf8(seed.clone()).unwrap());
            service_secrets.push(secret);
        }
        let server = secrets.get(&format!("{prefix}-server")).await.unwrap();
        Stored {
            seeds,
            service_secrets,
            server,
        }
    }

    /// The server's `auth.conf` as stored.
    fn auth_conf(&self) -> String {
        String::from_utf8(self.server.data.as_ref().unwrap()["auth.conf"].0.clone()).unwrap()
    }

    /// What `auth.conf` must be for the stored seeds.
    fn expected_auth_conf(&self) -> String {
        let publics: Vec<String> = self
            .seeds
            .iter()
            .map(|seed| auth::public_key_of(seed).expect("a valid user seed"))
            .collect();
        let pairs: Vec<(&str, &str)> = services()
            .into_iter()
            .zip(publics.iter().map(String::as_str))
            .collect();
        auth::server_authorization(&pairs).unwrap()
    }

    fn all(&self) -> impl Iterator<Item = &Secret> {
        self.service_secrets.iter().chain([&self.server])
    }
}

async fn create_service_account(client: &Client, namespace: &str, name: &str) -> ServiceAccount {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account = serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap()
}

/// Puts `seed` in `name` as a person or a broken tool might.
async fn overwrite_seed(secrets: &Api<Secret>, name: &str, seed: &[u8]) {
    let mut secret = secrets.get(name).await.unwrap();
    secret
        .data
        .as_mut()
        .unwrap()
        .insert("seed".to_owned(), ByteString(seed.to_vec()));
    secrets
        .replace(name, &PostParams::default(), &secret)
        .await
        .unwrap();
}

#[tokio::test]
async fn reruns_keep_seeds_repair_a_corrupted_one_and_adopt_an_owner() {
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("bus-credentials").await;
    let client = plane.client().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns.name());
    let kubeconfig = plane.kubeconfig_path();

    // First run: everything is created, and auth.conf admits the seeds.
    let first = bus_credentials(kubeconfig, ns.name(), &[]).await;
    let created = Stored::read(&secrets, DEFAULT_PREFIX).await;
    assert_eq!(
        outcomes(&first, &created.seeds),
        expect(DEFAULT_PREFIX, "created", "created")
    );
    assert_eq!(created.auth_conf(), created.expected_auth_conf());
    for secret in created.all() {
        assert_eq!(secret.type_.as_deref(), Some("Opaque"));
        let labels = secret.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app.kubernetes.io/part-of"], "olm");
        assert_eq!(labels["app.kubernetes.io/component"], "bus-credentials");
        assert_eq!(secret.metadata.owner_references, None);
    }

    // Second run: nothing changes, not even a resourceVersion.
    let second = bus_credentials(kubeconfig, ns.name(), &[]).await;
    assert_eq!(
        outcomes(&second, &created.seeds),
        expect(DEFAULT_PREFIX, "kept", "kept")
    );
    let kept = Stored::read(&secrets, DEFAULT_PREFIX).await;
    assert_eq!(kept.seeds, created.seeds);
    let versions = |stored: &Stored| {
        stored
            .all()
            .map(|s| s.metadata.resource_version.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(versions(&kept), versions(&created));

    // An owner given later is added to every Secret; the seeds stay.
    let owner = create_service_account(&client, ns.name(), OWNER).await;
    let owned = bus_credentials(kubeconfig, ns.name(), &["--owner-service-account", OWNER]).await;
    assert_eq!(
        outcomes(&owned, &created.seeds),
        expect(DEFAULT_PREFIX, "updated", "updated")
    );
    let adopted = Stored::read(&secrets, DEFAULT_PREFIX).await;
    assert_eq!(adopted.seeds, created.seeds);
    assert_eq!(adopted.auth_conf(), created.auth_conf());
    for secret in adopted.all() {
        let references = secret.metadata.owner_references.as_ref().unwrap();
        assert_eq!(references.len(), 1, "{references:?}");
        assert_eq!(references[0].api_version, "v1");
        assert_eq!(references[0].kind, "ServiceAccount");
        assert_eq!(references[0].name, OWNER);
        assert_eq!(Some(&references[0].uid), owner.metadata.uid.as_ref());
    }
    let again = bus_credentials(kubeconfig, ns.name(), &["--owner-service-account", OWNER]).await;
    assert_eq!(
        outcomes(&again, &created.seeds),
        expect(DEFAULT_PREFIX, "kept", "kept")
    );

    // A corrupted seed is replaced, and auth.conf follows it.
    let corrupted = format!("{DEFAULT_PREFIX}-packageserver");
    overwrite_seed(&secrets, &corrupted, b"SUsample-corrupted-seed").await;
    let repair = bus_credentials(kubeconfig, ns.name(), &["--owner-service-account", OWNER]).await;
    let repaired = Stored::read(&secrets, DEFAULT_PREFIX).await;
    let mut expected = expect(DEFAULT_PREFIX, "kept", "updated");
    expected.insert(corrupted.clone(), "replaced".to_owned());
    assert_eq!(
        outcomes(
            &repair,
            &[created.seeds.clone(), repaired.seeds.clone()].concat()
        ),
        expected
    );
    // Logs go to standard output, with the outcomes.
    let logs = String::from_utf8_lossy(&repair.stdout);
    assert!(logs.contains("WARN"), "no warning logged:\n{logs}");
    for ((service, before), after) in services()
        .into_iter()
        .zip(&created.seeds)
        .zip(&repaired.seeds)
    {
        if service == "packageserver" {
            assert_ne!(after, before);
            auth::public_key_of(after).expect("a valid user seed");
        } else {
            assert_eq!(after, before, "{service}");
        }
    }
    assert_eq!(repaired.auth_conf(), repaired.expected_auth_conf());
    assert_ne!(repaired.auth_conf(), created.auth_conf());
    let packageserver = services()
        .iter()
        .position(|s| *s == "packageserver")
        .unwrap();
    assert_eq!(
        repaired.service_secrets[packageserver]
            .metadata
            .owner_references,
        adopted.service_secrets[packageserver]
            .metadata
            .owner_references
    );
}

#[tokio::test]
async fn two_runs_at_once_end_with_one_set_of_credentials() {
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("bus-credentials-race").await;
    let client = plane.client().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns.name());
    let kubeconfig = plane.kubeconfig_path();
    create_service_account(&client, ns.name(), OWNER).await;

    let args = ["--owner-service-account", OWNER];
    let (one, other) = tokio::join!(
        bus_credentials(kubeconfig, ns.name(), &args),
        bus_credentials(kubeconfig, ns.name(), &args),
    );
    let stored = Stored::read(&secrets, DEFAULT_PREFIX).await;
    let (one, other) = (
        outcomes(&one, &stored.seeds),
        outcomes(&other, &stored.seeds),
    );
    // Each Secret was created by exactly one of them; the other kept it.
    for (name, outcome) in &one {
        let pair = [outcome.as_str(), other[name].as_str()];
        assert!(
            pair == ["created", "kept"] || pair == ["kept", "created"],
            "{name}: {pair:?}"
        );
    }
    assert_eq!(one.len(), services().len() + 1);
    assert_eq!(stored.auth_conf(), stored.expected_auth_conf());
}

/// Gives `account` a Role with `rules` and waits until the API server
/// enforces it (`probe` answers).
async fn grant<F, Fut>(
    client: &Client,
    namespace: &str,
    account: &str,
    rules: serde_json::Value,
    probe: F,
) where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
    let role = serde_json::from_value(json!({
        "metadata": { "name": account },
        "rules": rules,
    }))
    .unwrap();
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    let binding = serde_json::from_value(json!({
        "metadata": { "name": account },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account },
        "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": namespace }],
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    while !probe().await {
        assert!(
            started.elapsed() < RBAC_DEADLINE,
            "the Role of {account} not enforced within {RBAC_DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_documented_permissions_suffice_and_a_refusal_names_the_secret_and_verb() {
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("bus-credentials-rbac").await;
    let client = plane.client().await;
    let dir = tempfile::tempdir().unwrap();
    let prefix = "sample-bus";
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns.name());

    // The Job's account, with exactly the Role the module documents.
    let job = "sample-credentials-job";
    create_service_account(&client, ns.name(), job).await;
    create_service_account(&client, ns.name(), OWNER).await;
    let job_kubeconfig = olm_testkit::control_plane()
        .service_account_kubeconfig(ns.name(), job, dir.path())
        .await
        .unwrap();
    let as_job = olm_testkit::ControlPlane::client_from(&job_kubeconfig)
        .await
        .unwrap();
    let namespace = ns.name().to_owned();
    grant(
        &client,
        ns.name(),
        job,
        json!([
            { "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "update"] },
            { "apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": [OWNER], "verbs": ["get"] },
        ]),
        || async {
            let secrets: Api<Secret> = Api::namespaced(as_job.clone(), &namespace);
            let accounts: Api<ServiceAccount> = Api::namespaced(as_job.clone(), &namespace);
            secrets.get_opt("sample-probe").await.is_ok() && accounts.get(OWNER).await.is_ok()
        },
    )
    .await;
    let args = ["--secret-prefix", prefix, "--owner-service-account", OWNER];
    let first = bus_credentials(&job_kubeconfig, ns.name(), &args).await;
    let stored = Stored::read(&secrets, prefix).await;
    assert_eq!(
        outcomes(&first, &stored.seeds),
        expect(prefix, "created", "created")
    );
    assert_eq!(stored.auth_conf(), stored.expected_auth_conf());
    let corrupted = format!("{prefix}-bundle-unpacker");
    overwrite_seed(&secrets, &corrupted, b"").await;
    let repair = bus_credentials(&job_kubeconfig, ns.name(), &args).await;
    assert_eq!(
        outcomes(&repair, &stored.seeds)[&corrupted],
        "replaced",
        "update is granted"
    );

    // An account that may not update: the run stops at the corrupted seed
    // and says what it could not do to which Secret.
    let reader = "sample-creator-only";
    create_service_account(&client, ns.name(), reader).await;
    let reader_kubeconfig = olm_testkit::control_plane()
        .service_account_kubeconfig(ns.name(), reader, dir.path())
        .await
        .unwrap();
    let as_reader = olm_testkit::ControlPlane::client_from(&reader_kubeconfig)
        .await
        .unwrap();
    grant(
        &client,
        ns.name(),
        reader,
        json!([{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create"] }]),
        || async {
            let secrets: Api<Secret> = Api::namespaced(as_reader.clone(), &namespace);
            secrets.get_opt("sample-probe").await.is_ok()
        },
    )
    .await;
    overwrite_seed(&secrets, &corrupted, b"SUsample-corrupted-seed").await;
    let refused =
        bus_credentials(&reader_kubeconfig, ns.name(), &["--secret-prefix", prefix]).await;
    assert!(!refused.status.success());
    assert_no_seed(&refused, &Stored::read(&secrets, prefix).await.seeds);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let expected = format!(
        "forbidden to update secret {}/{corrupted}: this needs `update` on secrets in namespace {}",
        ns.name(),
        ns.name()
    );
    assert!(stderr.contains(&expected), "{stderr}");
}
