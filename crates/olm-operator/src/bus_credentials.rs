//! `olm-operator bus-credentials`: keeps the NATS identities of OLM's
//! services (see [`olm_bus::auth`]) in Secrets, for a Job of the Helm chart
//! to run on every install and upgrade.
//!
//! For each service it keeps a Secret `<prefix>-<service>` whose `seed` is
//! that service's NKey seed (the service mounts it for `--nats-nkey-file`),
//! then one Secret `<prefix>-server` whose `auth.conf` is the NATS server's
//! `authorization` block for exactly those keys. A valid seed is never
//! replaced, so a rerun writes nothing; a missing seed is created and an
//! unusable one replaced, which also rewrites `auth.conf`. Two runs at once
//! end with the same Secrets: a create fails when the Secret already exists
//! and an update carries the `resourceVersion` it read, so the run that
//! loses a race reads the winner's Secret and decides again.
//!
//! # Permissions
//!
//! It needs exactly these, in the namespace it writes to (the chart's Role
//! grants no more):
//!
//! - `get`, `create` and `update` on `secrets`;
//! - `get` on the ServiceAccount named by `--owner-service-account`, when it
//!   is given, to read the uid its ownerReferences need.
//!
//! `get` and `update` may be limited to the Secrets' names (`resourceNames`);
//! `create` cannot be, since RBAC does not know a name before the object
//! exists.
//!
//! It never lists, watches, patches or deletes anything. Its
//! ownerReferences leave `blockOwnerDeletion` unset, because setting it
//! would also need `update` on the ServiceAccount's finalizers where the
//! `OwnerReferencesPermissionEnforcement` admission plugin runs.
//!
//! What to write to each Secret is decided by pure functions of what was
//! read ([`decide_service_secret`], [`decide_server_secret`]); [`run`] only
//! reads, writes and retries.

use std::{collections::BTreeMap, fmt};

use k8s_openapi::{
    ByteString,
    api::core::v1::{Secret, ServiceAccount},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{Api, Client, api::PostParams};
use olm_bus::auth::{self, ServiceKey};
use olm_runtime::config::{KubeArgs, TelemetryArgs};

/// The key of a service's Secret that holds its NKey seed.
pub(crate) const SEED_KEY: &str = "seed";
/// The key of the server's Secret that holds its `authorization` block.
pub(crate) const AUTH_CONF_KEY: &str = "auth.conf";
/// What follows the prefix in the name of the server's Secret.
const SERVER_SUFFIX: &str = "server";
/// The labels every Secret this command writes carries.
const LABELS: [(&str, &str); 2] = [
    ("app.kubernetes.io/part-of", "olm"),
    ("app.kubernetes.io/component", "bus-credentials"),
];
/// How often one Secret is read and written again after losing a race to
/// another writer before the run gives up. Each retry follows a write that
/// someone else won, so two concurrent runs settle on the second attempt.
const MAX_ATTEMPTS: usize = 5;
/// The longest name a Secret may have (a DNS subdomain).
const MAX_NAME_LENGTH: usize = 253;

/// Creates the NKey seed Secret of every service on the bus and the NATS
/// server's authorization Secret, keeping whatever valid seeds exist.
#[derive(Debug, clap::Args)]
pub(crate) struct BusCredentialsArgs {
    /// The namespace of the Secrets (and of the owner ServiceAccount).
    #[arg(long = "namespace", env = "POD_NAMESPACE", value_name = "NAMESPACE")]
    pub(crate) namespace: String,

    /// The Secrets are named `<prefix>-<service>` and `<prefix>-server`.
    #[arg(
        long = "secret-prefix",
        env = "OLM_BUS_SECRET_PREFIX",
        default_value = "olm-bus",
        value_name = "PREFIX"
    )]
    pub(crate) secret_prefix: String,

    /// A ServiceAccount in the namespace to set as owner of every Secret,
    /// so that deleting it (as `helm uninstall` does) deletes them too.
    #[arg(
        long = "owner-service-account",
        env = "OLM_BUS_OWNER_SERVICE_ACCOUNT",
        value_name = "NAME"
    )]
    pub(crate) owner_service_account: Option<String>,

    /// Comma-separated services to keep identities for; the server's
    /// `auth.conf` admits exactly these.
    #[arg(
        long = "services",
        env = "OLM_BUS_SERVICES",
        value_delimiter = ',',
        default_values_t = all_services(),
        value_name = "SERVICE,..."
    )]
    pub(crate) services: Vec<String>,

    #[command(flatten)]
    pub(crate) kube: KubeArgs,
    #[command(flatten)]
    pub(crate) telemetry: TelemetryArgs,
}

