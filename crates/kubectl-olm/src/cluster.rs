//! The connection to a cluster, made as kubectl makes it: the kubeconfig
//! from `--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config` (or the
//! in-cluster ServiceAccount); the context from `--context`, else the
//! current one; the namespace from `-n`, else the context's, else
//! `default`.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use kube::{
    Client,
    config::{KubeConfigOptions, Kubeconfig},
};

/// The connection flags every cluster command takes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ClusterArgs {
    /// The kubeconfig file (default: `KUBECONFIG`, then `~/.kube/config`).
    #[arg(long, global = true, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: the current one).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (default: the context's, then `default`).
    #[arg(short = 'n', long, global = true, value_name = "NAME")]
    pub namespace: Option<String>,
}

/// A client, and the namespace the command works in.
pub(crate) struct Cluster {
    pub client: Client,
    pub namespace: String,
}

impl ClusterArgs {
    /// Connects (no request is made yet).
    pub(crate) async fn connect(&self) -> Result<Cluster> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        // KUBECONFIG may list several files; kubectl merges them, and so
        // does kube's reader when it is left to find them.
        let single = self
            .kubeconfig
            .as_ref()
            .filter(|path| !path.as_os_str().to_string_lossy().contains(':'));
        let config = match single {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .with_context(|| format!("using the kubeconfig {}", path.display()))?
            }
            None => match kube::Config::from_kubeconfig(&options).await {
                Ok(config) => config,
                Err(kubeconfig_error) => kube::Config::incluster().map_err(|_| {
                    anyhow::Error::new(kubeconfig_error)
                        .context("no usable kubeconfig (set KUBECONFIG or pass --kubeconfig)")
                })?,
            },
        };
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config).context("building the Kubernetes client")?;
        Ok(Cluster { client, namespace })
    }
}
