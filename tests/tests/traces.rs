//! One install, one trace: the real catalog-operator, bundle-unpacker and
//! olm-operator binaries, and the catalog's `opm serve`, export spans over
//! OTLP to a real Jaeger, and the
//! span tree of a Subscription's install is read back through Jaeger's query
//! API. The context crosses every hand-off: the InstallPlan's and the CSV's
//! annotations, NATS headers, and the catalog's gRPC metadata.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Instant,
};

use kube::{
    Api,
    api::{Patch, PatchParams},
};
use olm_api::{csv::ClusterServiceVersion, install_plan::InstallPlan};
use olm_e2e::{
    eventually,
    harness::{
        BundleSpec, SecuredNats, ServiceProcess, Setup, WAIT, create_catalog,
        create_operator_group, create_subscription, delete_crds, publish, serve_catalog,
        service_binary, wait_installed,
    },
};
use olm_testkit::jaeger::{Jaeger, Span, Trace};
use serde_json::json;

/// The services of one install, and the catalog's `opm serve`.
const SERVICES: [&str; 4] = ["catalog-operator", "bundle-unpacker", "olm-operator", "opm"];

/// The trace id in an object's traceparent annotation.
fn annotated_trace_id(annotations: Option<&BTreeMap<String, String>>) -> Option<String> {
    let value = annotations?.get(olm_trace::TRACEPARENT_ANNOTATION)?;
    let context = olm_trace::parse_traceparent(value)?;
    Some(context.trace_id().to_string())
}

fn log_file(setup: &Setup, service: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("olm-e2e-{}-{service}.log", setup.namespace()))
}

fn spans_named<'a>(trace: &'a Trace, operation: &str) -> Vec<&'a Span> {
    trace
        .spans
        .iter()
        .filter(|s| s.operation_name == operation)
        .collect()
}

fn parent_of<'a>(trace: &'a Trace, span: &Span) -> Option<&'a Span> {
    let parent = span.parent_span_id.as_deref()?;
    trace.spans.iter().find(|s| s.span_id == parent)
}

/// Whether `ancestor` is `span`'s parent, grandparent, ...
fn descends_from(trace: &Trace, span: &Span, ancestor: &Span) -> bool {
    let mut current = parent_of(trace, span);
    while let Some(parent) = current {
        if parent.span_id == ancestor.span_id {
            return true;
        }
        current = parent_of(trace, parent);
    }
    false
}

/// The span tree, indented: each span's start (seconds from the root's),
/// service and duration.
fn tree(trace: &Trace) -> String {
    fn walk(trace: &Trace, span: &Span, start: u64, depth: usize, out: &mut String) {
        out.push_str(&format!(
            "{:>8.3} s {:indent$}{} [{}] {:?}\n",
            span.start_time_micros.saturating_sub(start) as f64 / 1e6,
            "",
            span.operation_name,
            span.service_name,
            span.duration,
            indent = depth * 2
        ));
        let mut children: Vec<&Span> = trace
            .spans
            .iter()
            .filter(|s| s.parent_span_id.as_deref() == Some(span.span_id.as_str()))
            .collect();
        children.sort_by_key(|s| s.start_time_micros);
        for child in children {
            walk(trace, child, start, depth + 1, out);
        }
    }
    let mut out = String::new();
    for root in trace.spans.iter().filter(|s| s.parent_span_id.is_none()) {
        walk(trace, root, root.start_time_micros, 0, &mut out);
    }
    out
}

/// The whole install is in the trace once olm-operator has exported the
/// reconcile that wrote Succeeded (spans arrive in batches, service by
/// service).
fn complete(trace: &Trace) -> Result<(), String> {
    let services: BTreeSet<&str> = trace
        .spans
        .iter()
        .map(|s| s.service_name.as_str())
        .collect();
    let missing: Vec<&str> = SERVICES
        .iter()
        .copied()
        .filter(|s| !services.contains(s))
        .collect();
    if !missing.is_empty() {
        return Err(format!("no spans yet from {missing:?}"));
    }
    let succeeded = spans_named(trace, "reconcile_csv")
        .iter()
        .any(|s| s.tags.get("olm.csv.phase.written").map(String::as_str) == Some("Succeeded"));
    if !succeeded {
        return Err("no reconcile_csv span that wrote Succeeded yet".to_owned());
    }
    if spans_named(trace, "unpack").is_empty() {
        return Err("no unpack span yet".to_owned());
    }
    // A parent still in another service's next batch.
    if let Some(orphan) = trace.spans.iter().find(|s| {
        s.parent_span_id
            .as_deref()
            .is_some_and(|p| !trace.spans.iter().any(|other| other.span_id == p))
    }) {
        return Err(format!(
            "the parent of {} ({}) is not in the trace yet",
            orphan.operation_name, orphan.service_name
        ));
    }
    Ok(())
}

