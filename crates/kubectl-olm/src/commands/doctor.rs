//! `doctor`: reads what the incident checks of [`crate::decide::doctor`]
//! need, prints the findings, and with `--fix` carries out the safe fixes
//! (deleting failed InstallPlans and stale unpack records) after showing
//! them.

use std::time::SystemTime;

use anyhow::{Context as _, Result};
use k8s_openapi::{
    api::{
        admissionregistration::v1::{
            MutatingWebhookConfiguration, ServiceReference, ValidatingWebhookConfiguration,
            WebhookClientConfig,
        },
        batch::v1::Job,
        core::v1::{ConfigMap, Event, Secret},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};
use olm_api::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::InstallPlan, labels,
    olm_config::OLMConfig, operator_group::OperatorGroup, subscription::Subscription,
};

use crate::{
    cluster::ClusterArgs,
    decide::doctor::{
        self, CrdStatusSchema, DEFAULT_COPIED_CSV_THRESHOLD, Finding, Observed, RejectedStatus,
        ServedApi, UnpackRecord,
    },
    failure,
    output::{self, Format, FormatArg},
};

/// Examples for `--help`.
pub(crate) const HELP: &str = "Examples:
  # Look for trouble everywhere
  kubectl olm doctor

  # One namespace, as JSON
  kubectl olm doctor -n team-a -o json

  # Carry out the safe fixes it lists (failed InstallPlans, stale unpack records)
  kubectl olm doctor --fix

Checks: failed-install-plan and stale-unpack-record (the staging-registry incident),
serving-certificate (APIServices and OLM's webhooks) and apiservice-unavailable (the
packageserver incident), status-schema and status-rejected (the rollback incident),
catalog-unhealthy, catalog-promotion-blocked, copied-csvs, operator-group. --fix only deletes objects OLM plans or pulls again; it prints
each one first.

Exit status: 0 no findings (or, with --fix, none left); 1 findings; 5 the cluster could not
be reached or refused a request.";

/// Flags of `doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Carry out the safe fixes.
    #[arg(long)]
    pub fix: bool,
    /// How many copied CSVs count as a load.
    #[arg(long, default_value_t = DEFAULT_COPIED_CSV_THRESHOLD)]
    pub copied_csv_threshold: usize,
    #[command(flatten)]
    pub format: FormatArg,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Runs `doctor`.
pub(crate) async fn run(args: &Args) -> Result<()> {
    let cluster = args.cluster.connect().await?;
    let client = &cluster.client;
    // `-n` narrows the look to one namespace; without it, every namespace.
    let scope = args.cluster.namespace.as_deref();

    let subscriptions: Vec<Subscription> = super::list(client, scope, None).await?;
    let plans: Vec<InstallPlan> = super::list(client, scope, None).await?;
    let csvs: Vec<ClusterServiceVersion> = super::list(client, scope, None).await?;
    let catalogs: Vec<CatalogSource> = super::list(client, scope, None).await?;
    let groups: Vec<OperatorGroup> = super::list(client, scope, None).await?;
    let unpack_records = unpack_records(client, scope).await?;
    let mut served_apis = served_apis(client, scope).await?;
    served_apis.extend(served_webhooks(client, scope).await?);
    let rejected_statuses = rejected_statuses(client, scope).await?;
    let crd_schemas = crd_schemas(client).await?;
    let copied_csvs_disabled = Api::<OLMConfig>::all(client.clone())
        .get_opt("cluster")
        .await
        .ok()
        .flatten()
        .is_some_and(|config| config.copied_csvs_disabled());

    let found = doctor::findings(Observed {
        subscriptions: &subscriptions,
        plans: &plans,
        csvs: &csvs,
        catalogs: &catalogs,
        groups: &groups,
        unpack_records: &unpack_records,
        served_apis: &served_apis,
        crd_schemas: &crd_schemas,
        rejected_statuses: &rejected_statuses,
        copied_csvs_disabled,
        copied_csv_threshold: args.copied_csv_threshold,
        now: SystemTime::now(),
    });
    print(&found, args.format.output)?;
    if args.fix {
        let fixes: Vec<_> = found.iter().filter_map(|f| f.fix.clone()).collect();
        if !fixes.is_empty() {
            println!("fixing {} finding(s):", fixes.len());
        }
        for fix in &fixes {
            println!(
                "  deleting {} {}/{}",
                fix.kind.to_ascii_lowercase(),
                fix.namespace,
                fix.name
            );
            let params = DeleteParams::background();
            let result = match fix.kind {
                "InstallPlan" => Api::<InstallPlan>::namespaced(client.clone(), &fix.namespace)
                    .delete(&fix.name, &params)
                    .await
                    .map(|_| ()),
                "ConfigMap" => Api::<ConfigMap>::namespaced(client.clone(), &fix.namespace)
                    .delete(&fix.name, &params)
                    .await
                    .map(|_| ()),
                _ => Api::<Job>::namespaced(client.clone(), &fix.namespace)
                    .delete(&fix.name, &params)
                    .await
                    .map(|_| ()),
            };
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    return Err(error).with_context(|| {
                        format!("deleting {} {}/{}", fix.kind, fix.namespace, fix.name)
                    });
                }
            }
        }
        let left = found.iter().filter(|f| f.fix.is_none()).count();
        if left > 0 {
            return failure::failed(format!("{left} finding(s) need a person: see NEXT above"));
        }
        return Ok(());
    }
    if found.is_empty() {
        Ok(())
    } else {
        failure::failed(format!(
            "{} finding(s); `kubectl olm doctor --fix` carries out the {} marked FIX",
            found.len(),
            found.iter().filter(|f| f.fix.is_some()).count()
        ))
    }
}