/// Every service that has a bus identity.
fn all_services() -> Vec<String> {
    auth::SERVICES
        .iter()
        .map(|permissions| permissions.service.to_owned())
        .collect()
}

/// A failure of `bus-credentials`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// `--services` names a service without a bus identity.
    #[error("--services names {service:?}, which has no bus identity (known: {known})")]
    UnknownService {
        /// The name as given.
        service: String,
        /// The services that have one, comma-separated.
        known: String,
    },

    /// `--services` is empty.
    #[error("--services names no service")]
    NoServices,

    /// `--secret-prefix` does not give valid Secret names.
    #[error("--secret-prefix {prefix:?} does not make a valid secret name: {reason}")]
    InvalidPrefix {
        /// The prefix as given.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The owner ServiceAccount does not exist.
    #[error(
        "serviceaccount {namespace}/{name} (--owner-service-account) does not exist; create it first"
    )]
    OwnerNotFound {
        /// The namespace.
        namespace: String,
        /// The ServiceAccount.
        name: String,
    },

    /// RBAC refused a request.
    #[error(
        "forbidden to {verb} {resource} {namespace}/{name}: this needs `{verb}` on {resource}s in namespace {namespace}"
    )]
    Forbidden {
        /// The verb refused: `get`, `create` or `update`.
        verb: &'static str,
        /// The resource, singular: `secret` or `serviceaccount`.
        resource: &'static str,
        /// The namespace.
        namespace: String,
        /// The object.
        name: String,
        /// The API server's answer.
        #[source]
        source: Box<kube::Error>,
    },

    /// Any other failed request.
    #[error("cannot {verb} {resource} {namespace}/{name}")]
    Kube {
        /// The verb: `get`, `create` or `update`.
        verb: &'static str,
        /// The resource, singular: `secret` or `serviceaccount`.
        resource: &'static str,
        /// The namespace.
        namespace: String,
        /// The object.
        name: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },

    /// Other writers changed a Secret between every read and write.
    #[error(
        "secret {namespace}/{name} changed under every one of {MAX_ATTEMPTS} attempts to write it"
    )]
    Contended {
        /// The namespace.
        namespace: String,
        /// The Secret.
        name: String,
    },

    /// The owner ServiceAccount, as read, has no uid.
    #[error("serviceaccount {namespace}/{name} has no uid to own secrets with")]
    OwnerWithoutUid {
        /// The namespace.
        namespace: String,
        /// The ServiceAccount.
        name: String,
    },

    /// New NKeys could not be made.
    #[error("cannot generate nkeys")]
    GenerateKeys(#[source] olm_bus::Error),

    /// The server's `authorization` block could not be rendered.
    #[error("cannot render the nats server authorization")]
    Authorization(#[source] olm_bus::Error),
}

/// What a run did to one Secret; printed as `secret/<name> <outcome>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It did not exist and was created.
    Created,
    /// It was already as it should be; nothing was written.
    Kept,
    /// It held no usable seed, and now holds a new one.
    Replaced,
    /// Its content or metadata (labels, owner) was brought up to date.
    Updated,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Created => "created",
            Outcome::Kept => "kept",
            Outcome::Replaced => "replaced",
            Outcome::Updated => "updated",
        })
    }
}

/// A write to make: `create` of a new Secret, or `update` of one read, with
/// the `resourceVersion` it was read at.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Write {
    /// Create this Secret; fails if another run created it first.
    Create(Secret),
    /// Replace the Secret; fails if it changed since it was read.
    Update(Secret),
}