/// Jaeger, NATS, the catalog on `opm serve` and the three services as
/// processes, all exporting to Jaeger, for one test namespace.
struct Traced {
    jaeger: Jaeger,
    setup: Setup,
    catalog_address: String,
    _nats: SecuredNats,
    _catalog: (olm_registry::RunningServer, tempfile::TempDir),
    _opm: olm_testkit::Supervised,
    _processes: Vec<ServiceProcess>,
}

impl Traced {
    /// Starts everything; the catalog offers `bundle` at `image`. `None`
    /// (after saying why) when Jaeger is not installed, outside CI.
    async fn start(
        setup: Setup,
        bundle: &olm_catalog::bundle::RegistryBundle,
        image: &str,
    ) -> Option<Traced> {
        for service in SERVICES {
            service_binary(service);
        }
        let jaeger = Jaeger::start_or_skip()?;
        let ns = setup.namespace();
        let host = setup.registry.host();
        let nats = SecuredNats::start();
        // The catalog served by the `opm` binary, exporting its spans too.
        let catalog = serve_catalog(bundle, image).await;
        let otlp = jaeger.otlp_endpoint();
        // Spans leave each process within a fraction of a second, not the
        // SDK's 5 s.
        let env = [("OTEL_BSP_SCHEDULE_DELAY", "200")];
        let catalog_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = catalog.1.path();
        let opm = olm_testkit::Supervised::spawn(
            "opm",
            &service_binary("opm"),
            &[
                "serve".to_owned(),
                dir.display().to_string(),
                "--port".to_owned(),
                catalog_port.to_string(),
                "--termination-log".to_owned(),
                dir.join("termination-log").display().to_string(),
            ],
            &log_file(&setup, "opm"),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str()),
                ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            ],
        )
        .unwrap();
        let mut processes = Vec::new();
        for service in SERVICES.into_iter().filter(|s| *s != "opm") {
            let mut args = vec![
                "--watchedNamespaces".to_owned(),
                ns.to_owned(),
                "--otlp-endpoint".to_owned(),
                otlp.clone(),
            ];
            if service != "olm-operator" {
                args.extend(["--insecure-registry".to_owned(), host.clone()]);
                args.extend(nats.cli_args(service));
            }
            processes.push(ServiceProcess::start_with_env(
                service,
                &args,
                &env,
                &log_file(&setup, service),
            ));
        }
        Some(Traced {
            jaeger,
            catalog_address: format!("127.0.0.1:{catalog_port}"),
            setup,
            _nats: nats,
            _catalog: catalog,
            _opm: opm,
            _processes: processes,
        })
    }

    /// A CatalogSource for the catalog, an OperatorGroup and a Subscription
    /// to `gadgets`.
    async fn subscribe(&self) {
        let ns = self.setup.namespace();
        let client = &self.setup.client;
        create_catalog(client, ns, "gadgets-catalog", &self.catalog_address).await;
        create_operator_group(client, ns, json!({})).await;
        create_subscription(client, ns, "gadgets", "gadgets-catalog", None).await;
    }
}

