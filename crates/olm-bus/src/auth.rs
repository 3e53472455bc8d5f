//! Who may say what on the bus: one NATS identity per service, each
//! authenticated by its own NKey (a challenge signed with an Ed25519 seed;
//! no password travels) and allowed to publish only the subjects that service
//! publishes. A pod that reaches NATS without a service's seed cannot
//! connect, and bundle-unpacker's seed cannot be used to ask for unpacks.
//!
//! The same table renders the `authorization` block of the NATS server's
//! configuration, for olm-testkit and for the Helm chart, so the server's
//! rules and the services' needs cannot drift apart.
//!
//! Every service may use the JetStream API (`$JS.API.>`): each declares the
//! streams on connect, and JetStream's API is not split finer by subject in
//! a way that would keep that working. A stolen seed therefore still lets
//! its holder read or purge the streams; it does not let it forge another
//! service's events.

use std::fmt::Write as _;

use crate::{Error, subjects};

/// The subjects a service may publish and subscribe to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServicePermissions {
    /// The service's name, as it connects (`Bus::connect`'s `service`).
    pub service: &'static str,
    /// Subjects it may publish to (NATS wildcards allowed).
    pub publish: &'static [&'static str],
    /// Subjects it may subscribe to.
    pub subscribe: &'static [&'static str],
}

/// Replies to requests (JetStream API calls, publish acknowledgements).
const INBOX: &str = "_INBOX.>";
/// The JetStream API: stream declarations, consumers, pulls.
const JETSTREAM_API: &str = "$JS.API.>";
/// Acknowledgements of work-queue messages.
const JETSTREAM_ACK: &str = "$JS.ACK.>";

/// Every service's permissions: what it publishes and subscribes to today,
/// nothing more. A service not listed here gets no identity.
pub const SERVICES: &[ServicePermissions] = &[
    ServicePermissions {
        service: "catalog-operator",
        publish: &[
            subjects::BUNDLE_UNPACK_REQUESTS,
            "olm.v1.catalog.*.*.updated",
            JETSTREAM_API,
        ],
        subscribe: &[INBOX],
    },
    ServicePermissions {
        service: "bundle-unpacker",
        publish: &["olm.v1.bundle.*.unpacked", JETSTREAM_API, JETSTREAM_ACK],
        subscribe: &[INBOX],
    },
    ServicePermissions {
        service: "olm-operator",
        publish: &[JETSTREAM_API],
        subscribe: &[INBOX],
    },
    ServicePermissions {
        service: "packageserver",
        publish: &[JETSTREAM_API],
        subscribe: &[INBOX, "olm.v1.catalog.*.*.updated"],
    },
    ServicePermissions {
        service: "marketplace-operator",
        publish: &[JETSTREAM_API],
        subscribe: &[INBOX, "olm.v1.catalog.*.*.updated"],
    },
];

/// The permissions of `service`, if it has an identity.
pub fn permissions(service: &str) -> Option<&'static ServicePermissions> {
    SERVICES.iter().find(|p| p.service == service)
}

/// A service's NKey: the seed it connects with (a secret) and the public key
/// the server knows it by.
#[derive(Clone)]
pub struct ServiceKey {
    /// The service.
    pub service: &'static str,
    /// The NKey seed (`SU...`): the service's secret.
    pub seed: String,
    /// The user public key (`U...`).
    pub public: String,
}

impl std::fmt::Debug for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The seed is a credential: never in logs.
        f.debug_struct("ServiceKey")
            .field("service", &self.service)
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

/// A new NKey for every service in [`SERVICES`].
pub fn generate_keys() -> Result<Vec<ServiceKey>, Error> {
    SERVICES
        .iter()
        .map(|p| {
            let pair = nkeys::KeyPair::new_user();
            let seed = pair.seed().map_err(|e| Error::Key(e.to_string()))?;
            Ok(ServiceKey {
                service: p.service,
                seed,
                public: pair.public_key(),
            })
        })
        .collect()
}

/// The public key of an NKey seed, checking that it is a user seed.
pub fn public_key_of(seed: &str) -> Result<String, Error> {
    let pair = nkeys::KeyPair::from_seed(seed.trim()).map_err(|e| Error::Key(e.to_string()))?;
    let public = pair.public_key();
    if !public.starts_with('U') {
        return Err(Error::Key("not a user NKey seed".to_owned()));
    }
    Ok(public)
}

/// The `authorization` block of a NATS server configuration that lets each
/// service in `keys` connect with its NKey and the permissions
/// [`SERVICES`] gives it, and nobody else.
pub fn server_authorization(keys: &[(&str, &str)]) -> Result<String, Error> {
    let mut text = String::from("authorization {\n  users = [\n");
    for (service, public) in keys {
        let permissions = permissions(service)
            .ok_or_else(|| Error::Key(format!("no bus identity is defined for {service:?}")))?;
        if !public.starts_with('U') || !public.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(Error::Key(format!(
                "{public:?} is not a user NKey public key"
            )));
        }
        let list = |subjects: &[&str]| {
            subjects
                .iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            text,
            "    {{ nkey: \"{public}\", permissions: {{ publish: {{ allow: [{}] }}, subscribe: {{ allow: [{}] }} }} }}",
            list(permissions.publish),
            list(permissions.subscribe)
        );
    }
    text.push_str("  ]\n}\n");
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_catalog_operator_may_ask_for_unpacks() {
        for permissions in SERVICES {
            let asks = permissions
                .publish
                .contains(&subjects::BUNDLE_UNPACK_REQUESTS);
            assert_eq!(
                asks,
                permissions.service == "catalog-operator",
                "{}",
                permissions.service
            );
            assert!(
                !permissions
                    .publish
                    .iter()
                    .any(|s| *s == ">" || *s == "olm.>"),
                "{} may publish everything",
                permissions.service
            );
        }
    }

    #[test]
    fn the_server_block_names_each_key_with_its_permissions() {
        let keys = generate_keys().expect("keys");
        let pairs: Vec<(&str, &str)> = keys
            .iter()
            .map(|k| (k.service, k.public.as_str()))
            .collect();
        let text = server_authorization(&pairs).expect("renders");
        for key in &keys {
            assert!(text.contains(&key.public));
            assert!(!text.contains(&key.seed), "a seed leaked into the config");
            assert_eq!(public_key_of(&key.seed).expect("a user seed"), key.public);
        }
        assert!(text.contains("\"olm.v1.bundle.unpack.requests\""));
        assert!(
            !format!("{:?}", keys[0]).contains(&keys[0].seed),
            "Debug shows the seed"
        );
    }

    #[test]
    fn malformed_keys_and_unknown_services_are_refused() {
        assert!(server_authorization(&[("catalog-operator", "not a key\" }")]).is_err());
        assert!(server_authorization(&[("intruder", "UABC")]).is_err());
        assert!(public_key_of("SUnot-a-seed").is_err());
        let account = nkeys::KeyPair::new_account();
        assert!(public_key_of(&account.seed().expect("seed")).is_err());
    }
}
