//! Certificate material as stored (PEM text), reading it into the facts the
//! policy decides on, and carrying out a decision with rcgen.

use std::time::SystemTime;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData, SerialNumber,
};
use rustls_pki_types::{CertificateDer, pem::PemObject};
use sha2::{Digest, Sha256};
use x509_parser::{certificate::X509Certificate, prelude::FromDer};

use crate::{
    error::CertError,
    policy::{
        CaFacts, CertFacts, Decision, Observed, RotationPolicy, ServingFacts, Validity,
        system_time, unix_seconds,
    },
};

/// Upper bound on the certificates a CA bundle may hold; more means the
/// stored bundle is not ours (rotation keeps at most two).
pub const MAX_BUNDLE_CERTS: usize = 16;

/// Upper bound on the size of one stored PEM value.
pub const MAX_PEM_BYTES: usize = 64 * 1024;

/// Upstream's prefix of self-signed CA common names (`olm-selfsigned-<serial>`).
pub const CA_COMMON_NAME_PREFIX: &str = "olm-selfsigned";

/// Upstream's organization on OLM-generated certificates.
pub const UPSTREAM_ORGANIZATION: &str = "Red Hat, Inc.";

/// The stored certificates and keys, as PEM text.
#[derive(Clone, PartialEq, Eq)]
pub struct Material {
    /// Every CA clients should trust, newest first.
    pub ca_bundle_pem: String,
    /// Private key of the signing CA (the newest).
    pub ca_key_pem: String,
    /// The served certificate.
    pub cert_pem: String,
    /// Private key of the served certificate.
    pub key_pem: String,
}

impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys stay out of logs.
        f.debug_struct("Material")
            .field("ca_bundle_pem", &self.ca_bundle_pem)
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// What a serving certificate is for: the names it carries and the subject
/// details of the CAs that sign it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// DNS names (or IP addresses) the serving certificate must cover; the
    /// first is its common name.
    pub hosts: Vec<String>,
    /// Organization of every certificate made.
    pub organization: String,
}

impl Profile {
    /// A profile for a Service's in-cluster names, as upstream OLM issues
    /// them: `<svc>.<ns>`, `<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local`.
    pub fn for_service(service: &str, namespace: &str) -> Self {
        Self {
            hosts: vec![
                format!("{service}.{namespace}"),
                format!("{service}.{namespace}.svc"),
                format!("{service}.{namespace}.svc.cluster.local"),
            ],
            organization: UPSTREAM_ORGANIZATION.to_owned(),
        }
    }
}

/// Splits PEM text into certificates, refusing anything else, empty input and
/// more than [`MAX_BUNDLE_CERTS`].
pub fn parse_certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, CertError> {
    if pem.len() > MAX_PEM_BYTES {
        return Err(CertError::TooLarge(pem.len()));
    }
    let mut out = Vec::new();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        out.push(cert.map_err(|e| CertError::Pem(e.to_string()))?);
        if out.len() > MAX_BUNDLE_CERTS {
            return Err(CertError::BundleTooLong(MAX_BUNDLE_CERTS));
        }
    }
    if out.is_empty() {
        return Err(CertError::Pem("no certificate found".to_owned()));
    }
    Ok(out)
}

/// Joins certificates into one PEM bundle.
pub fn bundle_pem(certs: &[CertificateDer<'_>]) -> String {
    certs.iter().map(|der| der_to_pem(der)).collect()
}

fn der_to_pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::with_capacity(body.len() + body.len() / 64 + 64);
    out.push_str("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// Hex SHA-256 of a CA bundle's PEM text: upstream's `olmcahash` annotation.
pub fn ca_hash(ca_bundle_pem: &str) -> String {
    hex(&Sha256::digest(ca_bundle_pem.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of a certificate's DER.
pub fn fingerprint(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

fn parse_one(der: &[u8]) -> Result<X509Certificate<'_>, CertError> {
    X509Certificate::from_der(der)
        .map(|(_, cert)| cert)
        .map_err(|e| CertError::X509(e.to_string()))
}

fn validity(cert: &X509Certificate<'_>) -> Validity {
    Validity {
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
    }
}

fn covers(cert: &X509Certificate<'_>, hosts: &[String]) -> bool {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return hosts.is_empty();
    };
    let names: Vec<String> = san
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            x509_parser::extensions::GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            x509_parser::extensions::GeneralName::IPAddress(ip) => ip_text(ip),
            _ => None,
        })
        .collect();
    hosts.iter().all(|host| names.iter().any(|n| n == host))
}

fn ip_text(raw: &[u8]) -> Option<String> {
    match raw.len() {
        4 => Some(std::net::Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]).to_string()),
        16 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(raw);
            Some(std::net::Ipv6Addr::from(octets).to_string())
        }
        _ => None,
    }
}