#[tokio::test]
async fn a_subscriptions_install_is_one_trace_across_the_services() {
    let started = Instant::now();
    let setup = Setup::new("e2e-traces").await;
    let spec = BundleSpec::new(&setup.group, "1.0.0");
    let (bundle, image) = publish(&setup.registry.host(), &spec).await;
    let Some(traced) = Traced::start(setup, &bundle, &image).await else {
        return;
    };
    let (setup, jaeger) = (&traced.setup, &traced.jaeger);
    let ns = setup.namespace();
    traced.subscribe().await;
    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;
    let installed = started.elapsed();

    // The hand-offs through Kubernetes carry one trace id.
    let csvs: Api<ClusterServiceVersion> = setup.api();
    let csv = csvs.get("gadgets.v1.0.0").await.unwrap();
    let trace_id = annotated_trace_id(csv.metadata.annotations.as_ref())
        .expect("the CSV carries the install's traceparent");
    let plans: Api<InstallPlan> = setup.api();
    let plan = plans.list(&Default::default()).await.unwrap().items;
    assert_eq!(plan.len(), 1);
    assert_eq!(
        annotated_trace_id(plan[0].metadata.annotations.as_ref()).as_deref(),
        Some(trace_id.as_str()),
        "the InstallPlan and the CSV carry the same trace"
    );

    let trace = eventually("the whole install in Jaeger", WAIT, || async {
        let trace = jaeger
            .trace(&trace_id)
            .await
            .map_err(|err| err.to_string())?
            .ok_or_else(|| format!("trace {trace_id} not in Jaeger yet"))?;
        complete(&trace).map(|()| trace)
    })
    .await;
    let traced = started.elapsed();

    // One root: the resolution pass that wrote the InstallPlan.
    let roots: Vec<&Span> = trace
        .spans
        .iter()
        .filter(|s| s.parent_span_id.is_none())
        .collect();
    assert_eq!(roots.len(), 1, "one root span: {roots:#?}");
    let resolve = roots[0];
    assert_eq!(resolve.operation_name, "resolve");
    assert_eq!(resolve.service_name, "catalog-operator");
    assert_eq!(
        resolve.tags.get("k8s.namespace.name").map(String::as_str),
        Some(ns)
    );
    // Every other span's parent is in the trace (`complete` waited for it):
    // a service that dropped the context would have started a root.

    // The catalog's gRPC call, inside the resolution: catalog-operator's
    // client span, and under it the `opm serve` process's server span.
    let get_bundle = spans_named(&trace, "api.Registry/GetBundle");
    let client: Vec<&Span> = get_bundle
        .iter()
        .copied()
        .filter(|s| s.service_name == "catalog-operator")
        .collect();
    assert!(!client.is_empty(), "GetBundle's client span in the trace");
    for call in &client {
        assert_eq!(
            call.tags.get("rpc.system").map(String::as_str),
            Some("grpc")
        );
        assert_eq!(
            call.tags.get("olm.catalog").map(String::as_str),
            Some("gadgets-catalog")
        );
        assert!(descends_from(&trace, call, resolve));
    }
    assert!(
        client.iter().any(
            |c| c.tags.get("olm.package").map(String::as_str) == Some("gadgets")
                && c.tags.get("olm.csv").map(String::as_str) == Some("gadgets.v1.0.0")
        ),
        "GetBundle names the package and CSV: {client:#?}"
    );
    let served: Vec<&Span> = get_bundle
        .iter()
        .copied()
        .filter(|s| s.service_name == "opm")
        .collect();
    assert!(!served.is_empty(), "GetBundle's server span in the trace");
    for call in &served {
        assert!(
            client
                .iter()
                .any(|c| call.parent_span_id.as_deref() == Some(c.span_id.as_str())),
            "the server span is a child of the client span"
        );
    }

    // The InstallPlan's reconciles continue the resolution's trace.
    let plan_reconciles = spans_named(&trace, "reconcile_installplan");
    assert!(!plan_reconciles.is_empty());
    for reconcile in &plan_reconciles {
        assert_eq!(reconcile.service_name, "catalog-operator");
        assert_eq!(
            parent_of(&trace, reconcile).map(|p| p.span_id.as_str()),
            Some(resolve.span_id.as_str()),
            "an InstallPlan reconcile is a child of the span that wrote the plan"
        );
    }

    // bundle-unpacker's pull, reached through NATS or its watch, under a
    // plan reconcile or the plan's annotation.
    let unpack = spans_named(&trace, "unpack");
    assert!(
        unpack
            .iter()
            .all(|s| s.service_name == "bundle-unpacker" && descends_from(&trace, s, resolve))
    );
    assert_eq!(
        unpack[0].tags.get("olm.bundle.image").map(String::as_str),
        Some(image.as_str())
    );
    let published = spans_named(&trace, "olm.bus.publish");
    assert!(
        published
            .iter()
            .any(|p| plan_reconciles.iter().any(|r| descends_from(&trace, p, r))),
        "the unpack request was published from a plan reconcile"
    );

    // The CSV step, and olm-operator's reconciles under it.
    let csv_steps: Vec<&Span> = spans_named(&trace, "apply_step")
        .into_iter()
        .filter(|s| {
            s.tags.get("olm.step.kind").map(String::as_str) == Some("ClusterServiceVersion")
        })
        .collect();
    assert_eq!(csv_steps.len(), 1, "one CSV step: {csv_steps:#?}");
    let csv_reconciles = spans_named(&trace, "reconcile_csv");
    for reconcile in &csv_reconciles {
        assert_eq!(reconcile.service_name, "olm-operator");
        assert_eq!(
            parent_of(&trace, reconcile).map(|p| p.span_id.as_str()),
            Some(csv_steps[0].span_id.as_str()),
            "a CSV reconcile is a child of the step that created the CSV"
        );
        assert_eq!(
            reconcile.tags.get("olm.csv").map(String::as_str),
            Some("gadgets.v1.0.0")
        );
    }
    // No reconcile of the succeeded CSV belongs to the install.
    assert!(
        csv_reconciles
            .iter()
            .all(|s| s.tags.get("olm.csv.phase").map(String::as_str) != Some("Succeeded")),
        "{csv_reconciles:#?}"
    );

    // A later change to the succeeded CSV is traced on its own, linked to
    // the install.
    csvs.patch(
        "gadgets.v1.0.0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"e2e.olm.io/touched": "yes"}}})),
    )
    .await
    .unwrap();
    let linked = eventually("a linked trace of the later reconcile", WAIT, || async {
        let traces = jaeger
            .traces("olm-operator", 500)
            .await
            .map_err(|err| err.to_string())?;
        traces
            .iter()
            .flat_map(|t| t.spans.iter())
            .find(|s| {
                s.trace_id != trace_id
                    && s.operation_name == "reconcile_csv"
                    && s.links.iter().any(|link| link.trace_id == trace_id)
            })
            .cloned()
            .ok_or_else(|| "no linked reconcile_csv yet".to_owned())
    })
    .await;
    assert_eq!(
        linked.tags.get("olm.csv.phase").map(String::as_str),
        Some("Succeeded")
    );

    eprintln!("{}", tree(&trace));
    eprintln!(
        "installed in {installed:?}; whole trace in Jaeger at {traced:?}; {} spans from {:?}",
        trace.spans.len(),
        trace
            .spans
            .iter()
            .map(|s| s.service_name.as_str())
            .collect::<BTreeSet<_>>()
    );
    delete_crds(&setup.client, &[spec.crd_name()]).await;
}