/// What to do about one Secret, given what was read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Decision {
    /// What will have happened once `write` succeeds.
    pub(crate) outcome: Outcome,
    /// The write to make; `None` when the Secret is kept as it is.
    pub(crate) write: Option<Write>,
    /// Why a seed is replaced, for a warning; never contains the seed.
    pub(crate) problem: Option<String>,
}

/// What to do about a service's Secret, and the public key the server must
/// admit once it is done.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ServiceSecretDecision {
    /// The write, if any.
    pub(crate) decision: Decision,
    /// The public key of the seed the Secret holds once written.
    pub(crate) public: String,
}

/// The services `requested` names, each once and in [`auth::SERVICES`]'
/// order, so that every run renders the same `auth.conf` whatever the order
/// of `--services`. Empty elements (`a,,b`) are ignored.
pub(crate) fn selected_services(requested: &[String]) -> Result<Vec<&'static str>, Error> {
    for service in requested.iter().map(|s| s.trim()) {
        if !service.is_empty() && auth::permissions(service).is_none() {
            return Err(Error::UnknownService {
                service: service.to_owned(),
                known: all_services().join(","),
            });
        }
    }
    let selected: Vec<&'static str> = auth::SERVICES
        .iter()
        .map(|permissions| permissions.service)
        .filter(|service| requested.iter().any(|s| s.trim() == *service))
        .collect();
    if selected.is_empty() {
        return Err(Error::NoServices);
    }
    Ok(selected)
}

/// The name of the Secret holding `service`'s seed.
pub(crate) fn service_secret_name(prefix: &str, service: &str) -> String {
    format!("{prefix}-{service}")
}

/// The name of the Secret holding the server's `auth.conf`.
pub(crate) fn server_secret_name(prefix: &str) -> String {
    format!("{prefix}-{SERVER_SUFFIX}")
}

/// Checks that `prefix` gives valid Secret names (DNS subdomains) for all of
/// `services`, before anything is written.
pub(crate) fn validate_prefix(prefix: &str, services: &[&str]) -> Result<(), Error> {
    let invalid = |reason| Error::InvalidPrefix {
        prefix: prefix.to_owned(),
        reason,
    };
    if prefix.is_empty() {
        return Err(invalid("it is empty"));
    }
    if !prefix
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    {
        return Err(invalid(
            "only lowercase letters, digits, '-' and '.' are allowed",
        ));
    }
    if !prefix.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(invalid("it must start with a letter or digit"));
    }
    if prefix.ends_with('.') {
        return Err(invalid("it must not end with '.'"));
    }
    let longest = services
        .iter()
        .map(|s| service_secret_name(prefix, s).len())
        .chain([server_secret_name(prefix).len()])
        .max()
        .unwrap_or_default();
    if longest > MAX_NAME_LENGTH {
        return Err(invalid("the names would be longer than 253 characters"));
    }
    Ok(())
}

/// The ownerReference to `account`, which must have been read (it needs the
/// uid).
pub(crate) fn owner_reference(account: &ServiceAccount) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "v1".to_owned(),
        kind: "ServiceAccount".to_owned(),
        name: account.metadata.name.clone()?,
        uid: account.metadata.uid.clone()?,
        ..OwnerReference::default()
    })
}

/// Gives `metadata` our labels and, when given, `owner` as an owner (in
/// place of a reference to an earlier ServiceAccount of the same name);
/// other labels and owners stay. Returns whether anything changed.
fn claim(metadata: &mut ObjectMeta, owner: Option<&OwnerReference>) -> bool {
    let mut changed = false;
    let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    for (key, value) in LABELS {
        if labels.get(key).map(String::as_str) != Some(value) {
            labels.insert(key.to_owned(), value.to_owned());
            changed = true;
        }
    }
    if let Some(owner) = owner {
        let references = metadata.owner_references.get_or_insert_with(Vec::new);
        let same_account = |reference: &OwnerReference| {
            reference.kind == owner.kind
                && reference.api_version == owner.api_version
                && reference.name == owner.name
        };
        if !references
            .iter()
            .any(|r| same_account(r) && r.uid == owner.uid)
        {
            // A reference to a deleted ServiceAccount of the same name would
            // leave the Secret with an owner that can never be deleted again.
            references.retain(|r| !same_account(r));
            references.push(owner.clone());
            changed = true;
        }
    }
    changed
}