impl Material {
    /// Reads stored material into facts; anything unusable becomes
    /// [`Observed::Invalid`] with the reason, never an error.
    pub fn observe(&self, hosts: &[String]) -> Observed {
        match self.facts(hosts) {
            Ok(facts) => Observed::Valid(facts),
            Err(err) => Observed::Invalid(err.to_string()),
        }
    }

    /// [`Material::observe`] for optional material.
    pub fn observe_stored(stored: Option<&Self>, hosts: &[String]) -> Observed {
        stored.map_or(Observed::Missing, |m| m.observe(hosts))
    }

    fn facts(&self, hosts: &[String]) -> Result<CertFacts, CertError> {
        let ca_ders = parse_certificates(&self.ca_bundle_pem)?;
        let serving_ders = parse_certificates(&self.cert_pem)?;
        let ca_key = key_pair(&self.ca_key_pem)?;
        let serving_key = key_pair(&self.key_pem)?;
        let cas: Vec<X509Certificate<'_>> = ca_ders
            .iter()
            .map(|der| parse_one(der))
            .collect::<Result<_, _>>()?;
        let serving = parse_one(&serving_ders[0])?;
        if serving.public_key().raw != serving_key.subject_public_key_info().as_slice() {
            return Err(CertError::KeyMismatch("serving certificate"));
        }
        let signing = cas
            .iter()
            .position(|ca| ca.public_key().raw == ca_key.subject_public_key_info().as_slice())
            .ok_or(CertError::KeyMismatch("ca bundle"))?;
        let issuer = cas.iter().position(|ca| {
            ca.is_ca()
                && serving.issuer() == ca.subject()
                && serving.verify_signature(Some(ca.public_key())).is_ok()
        });
        Ok(CertFacts {
            cas: cas
                .iter()
                .zip(&ca_ders)
                .map(|(ca, der)| CaFacts {
                    fingerprint: fingerprint(der),
                    validity: validity(ca),
                })
                .collect(),
            signing,
            serving: ServingFacts {
                validity: validity(&serving),
                issuer,
                covers_hosts: covers(&serving, hosts),
            },
        })
    }

    /// The served certificate's expiry, when it parses.
    pub fn serving_not_after(&self) -> Option<SystemTime> {
        let ders = parse_certificates(&self.cert_pem).ok()?;
        let cert = parse_one(&ders[0]).ok()?;
        Some(system_time(validity(&cert).not_after))
    }

    /// The earliest expiry among the bundle's CAs, when they parse.
    pub fn ca_not_after(&self) -> Option<SystemTime> {
        let ders = parse_certificates(&self.ca_bundle_pem).ok()?;
        ders.iter()
            .filter_map(|der| parse_one(der).ok().map(|c| validity(&c).not_after))
            .max()
            .map(system_time)
    }
}

fn key_pair(pem: &str) -> Result<KeyPair, CertError> {
    if pem.len() > MAX_PEM_BYTES {
        return Err(CertError::TooLarge(pem.len()));
    }
    KeyPair::from_pem(pem).map_err(|e| CertError::Key(e.to_string()))
}

fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    // A positive integer of at most 20 octets, as RFC 5280 asks.
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;
    SerialNumber::from_slice(&bytes)
}

fn offset_time(seconds: i64) -> Result<time::OffsetDateTime, CertError> {
    time::OffsetDateTime::from_unix_timestamp(seconds)
        .map_err(|e| CertError::Issue(format!("time out of range: {e}")))
}

struct NewCa {
    pem: String,
    key: KeyPair,
    not_after: i64,
}

fn new_ca(now: i64, policy: &RotationPolicy, profile: &Profile) -> Result<NewCa, CertError> {
    let serial = random_serial();
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(
        DnType::CommonName,
        format!("{CA_COMMON_NAME_PREFIX}-{}", hex(&serial.to_bytes())),
    );
    params
        .distinguished_name
        .push(DnType::OrganizationName, profile.organization.clone());
    params.serial_number = Some(serial);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let not_after = now.saturating_add(lifetime_secs(policy.ca_lifetime));
    params.not_before = offset_time(now)?;
    params.not_after = offset_time(not_after)?;
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(NewCa {
        pem: cert.pem(),
        key,
        not_after,
    })
}