/// A step that fails records the error in the install's trace: the bundle
/// image was never pushed, so bundle-unpacker's pull fails, and its `unpack`
/// span, inside the trace the InstallPlan carries, says so.
#[tokio::test]
async fn a_failed_unpack_is_an_error_in_the_installs_trace() {
    let setup = Setup::new("e2e-traces-fail").await;
    let spec = BundleSpec::new(&setup.group, "1.0.0");
    let bundle = spec.load();
    let image = format!("{}/e2e/never-pushed-bundle:v1.0.0", setup.registry.host());
    let Some(traced) = Traced::start(setup, &bundle, &image).await else {
        return;
    };
    let (setup, jaeger) = (&traced.setup, &traced.jaeger);
    traced.subscribe().await;

    let plans: Api<InstallPlan> = setup.api();
    let trace_id = eventually("an InstallPlan carrying a trace", WAIT, || async {
        let items = plans
            .list(&Default::default())
            .await
            .map_err(|err| err.to_string())?
            .items;
        items
            .iter()
            .find_map(|plan| annotated_trace_id(plan.metadata.annotations.as_ref()))
            .ok_or_else(|| format!("{} plans, none annotated", items.len()))
    })
    .await;
    let (trace, unpack) = eventually("the failed unpack in Jaeger", WAIT, || async {
        let trace = jaeger
            .trace(&trace_id)
            .await
            .map_err(|err| err.to_string())?
            .ok_or_else(|| format!("trace {trace_id} not in Jaeger yet"))?;
        let unpack = trace
            .spans
            .iter()
            .find(|s| s.operation_name == "unpack" && s.tag("otel.status_code") == Some("ERROR"))
            .cloned()
            .ok_or_else(|| format!("no failed unpack yet: {}", trace.summary()))?;
        Ok::<_, String>((trace, unpack))
    })
    .await;
    eprintln!("{}", tree(&trace));
    assert_eq!(unpack.service_name, "bundle-unpacker");
    assert_eq!(unpack.tag("olm.bundle.image"), Some(image.as_str()));
    assert_eq!(unpack.tag("error"), Some("true"));
    // The failure's reason and message, as the unpacked-bundle record says.
    let description = unpack.tag("otel.status_description").unwrap_or_default();
    assert!(
        description.starts_with("ImagePullFailed: ") && description.contains("not found"),
        "{unpack:#?}"
    );
    assert!(
        unpack.events.iter().any(|event| {
            event.get("event").map(String::as_str) == Some("exception")
                && event.get("exception.message").map(String::as_str) == Some(description)
        }),
        "an exception event with the status's message: {unpack:#?}"
    );
    // Inside the install's trace: under the resolution that planned it.
    let resolve = trace.span("resolve").expect("the resolution in the trace");
    assert!(descends_from(&trace, &unpack, resolve));
    delete_crds(&setup.client, &[spec.crd_name()]).await;
}
