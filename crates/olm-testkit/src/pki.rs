//! Certificates for one test control plane: a cluster CA, the API server's
//! serving certificate, an admin client certificate, the service-account
//! signing key, and a separate front-proxy CA and client certificate so that
//! aggregated API servers (packageserver) can be tested through the real
//! aggregation layer.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::Error;

/// The name the front-proxy client certificate carries; the API server only
/// trusts request headers from a client with this name.
pub(crate) const FRONT_PROXY_CLIENT_NAME: &str = "front-proxy-client";

/// Paths of the files [`generate`] wrote.
#[derive(Debug, Clone)]
pub(crate) struct Pki {
    pub(crate) ca_cert: PathBuf,
    pub(crate) serving_cert: PathBuf,
    pub(crate) serving_key: PathBuf,
    pub(crate) admin_cert: PathBuf,
    pub(crate) admin_key: PathBuf,
    pub(crate) service_account_key: PathBuf,
    pub(crate) service_account_public_key: PathBuf,
    pub(crate) front_proxy_ca_cert: PathBuf,
    pub(crate) front_proxy_client_cert: PathBuf,
    pub(crate) front_proxy_client_key: PathBuf,
}

struct Authority {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn authority(common_name: &str) -> Result<Authority, Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(Authority {
        pem: cert.pem(),
        issuer: Issuer::new(params, key),
    })
}

fn leaf(
    authority: &Authority,
    common_name: &str,
    organization: Option<&str>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> Result<(String, String), Error> {
    let mut params = CertificateParams::new(
        names
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>(),
    )?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    if let Some(organization) = organization {
        params
            .distinguished_name
            .push(DnType::OrganizationName, organization);
    }
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &authority.issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn write(dir: &Path, name: &str, contents: &str) -> Result<PathBuf, Error> {
    let path = dir.join(name);
    std::fs::write(&path, contents).map_err(|source| Error::io(&path, source))?;
    Ok(path)
}

/// Generates every certificate and key into `dir`.
pub(crate) fn generate(dir: &Path) -> Result<Pki, Error> {
    let ca = authority("olm-testkit-ca")?;
    let (serving_cert, serving_key) = leaf(
        &ca,
        "kube-apiserver",
        None,
        &[
            "127.0.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "10.0.0.1",
            crate::node::NODE_IP,
        ],
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let (admin_cert, admin_key) = leaf(
        &ca,
        "olm-testkit-admin",
        Some("system:masters"),
        &[],
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    let front_proxy_ca = authority("olm-testkit-front-proxy-ca")?;
    let (proxy_cert, proxy_key) = leaf(
        &front_proxy_ca,
        FRONT_PROXY_CLIENT_NAME,
        None,
        &[],
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    let service_account = KeyPair::generate()?;
    Ok(Pki {
        ca_cert: write(dir, "ca.crt", &ca.pem)?,
        serving_cert: write(dir, "apiserver.crt", &serving_cert)?,
        serving_key: write(dir, "apiserver.key", &serving_key)?,
        admin_cert: write(dir, "admin.crt", &admin_cert)?,
        admin_key: write(dir, "admin.key", &admin_key)?,
        service_account_key: write(dir, "sa.key", &service_account.serialize_pem())?,
        service_account_public_key: write(dir, "sa.pub", &service_account.public_key_pem())?,
        front_proxy_ca_cert: write(dir, "front-proxy-ca.crt", &front_proxy_ca.pem)?,
        front_proxy_client_cert: write(dir, "front-proxy-client.crt", &proxy_cert)?,
        front_proxy_client_key: write(dir, "front-proxy-client.key", &proxy_key)?,
    })
}
