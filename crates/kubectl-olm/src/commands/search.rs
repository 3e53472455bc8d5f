//! `search` (alias `list-available`): the packages the cluster's catalogs
//! offer, with their channels and the version at the head of each, read
//! from packageserver's PackageManifests (`packages.operators.coreos.com/v1`)
//! of a namespace (its own catalogs and the global ones).

use anyhow::Result;
use kube::{Api, api::ListParams};
use olm_api::package_manifest::{PackageChannel, PackageManifest};
use serde::Serialize;

use crate::{
    cluster::ClusterArgs,
    output::{self, Format, FormatArg},
};

/// Examples for `--help`.
pub(crate) const HELP: &str = "\
Examples:
  # Every package the catalogs of the current namespace offer
  kubectl olm search

  # Packages whose name, display name or catalog contains \"etcd\", as YAML
  kubectl olm search etcd -o yaml

CHANNELS lists each channel with the version a new Subscription to it
installs, e.g. `stable (1.2.0)`; DEPRECATED says what the catalog
deprecates. search needs packageserver (the PackageManifest API).

Exit status: see kubectl olm --help.";

/// Flags of `search`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Show only packages whose name, display name or catalog contains this
    /// (ignoring case).
    #[arg(value_name = "TERM")]
    pub term: Option<String>,
    #[command(flatten)]
    pub format: FormatArg,
}

/// One package of one catalog, as `search` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Package {
    pub package: String,
    pub display_name: String,
    pub catalog: String,
    pub catalog_namespace: String,
    pub default_channel: String,
    pub channels: Vec<Channel>,
    /// The catalog's deprecation message for the whole package, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
}

/// One channel of a package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Channel {
    pub name: String,
    /// The CSV at the head of the channel: what a new Subscription installs.
    #[serde(rename = "currentCSV")]
    pub current_csv: String,
    /// Its version, when the catalog says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The catalog's deprecation message for the channel, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
}

/// Runs `search`.
pub(crate) async fn run(args: &Args) -> Result<()> {
    let cluster = args.cluster.connect().await?;
    let api: Api<PackageManifest> = Api::namespaced(cluster.client, &cluster.namespace);
    let manifests = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(error) if not_served(&error) => {
            return Err(anyhow::Error::new(error).context(
                "the PackageManifest API (packages.operators.coreos.com/v1) is not served: \
                 check that packageserver runs and is Available with \
                 `kubectl get apiservice v1.packages.operators.coreos.com`",
            ));
        }
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!(
                "listing PackageManifests in namespace {}",
                cluster.namespace
            )));
        }
    };
    let packages = packages(&manifests, args.term.as_deref());
    match args.format.output {
        Format::Table if packages.is_empty() => {
            let what = args
                .term
                .as_deref()
                .map(|t| format!(" matching {t:?}"))
                .unwrap_or_default();
            eprintln!(
                "No packages{what} in the catalogs of namespace {}; see kubectl get catalogsources -A.",
                cluster.namespace
            );
            Ok(())
        }
        Format::Table => {
            print!("{}", render(&packages));
            Ok(())
        }
        format => output::print_data(&packages, format),
    }
}

/// Whether the API server does not serve the PackageManifest API: not
/// registered (404), or registered with packageserver unavailable (503).
fn not_served(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(response) if response.code == 404 || response.code == 503)
}

/// The packages of `manifests` matching `term` (a case-insensitive
/// substring of the package name, its display name, or its catalog's name
/// or display name), sorted by package and catalog.
pub(crate) fn packages(manifests: &[PackageManifest], term: Option<&str>) -> Vec<Package> {
    let term = term.map(str::to_lowercase).filter(|t| !t.is_empty());
    let mut packages: Vec<Package> = manifests
        .iter()
        .filter(|manifest| {
            let Some(term) = &term else {
                return true;
            };
            let status = &manifest.status;
            [
                status.package_name.as_str(),
                &display_name(manifest),
                &status.catalog_source,
                &status.catalog_source_display_name,
            ]
            .iter()
            .any(|field| field.to_lowercase().contains(term.as_str()))
        })
        .map(|manifest| {
            let status = &manifest.status;
            Package {
                package: status.package_name.clone(),
                display_name: display_name(manifest),
                catalog: status.catalog_source.clone(),
                catalog_namespace: status.catalog_source_namespace.clone(),
                default_channel: status
                    .effective_default_channel()
                    .map(|c| c.name.clone())
                    .unwrap_or_default(),
                channels: status.channels.iter().map(channel).collect(),
                deprecated: status.deprecation.as_ref().map(|d| d.message.clone()),
            }
        })
        .collect();
    packages.sort_by(|a, b| {
        (&a.package, &a.catalog_namespace, &a.catalog).cmp(&(
            &b.package,
            &b.catalog_namespace,
            &b.catalog,
        ))
    });
    packages
}

/// The display name of a package: its default channel head's.
fn display_name(manifest: &PackageManifest) -> String {
    manifest
        .status
        .effective_default_channel()
        .and_then(|c| c.current_csv_desc.display_name.clone())
        .unwrap_or_default()
}

fn channel(channel: &PackageChannel) -> Channel {
    let version = channel
        .current_csv_desc
        .version
        .as_ref()
        .map(|v| v.0.clone())
        .or_else(|| {
            channel
                .entries
                .iter()
                .find(|e| e.name == channel.current_csv)
                .and_then(|e| e.version.clone())
        })
        .filter(|v| !v.is_empty());
    Channel {
        name: channel.name.clone(),
        current_csv: channel.current_csv.clone(),
        version,
        deprecated: channel.deprecation.as_ref().map(|d| d.message.clone()),
    }
}