fn print(found: &[Finding], format: Format) -> Result<()> {
    if format != Format::Table {
        return output::print_data(&found, format);
    }
    if found.is_empty() {
        println!("no findings");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|f| {
            vec![
                f.check.to_owned(),
                format!("{:?}", f.severity),
                f.object.clone(),
                if f.fix.is_some() { "yes" } else { "" }.to_owned(),
                f.problem.replace('\n', " "),
                f.next.clone(),
            ]
        })
        .collect();
    print!(
        "{}",
        output::table(
            &["CHECK", "SEVERITY", "OBJECT", "FIX", "PROBLEM", "NEXT"],
            &rows
        )
    );
    Ok(())
}

/// bundle-unpacker's ConfigMaps and upstream's unpack Jobs.
async fn unpack_records(client: &Client, scope: Option<&str>) -> Result<Vec<UnpackRecord>> {
    let mut out = Vec::new();
    for map in super::list::<ConfigMap>(client, scope, Some(labels::BUNDLE_UNPACK_REF)).await? {
        let annotations = map.metadata.annotations.clone().unwrap_or_default();
        let failure = annotations
            .get(olm_catalog::unpacked::FAILURE_REASON)
            .map(|reason| {
                let message = annotations
                    .get(olm_catalog::unpacked::FAILURE_MESSAGE)
                    .cloned()
                    .unwrap_or_default();
                format!("{reason}: {message}")
            });
        out.push(UnpackRecord {
            kind: "ConfigMap",
            namespace: map.metadata.namespace.unwrap_or_default(),
            name: map.metadata.name.unwrap_or_default(),
            failure,
        });
    }
    for job in super::list::<Job>(client, scope, Some(labels::BUNDLE_UNPACK_REF)).await? {
        let status = job.status.unwrap_or_default();
        let failed = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Failed" && c.status == "True");
        out.push(UnpackRecord {
            kind: "Job",
            namespace: job.metadata.namespace.unwrap_or_default(),
            name: job.metadata.name.unwrap_or_default(),
            failure: failed.map(|c| {
                format!(
                    "{}: {}",
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default()
                )
            }),
        });
    }
    Ok(out)
}

/// APIServices served by a Service in scope, with the Secret
/// `<service>-cert` (OLM's naming) when there is one.
async fn served_apis(client: &Client, scope: Option<&str>) -> Result<Vec<ServedApi>> {
    let services = Api::<APIService>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing APIServices")?
        .items;
    let mut out = Vec::new();
    for api in services {
        let spec = api.spec.clone().unwrap_or_default();
        let Some(service) = spec.service.clone() else {
            continue;
        };
        let namespace = service.namespace.clone().unwrap_or_default();
        let name = service.name.clone().unwrap_or_default();
        if scope.is_some_and(|s| s != namespace) {
            continue;
        }
        let serving = serving_certificate(client, &namespace, &name).await;
        let unavailable = api
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Available" && c.status != "True")
            .map(|c| {
                format!(
                    "{}: {}",
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default()
                )
            });
        out.push(ServedApi {
            name: format!("APIService {}", api.metadata.name.unwrap_or_default()),
            service: format!("{namespace}/{name}"),
            ca_bundle: spec
                .ca_bundle
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                .unwrap_or_default(),
            serving,
            unavailable,
        });
    }
    Ok(out)
}