/// A new Secret `namespace/name` holding `key: value`, with our labels and
/// owner.
fn new_secret(
    namespace: &str,
    name: &str,
    key: &str,
    value: &str,
    owner: Option<&OwnerReference>,
) -> Secret {
    let mut metadata = ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectMeta::default()
    };
    claim(&mut metadata, owner);
    Secret {
        metadata,
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            key.to_owned(),
            ByteString(value.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// The public key of the seed `secret` holds, or why it holds none usable.
/// The reason never quotes the seed.
fn stored_public_key(secret: &Secret) -> Result<String, String> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|data| data.get(SEED_KEY))
        .ok_or_else(|| format!("it has no {SEED_KEY:?} key"))?;
    let seed =
        std::str::from_utf8(&bytes.0).map_err(|_| format!("its {SEED_KEY:?} is not text"))?;
    auth::public_key_of(seed).map_err(|error| format!("its {SEED_KEY:?} is unusable: {error}"))
}

/// What to do about the Secret `namespace/name` of a service, given the
/// Secret as read (`None`: it does not exist) and a new key to use if the
/// Secret has no usable one.
///
/// A usable seed is always kept; only labels and the owner are added when
/// missing. A missing Secret is created and an unusable seed replaced, both
/// with `fresh`.
pub(crate) fn decide_service_secret(
    namespace: &str,
    name: &str,
    observed: Option<&Secret>,
    owner: Option<&OwnerReference>,
    fresh: &ServiceKey,
) -> ServiceSecretDecision {
    let Some(observed) = observed else {
        return ServiceSecretDecision {
            decision: Decision {
                outcome: Outcome::Created,
                write: Some(Write::Create(new_secret(
                    namespace,
                    name,
                    SEED_KEY,
                    &fresh.seed,
                    owner,
                ))),
                problem: None,
            },
            public: fresh.public.clone(),
        };
    };
    let mut desired = observed.clone();
    let claimed = claim(&mut desired.metadata, owner);
    match stored_public_key(observed) {
        Ok(public) => ServiceSecretDecision {
            decision: Decision {
                outcome: if claimed {
                    Outcome::Updated
                } else {
                    Outcome::Kept
                },
                write: claimed.then_some(Write::Update(desired)),
                problem: None,
            },
            public,
        },
        Err(problem) => {
            desired.data.get_or_insert_with(BTreeMap::new).insert(
                SEED_KEY.to_owned(),
                ByteString(fresh.seed.clone().into_bytes()),
            );
            ServiceSecretDecision {
                decision: Decision {
                    outcome: Outcome::Replaced,
                    write: Some(Write::Update(desired)),
                    problem: Some(problem),
                },
                public: fresh.public.clone(),
            }
        }
    }
}

/// What to do about the server's Secret `namespace/name`, given the Secret
/// as read (`None`: it does not exist) and the `auth.conf` it must hold.
pub(crate) fn decide_server_secret(
    namespace: &str,
    name: &str,
    observed: Option<&Secret>,
    owner: Option<&OwnerReference>,
    auth_conf: &str,
) -> Decision {
    let Some(observed) = observed else {
        return Decision {
            outcome: Outcome::Created,
            write: Some(Write::Create(new_secret(
                namespace,
                name,
                AUTH_CONF_KEY,
                auth_conf,
                owner,
            ))),
            problem: None,
        };
    };
    let mut desired = observed.clone();
    let mut changed = claim(&mut desired.metadata, owner);
    let data = desired.data.get_or_insert_with(BTreeMap::new);
    if data.get(AUTH_CONF_KEY).map(|value| value.0.as_slice()) != Some(auth_conf.as_bytes()) {
        data.insert(
            AUTH_CONF_KEY.to_owned(),
            ByteString(auth_conf.as_bytes().to_vec()),
        );
        changed = true;
    }
    Decision {
        outcome: if changed {
            Outcome::Updated
        } else {
            Outcome::Kept
        },
        write: changed.then_some(Write::Update(desired)),
        problem: None,
    }
}