/// The table: PACKAGE, CATALOG, DEFAULT CHANNEL, CHANNELS, DEPRECATED.
pub(crate) fn render(packages: &[Package]) -> String {
    let cells: Vec<Vec<String>> = packages
        .iter()
        .map(|package| {
            let channels: Vec<String> = package
                .channels
                .iter()
                .map(|c| {
                    let head = c.version.as_deref().unwrap_or(&c.current_csv);
                    if head.is_empty() {
                        c.name.clone()
                    } else {
                        format!("{} ({head})", c.name)
                    }
                })
                .collect();
            vec![
                package.package.clone(),
                package.catalog.clone(),
                package.default_channel.clone(),
                channels.join(", "),
                deprecation(package),
            ]
        })
        .collect();
    output::table(
        &[
            "PACKAGE",
            "CATALOG",
            "DEFAULT CHANNEL",
            "CHANNELS",
            "DEPRECATED",
        ],
        &cells,
    )
}

/// What the catalog deprecates: the package (with its message), or the
/// channels named.
fn deprecation(package: &Package) -> String {
    if let Some(message) = &package.deprecated {
        return if message.is_empty() {
            "package".to_owned()
        } else {
            format!("package: {}", one_line(message))
        };
    }
    let channels: Vec<&str> = package
        .channels
        .iter()
        .filter(|c| c.deprecated.is_some())
        .map(|c| c.name.as_str())
        .collect();
    if channels.is_empty() {
        String::new()
    } else {
        format!("channels: {}", channels.join(", "))
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::*;

    /// A PackageManifest of `package` in catalog `catalog`, with `channels`
    /// and further status fields.
    fn manifest(package: &str, catalog: &str, channels: Value, extra: Value) -> PackageManifest {
        let mut status = json!({
            "catalogSource": catalog, "catalogSourceNamespace": "catalog-ns",
            "catalogSourceDisplayName": format!("{catalog} display"),
            "packageName": package, "channels": channels, "defaultChannel": "stable",
        });
        if let (Some(status), Some(extra)) = (status.as_object_mut(), extra.as_object()) {
            status.extend(extra.clone());
        }
        serde_json::from_value(json!({
            "apiVersion": "packages.operators.coreos.com/v1", "kind": "PackageManifest",
            "metadata": {"name": package, "namespace": "tenant-ns"},
            "spec": {}, "status": status,
        }))
        .unwrap()
    }

    fn catalog_contents() -> Vec<PackageManifest> {
        vec![
            manifest(
                "widget-operator",
                "community-index",
                json!([
                    {"name": "stable", "currentCSV": "widget-operator.v1.2.0",
                     "currentCSVDesc": {"displayName": "Widget Maker", "version": "1.2.0"}},
                    {"name": "alpha", "currentCSV": "widget-operator.v2.0.0-alpha",
                     "currentCSVDesc": {},
                     "entries": [{"name": "widget-operator.v2.0.0-alpha", "version": "2.0.0-alpha"}],
                     "deprecation": {"message": "alpha is gone"}},
                ]),
                json!({}),
            ),
            manifest(
                "gear-operator",
                "gear-index",
                json!([{"name": "stable", "currentCSV": "gear-operator.v0.1.0", "currentCSVDesc": {}}]),
                json!({"deprecation": {"message": "use sprocket-operator\ninstead"}}),
            ),
        ]
    }

    #[test]
    fn terms_match_package_display_name_and_catalog_ignoring_case() {
        let manifests = catalog_contents();
        let cases = [
            (None, vec!["gear-operator", "widget-operator"]),
            (Some(""), vec!["gear-operator", "widget-operator"]),
            (Some("WIDGET"), vec!["widget-operator"]),
            (Some("maker"), vec!["widget-operator"]),
            (Some("gear-index"), vec!["gear-operator"]),
            (
                Some("INDEX DISPLAY"),
                vec!["gear-operator", "widget-operator"],
            ),
            (Some("sprocket"), vec![]),
        ];
        for (term, want) in cases {
            let found: Vec<String> = packages(&manifests, term)
                .into_iter()
                .map(|p| p.package)
                .collect();
            assert_eq!(found, want, "{term:?}");
        }
    }

    #[test]
    fn the_table_shows_channel_heads_and_deprecations() {
        let table = render(&packages(&catalog_contents(), None));
        assert_eq!(
            table,
            "PACKAGE          CATALOG          DEFAULT CHANNEL  CHANNELS                             DEPRECATED\n\
             gear-operator    gear-index       stable           stable (gear-operator.v0.1.0)        package: use sprocket-operator instead\n\
             widget-operator  community-index  stable           stable (1.2.0), alpha (2.0.0-alpha)  channels: alpha\n"
        );
    }

    #[test]
    fn packages_serialize_for_tools() {
        let found = packages(&catalog_contents(), Some("widget"));
        assert_eq!(
            serde_json::to_value(&found).unwrap(),
            json!([{
                "package": "widget-operator", "displayName": "Widget Maker",
                "catalog": "community-index", "catalogNamespace": "catalog-ns",
                "defaultChannel": "stable",
                "channels": [
                    {"name": "stable", "currentCSV": "widget-operator.v1.2.0", "version": "1.2.0"},
                    {"name": "alpha", "currentCSV": "widget-operator.v2.0.0-alpha",
                     "version": "2.0.0-alpha", "deprecated": "alpha is gone"},
                ],
            }])
        );
    }

    #[test]
    fn unserved_api_is_told_apart_from_other_errors() {
        let error = |code| {
            kube::Error::Api(
                kube::core::Status::failure("not served", "NotFound")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert!(not_served(&error(404)));
        assert!(not_served(&error(503)));
        assert!(!not_served(&error(403)));
    }
}