/// The Secret `<service>-cert` of a Service and its `tls.crt`, when it
/// exists (OLM's naming for the certificates it issues).
async fn serving_certificate(
    client: &Client,
    namespace: &str,
    service: &str,
) -> Option<(String, String)> {
    let secret_name = format!("{service}-cert");
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(&secret_name)
        .await
        .ok()
        .flatten()?;
    let crt = secret.data?.get("tls.crt").cloned()?;
    Some((
        format!("{namespace}/{secret_name}"),
        String::from_utf8_lossy(&crt.0).into_owned(),
    ))
}

/// A webhook of a configuration: its configuration's kind and name, its own
/// name, its Service and its caBundle.
type Hook = (String, String, ServiceReference, Vec<u8>);

/// The webhooks of one configuration that a Service serves.
fn served_by_services(
    kind: &str,
    name: Option<String>,
    webhooks: impl Iterator<Item = (String, WebhookClientConfig)>,
) -> Vec<Hook> {
    let kind_name = format!("{kind} {}", name.unwrap_or_default());
    webhooks
        .filter_map(|(hook, config)| {
            let service = config.service?;
            let bundle = config.ca_bundle.map(|b| b.0).unwrap_or_default();
            Some((kind_name.clone(), hook, service, bundle))
        })
        .collect()
}

/// The webhooks of OLM's webhook configurations (label `olm.owner`) served
/// by a Service in scope.
async fn served_webhooks(client: &Client, scope: Option<&str>) -> Result<Vec<ServedApi>> {
    let owned = ListParams::default().labels(labels::OWNER);
    let mut hooks: Vec<Hook> = Vec::new();
    for configuration in Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&owned)
        .await
        .context("listing ValidatingWebhookConfigurations")?
        .items
    {
        hooks.extend(served_by_services(
            "ValidatingWebhookConfiguration",
            configuration.metadata.name,
            configuration
                .webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|h| (h.name, h.client_config)),
        ));
    }
    for configuration in Api::<MutatingWebhookConfiguration>::all(client.clone())
        .list(&owned)
        .await
        .context("listing MutatingWebhookConfigurations")?
        .items
    {
        hooks.extend(served_by_services(
            "MutatingWebhookConfiguration",
            configuration.metadata.name,
            configuration
                .webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|h| (h.name, h.client_config)),
        ));
    }
    let mut out = Vec::new();
    for (kind_name, hook, service, bundle) in hooks {
        if scope.is_some_and(|s| s != service.namespace) {
            continue;
        }
        out.push(ServedApi {
            name: format!("{kind_name} (webhook {hook})"),
            service: format!("{}/{}", service.namespace, service.name),
            ca_bundle: String::from_utf8_lossy(&bundle).into_owned(),
            serving: serving_certificate(client, &service.namespace, &service.name).await,
            unavailable: None,
        });
    }
    Ok(out)
}

/// The `StatusRejected` Warning events OLM's services published.
async fn rejected_statuses(client: &Client, scope: Option<&str>) -> Result<Vec<RejectedStatus>> {
    let api: Api<Event> = match scope {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let events = api
        .list(&ListParams::default().fields("reason=StatusRejected"))
        .await
        .context("listing StatusRejected events")?
        .items;
    Ok(events
        .into_iter()
        .map(|event| {
            let regarding = &event.involved_object;
            let kind = regarding.kind.as_deref().unwrap_or_default();
            let name = regarding.name.as_deref().unwrap_or_default();
            let object = match regarding.namespace.as_deref().filter(|n| !n.is_empty()) {
                Some(namespace) => format!("{kind} {namespace}/{name}"),
                None => format!("{kind} {name}"),
            };
            let count = event
                .count
                .or_else(|| event.series.as_ref().and_then(|s| s.count))
                .unwrap_or(1);
            RejectedStatus {
                object,
                message: event.message.unwrap_or_default(),
                count,
            }
        })
        .collect())
}

/// The status schema of every version of OLM's CRDs.
async fn crd_schemas(client: &Client) -> Result<Vec<CrdStatusSchema>> {
    let crds = Api::<CustomResourceDefinition>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing CRDs")?
        .items;
    let mut out = Vec::new();
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let ours =
            crd.spec.group == "operators.coreos.com" || name == "operatorhubs.config.openshift.io";
        if !ours {
            continue;
        }
        for version in &crd.spec.versions {
            let status = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| s.properties.as_ref())
                .and_then(|p| p.get("status"))
                .and_then(|s| serde_json::to_value(s).ok());
            if let Some(status) = status {
                out.push(CrdStatusSchema {
                    crd: name.clone(),
                    version: version.name.clone(),
                    status,
                });
            }
        }
    }
    Ok(out)
}