/// Keeps the Secrets `args` describes, printing `secret/<name> <outcome>`
/// for each as it is settled.
pub(crate) async fn run(client: Client, args: &BusCredentialsArgs) -> Result<(), Error> {
    let namespace = args.namespace.as_str();
    let services = selected_services(&args.services)?;
    validate_prefix(&args.secret_prefix, &services)?;
    let owner = match &args.owner_service_account {
        Some(name) => Some(read_owner(&client, namespace, name).await?),
        None => None,
    };
    let fresh = auth::generate_keys().map_err(Error::GenerateKeys)?;
    let secrets: Api<Secret> = Api::namespaced(client, namespace);

    let mut keys: Vec<(&str, String)> = Vec::with_capacity(services.len());
    for service in services {
        let name = service_secret_name(&args.secret_prefix, service);
        let fresh = fresh
            .iter()
            .find(|key| key.service == service)
            .ok_or_else(|| {
                Error::GenerateKeys(olm_bus::Error::Key(format!("no key made for {service}")))
            })?;
        let (decision, public) = settle(&secrets, namespace, &name, |observed| {
            let decided = decide_service_secret(namespace, &name, observed, owner.as_ref(), fresh);
            (decided.decision, decided.public)
        })
        .await?;
        if let Some(problem) = &decision.problem {
            tracing::warn!(secret = %name, %problem, "replaced the unusable seed of {service}");
        }
        println!("secret/{name} {}", decision.outcome);
        keys.push((service, public));
    }

    let pairs: Vec<(&str, &str)> = keys
        .iter()
        .map(|(service, public)| (*service, public.as_str()))
        .collect();
    let auth_conf = auth::server_authorization(&pairs).map_err(Error::Authorization)?;
    let name = server_secret_name(&args.secret_prefix);
    let (decision, ()) = settle(&secrets, namespace, &name, |observed| {
        let decision = decide_server_secret(namespace, &name, observed, owner.as_ref(), &auth_conf);
        (decision, ())
    })
    .await?;
    println!("secret/{name} {}", decision.outcome);
    Ok(())
}