fn lifetime_secs(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// Issues a serving certificate valid from `now` for the serving lifetime,
/// never past `ca_not_after`.
fn issue_serving(
    issuer: &Issuer<'_, KeyPair>,
    ca_not_after: i64,
    now: i64,
    policy: &RotationPolicy,
    profile: &Profile,
) -> Result<(String, String), CertError> {
    let mut params = CertificateParams::new(profile.hosts.clone())?;
    if let Some(first) = profile.hosts.first() {
        params
            .distinguished_name
            .push(DnType::CommonName, first.clone());
    }
    params
        .distinguished_name
        .push(DnType::OrganizationName, profile.organization.clone());
    params.serial_number = Some(random_serial());
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = offset_time(now)?;
    params.not_after = offset_time(
        now.saturating_add(lifetime_secs(policy.serving_lifetime))
            .min(ca_not_after),
    )?;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Makes a fresh CA and serving certificate.
pub fn bootstrap(
    now: SystemTime,
    policy: &RotationPolicy,
    profile: &Profile,
) -> Result<Material, CertError> {
    let now = unix_seconds(now);
    let ca = new_ca(now, policy, profile)?;
    let key_pem = ca.key.serialize_pem();
    let issuer = Issuer::from_ca_cert_pem(&ca.pem, ca.key)?;
    let (cert_pem, serving_key) = issue_serving(&issuer, ca.not_after, now, policy, profile)?;
    Ok(Material {
        ca_bundle_pem: ca.pem,
        ca_key_pem: key_pem,
        cert_pem,
        key_pem: serving_key,
    })
}

/// Carries out `decision` on `current` (which it was decided from) and
/// returns the new material, or `None` for [`Decision::Keep`].
pub fn apply(
    decision: &Decision,
    current: Option<&Material>,
    now: SystemTime,
    policy: &RotationPolicy,
    profile: &Profile,
) -> Result<Option<Material>, CertError> {
    let current = match (decision, current) {
        (Decision::Keep { .. }, _) => return Ok(None),
        (Decision::Bootstrap(_), _) | (_, None) => {
            return bootstrap(now, policy, profile).map(Some);
        }
        (_, Some(current)) => current,
    };
    let facts = current.facts(&profile.hosts)?;
    let ca_ders = parse_certificates(&current.ca_bundle_pem)?;
    let signing_der = &ca_ders[facts.signing];
    let signing_not_after = facts.cas[facts.signing].validity.not_after;
    let now_s = unix_seconds(now);
    match decision {
        Decision::RenewServing(_) => {
            let issuer = Issuer::from_ca_cert_der(signing_der, key_pair(&current.ca_key_pem)?)?;
            let (cert_pem, key_pem) =
                issue_serving(&issuer, signing_not_after, now_s, policy, profile)?;
            Ok(Some(Material {
                cert_pem,
                key_pem,
                ..current.clone()
            }))
        }
        Decision::RotateCa => {
            let old = Issuer::from_ca_cert_der(signing_der, key_pair(&current.ca_key_pem)?)?;
            let (cert_pem, key_pem) =
                issue_serving(&old, signing_not_after, now_s, policy, profile)?;
            let ca = new_ca(now_s, policy, profile)?;
            let mut bundle = ca.pem;
            bundle.push_str(&current.ca_bundle_pem);
            Ok(Some(Material {
                ca_bundle_pem: bundle,
                ca_key_pem: ca.key.serialize_pem(),
                cert_pem,
                key_pem,
            }))
        }
        Decision::RetireCa(retired) => {
            let kept: Vec<CertificateDer<'_>> = ca_ders
                .iter()
                .filter(|der| !retired.contains(&fingerprint(der)))
                .cloned()
                .collect();
            Ok(Some(Material {
                ca_bundle_pem: bundle_pem(&kept),
                ..current.clone()
            }))
        }
        Decision::Keep { .. } | Decision::Bootstrap(_) => Ok(None),
    }
}

/// The outcome of [`reconcile`].
#[derive(Debug, Clone)]
pub struct Reconciled {
    /// The material to store and serve.
    pub material: Material,
    /// The steps carried out, in order (empty when the stored material was
    /// kept).
    pub steps: Vec<Decision>,
    /// When to decide again at the latest (Unix seconds).
    pub next: crate::policy::UnixSeconds,
}

impl Reconciled {
    /// Whether the material changed.
    pub fn changed(&self) -> bool {
        !self.steps.is_empty()
    }
}

/// Upper bound on the steps of one [`reconcile`]: a bootstrap, a renewal and
/// a retirement are the most one pass needs.
pub const MAX_RECONCILE_STEPS: usize = 4;

/// Decides and applies until nothing is left to do (at most
/// [`MAX_RECONCILE_STEPS`]).
pub fn reconcile(
    stored: Option<&Material>,
    now: SystemTime,
    policy: &RotationPolicy,
    profile: &Profile,
) -> Result<Reconciled, CertError> {
    let mut current = stored.cloned();
    let mut steps = Vec::new();
    for _ in 0..MAX_RECONCILE_STEPS {
        let observed = Material::observe_stored(current.as_ref(), &profile.hosts);
        let decision = crate::policy::decide(&observed, now, policy);
        if let Decision::Keep { next } = decision
            && let Some(material) = current
        {
            return Ok(Reconciled {
                material,
                steps,
                next,
            });
        }
        current = apply(&decision, current.as_ref(), now, policy, profile)?;
        steps.push(decision);
    }
    let material = current.ok_or_else(|| CertError::Issue("no material".to_owned()))?;
    Ok(Reconciled {
        material,
        steps,
        next: unix_seconds(now),
    })
}