/// The ownerReference to the ServiceAccount `namespace/name`.
async fn read_owner(client: &Client, namespace: &str, name: &str) -> Result<OwnerReference, Error> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account = accounts
        .get_opt(name)
        .await
        .map_err(|source| request_error("get", "serviceaccount", namespace, name, source))?
        .ok_or_else(|| Error::OwnerNotFound {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })?;
    owner_reference(&account).ok_or_else(|| Error::OwnerWithoutUid {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// Reads the Secret `name`, decides, and writes, again from the read when
/// another writer got there first, until a write succeeds or none is needed.
/// Returns the decision carried out.
async fn settle<T>(
    secrets: &Api<Secret>,
    namespace: &str,
    name: &str,
    mut decide: impl FnMut(Option<&Secret>) -> (Decision, T),
) -> Result<(Decision, T), Error> {
    for attempt in 1..=MAX_ATTEMPTS {
        let observed = secrets
            .get_opt(name)
            .await
            .map_err(|source| request_error("get", "secret", namespace, name, source))?;
        let (decision, value) = decide(observed.as_ref());
        let written = match &decision.write {
            None => return Ok((decision, value)),
            Some(Write::Create(secret)) => secrets
                .create(&PostParams::default(), secret)
                .await
                .map_err(|error| ("create", error)),
            Some(Write::Update(secret)) => secrets
                .replace(name, &PostParams::default(), secret)
                .await
                .map_err(|error| ("update", error)),
        };
        match written {
            Ok(_) => return Ok((decision, value)),
            // AlreadyExists and Conflict: another run wrote first. NotFound:
            // the Secret was deleted since it was read.
            Err((verb, kube::Error::Api(status))) if status.code == 409 || status.code == 404 => {
                tracing::debug!(secret = %name, verb, attempt, reason = %status.reason, "lost a race; reading again");
            }
            Err((verb, source)) => {
                return Err(request_error(verb, "secret", namespace, name, source));
            }
        }
    }
    Err(Error::Contended {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// The error of a failed `verb` on `resource` `namespace/name`, naming the
/// permission it lacks when RBAC refused it.
fn request_error(
    verb: &'static str,
    resource: &'static str,
    namespace: &str,
    name: &str,
    source: kube::Error,
) -> Error {
    let forbidden = matches!(&source, kube::Error::Api(status) if status.code == 403);
    let (namespace, name, source) = (namespace.to_owned(), name.to_owned(), Box::new(source));
    if forbidden {
        Error::Forbidden {
            verb,
            resource,
            namespace,
            name,
            source,
        }
    } else {
        Error::Kube {
            verb,
            resource,
            namespace,
            name,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMESPACE: &str = "sample-bus-system";
    const NAME: &str = "sample-prefix-catalog-operator";

    /// A Secret `NAME` as another run (or a person) left it.
    fn existing(data: &[(&str, &[u8])], labelled: bool, owners: Vec<OwnerReference>) -> Secret {
        let mut secret = new_secret(NAMESPACE, NAME, "unused", "", None);
        secret.metadata.resource_version = Some("42".to_owned());
        secret.metadata.uid = Some("secret-uid".to_owned());
        if !labelled {
            secret.metadata.labels = None;
        }
        secret.metadata.owner_references = (!owners.is_empty()).then_some(owners);
        secret.data = Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                .collect(),
        );
        secret
    }

    fn key_of(service: &'static str) -> ServiceKey {
        auth::generate_keys()
            .unwrap()
            .into_iter()
            .find(|key| key.service == service)
            .unwrap()
    }

    fn sample_owner(uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "v1".to_owned(),
            kind: "ServiceAccount".to_owned(),
            name: "sample-installer".to_owned(),
            uid: uid.to_owned(),
            ..OwnerReference::default()
        }
    }

    fn seed_in(write: &Write) -> String {
        let (Write::Create(secret) | Write::Update(secret)) = write;
        String::from_utf8(secret.data.as_ref().unwrap()[SEED_KEY].0.clone()).unwrap()
    }

    #[test]
    fn each_service_secret_is_created_kept_or_replaced_as_its_seed_allows() {
        let stored = key_of("catalog-operator");
        let fresh = key_of("catalog-operator");
        let owner = sample_owner("owner-uid-1");
        let account_seed = nkeys::KeyPair::new_account().seed().unwrap();
        struct Case {
            what: &'static str,
            observed: Option<Secret>,
            owner: Option<OwnerReference>,
            outcome: Outcome,
            /// `Some(true)`: creates; `Some(false)`: updates; `None`: no write.
            creates: Option<bool>,
            /// The seed in use afterwards is the fresh one (else the stored one).
            fresh_seed: bool,
        }
        let valid = |labelled, owners| {
            Some(existing(
                &[(SEED_KEY, stored.seed.as_bytes())],
                labelled,
                owners,
            ))
        };
        let cases = [
            Case {
                what: "missing",
                observed: None,
                owner: None,
                outcome: Outcome::Created,
                creates: Some(true),
                fresh_seed: true,
            },
            Case {
                what: "valid and labelled",
                observed: valid(true, vec![]),
                owner: None,
                outcome: Outcome::Kept,
                creates: None,
                fresh_seed: false,
            },
            Case {
                // What a run reads again after its create lost to another run.
                what: "created by another run, with the owner",
                observed: valid(true, vec![owner.clone()]),
                owner: Some(owner.clone()),
                outcome: Outcome::Kept,
                creates: None,
                fresh_seed: false,
            },
            Case {
                what: "valid with a trailing newline",
                observed: Some(existing(
                    &[(SEED_KEY, format!("{}\n", stored.seed).as_bytes())],
                    true,
                    vec![],
                )),
                owner: None,
                outcome: Outcome::Kept,
                creates: None,
                fresh_seed: false,
            },
            Case {
                what: "valid without labels",
                observed: valid(false, vec![]),
                owner: None,
                outcome: Outcome::Updated,
                creates: Some(false),
                fresh_seed: false,
            },
            Case {
                what: "valid without the owner",
                observed: valid(true, vec![]),
                owner: Some(owner.clone()),
                outcome: Outcome::Updated,
                creates: Some(false),
                fresh_seed: false,
            },
            Case {
                what: "valid, owned by a deleted account of the same name",
                observed: valid(true, vec![sample_owner("owner-uid-0")]),
                owner: Some(owner.clone()),
                outcome: Outcome::Updated,
                creates: Some(false),
                fresh_seed: false,
            },
            Case {
                what: "not a seed",
                observed: Some(existing(&[(SEED_KEY, b"SUnot-a-seed")], true, vec![])),
                owner: None,
                outcome: Outcome::Replaced,
                creates: Some(false),
                fresh_seed: true,
            },
            Case {
                what: "an account seed",
                observed: Some(existing(
                    &[(SEED_KEY, account_seed.as_bytes())],
                    true,
                    vec![],
                )),
                owner: None,
                outcome: Outcome::Replaced,
                creates: Some(false),
                fresh_seed: true,
            },
            Case {
                what: "no seed key",
                observed: Some(existing(&[("other", b"x")], true, vec![])),
                owner: None,
                outcome: Outcome::Replaced,
                creates: Some(false),
                fresh_seed: true,
            },
            Case {
                what: "a seed that is not text",
                observed: Some(existing(&[(SEED_KEY, &[0xff, 0xfe])], true, vec![])),
                owner: Some(owner.clone()),
                outcome: Outcome::Replaced,
                creates: Some(false),
                fresh_seed: true,
            },
        ];
        for case in cases {
            let decided = decide_service_secret(
                NAMESPACE,
                NAME,
                case.observed.as_ref(),
                case.owner.as_ref(),
                &fresh,
            );
            let what = case.what;
            let decision = &decided.decision;
            assert_eq!(decision.outcome, case.outcome, "{what}");
            let expected = if case.fresh_seed { &fresh } else { &stored };
            assert_eq!(decided.public, expected.public, "{what}");
            assert_eq!(
                decision.problem.is_some(),
                case.outcome == Outcome::Replaced,
                "{what}"
            );
            match (&decision.write, case.creates) {
                (None, None) => {}
                (Some(write), Some(creates)) => {
                    assert_eq!(matches!(write, Write::Create(_)), creates, "{what}");
                    let (Write::Create(secret) | Write::Update(secret)) = write;
                    if case.fresh_seed {
                        assert_eq!(seed_in(write), fresh.seed, "{what}");
                    } else {
                        assert_eq!(secret.data, case.observed.as_ref().unwrap().data, "{what}");
                    }
                    if let Some(observed) = &case.observed {
                        // An update is conditional on what was read.
                        assert_eq!(secret.metadata.resource_version.as_deref(), Some("42"));
                        assert_eq!(secret.metadata.uid, observed.metadata.uid, "{what}");
                    }
                    assert_eq!(secret.metadata.name.as_deref(), Some(NAME), "{what}");
                    assert_eq!(secret.metadata.namespace.as_deref(), Some(NAMESPACE));
                    let labels = secret.metadata.labels.as_ref().unwrap();
                    for (key, value) in LABELS {
                        assert_eq!(labels[key], value, "{what}");
                    }
                    if let Some(owner) = &case.owner {
                        assert_eq!(
                            secret.metadata.owner_references.as_deref(),
                            Some(std::slice::from_ref(owner)),
                            "{what}"
                        );
                    }
                }
                (write, creates) => panic!("{what}: wrote {write:?}, expected {creates:?}"),
            }
        }
    }

    #[test]
    fn a_new_secret_is_opaque_and_holds_only_the_seed() {
        let fresh = key_of("packageserver");
        let decided = decide_service_secret(NAMESPACE, NAME, None, None, &fresh);
        let Some(Write::Create(secret)) = decided.decision.write else {
            panic!("not a create");
        };
        assert_eq!(secret.type_.as_deref(), Some("Opaque"));
        assert_eq!(secret.data.unwrap().keys().collect::<Vec<_>>(), [SEED_KEY]);
        assert_eq!(secret.metadata.owner_references, None);
    }

    #[test]
    fn a_replaced_seed_keeps_other_keys_and_the_problem_never_quotes_it() {
        let fresh = key_of("olm-operator");
        let broken = "SUsample-broken-seed";
        let observed = existing(
            &[(SEED_KEY, broken.as_bytes()), ("note", b"kept")],
            true,
            vec![],
        );
        let decided = decide_service_secret(NAMESPACE, NAME, Some(&observed), None, &fresh);
        let problem = decided.decision.problem.unwrap();
        assert!(!problem.contains(broken), "{problem}");
        let Some(Write::Update(secret)) = decided.decision.write else {
            panic!("not an update");
        };
        let data = secret.data.unwrap();
        assert_eq!(data["note"].0, b"kept");
        assert_eq!(data[SEED_KEY].0, fresh.seed.as_bytes());
    }

    #[test]
    fn the_server_secret_is_written_only_when_its_content_or_metadata_differ() {
        let owner = sample_owner("owner-uid-1");
        let current = "authorization { sample }\n";
        let with = |conf: &str, owners| existing(&[(AUTH_CONF_KEY, conf.as_bytes())], true, owners);
        let cases = [
            ("missing", None, None, Outcome::Created),
            ("same", Some(with(current, vec![])), None, Outcome::Kept),
            (
                "same, owned",
                Some(with(current, vec![owner.clone()])),
                Some(owner.clone()),
                Outcome::Kept,
            ),
            (
                "stale",
                Some(with("authorization { old }\n", vec![])),
                None,
                Outcome::Updated,
            ),
            (
                "same, without owner",
                Some(with(current, vec![])),
                Some(owner.clone()),
                Outcome::Updated,
            ),
        ];
        for (what, observed, owner, outcome) in cases {
            let decision =
                decide_server_secret(NAMESPACE, NAME, observed.as_ref(), owner.as_ref(), current);
            assert_eq!(decision.outcome, outcome, "{what}");
            match decision.write {
                None => assert_eq!(outcome, Outcome::Kept, "{what}"),
                Some(Write::Create(secret) | Write::Update(secret)) => {
                    assert_eq!(
                        secret.data.unwrap()[AUTH_CONF_KEY].0,
                        current.as_bytes(),
                        "{what}"
                    );
                }
            }
        }
    }

    #[test]
    fn services_are_checked_deduplicated_and_ordered() {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            selected_services(&all_services()).unwrap(),
            auth::SERVICES.iter().map(|p| p.service).collect::<Vec<_>>()
        );
        assert_eq!(
            selected_services(&names(&[
                "packageserver",
                " catalog-operator",
                "",
                "packageserver"
            ]))
            .unwrap(),
            ["catalog-operator", "packageserver"]
        );
        assert!(matches!(
            selected_services(&names(&["catalog-operator", "sample-intruder"])),
            Err(Error::UnknownService { service, .. }) if service == "sample-intruder"
        ));
        assert!(matches!(
            selected_services(&names(&[""])),
            Err(Error::NoServices)
        ));
    }

    #[test]
    fn prefixes_must_make_secret_names() {
        let services = ["catalog-operator"];
        validate_prefix("olm-bus", &services).unwrap();
        validate_prefix("sample.bus-2", &services).unwrap();
        for prefix in ["", "Olm", "-olm", "olm.", "olm_bus", &"a".repeat(240)] {
            assert!(
                validate_prefix(prefix, &services).is_err(),
                "{prefix:?} accepted"
            );
        }
    }

    #[test]
    fn a_refusal_names_the_verb_and_the_secret() {
        let status = kube::core::Status::failure("secrets is forbidden", "Forbidden")
            .with_code(403)
            .boxed();
        let error = request_error(
            "update",
            "secret",
            NAMESPACE,
            NAME,
            kube::Error::Api(status),
        );
        assert_eq!(
            error.to_string(),
            format!(
                "forbidden to update secret {NAMESPACE}/{NAME}: this needs `update` on secrets in namespace {NAMESPACE}"
            )
        );
    }
}
