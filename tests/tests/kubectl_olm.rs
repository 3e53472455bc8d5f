//! `kubectl olm` against a real control plane with OLM's services running
//! in-process: an admin's day with one operator, from install to uninstall,
//! through the built `kubectl-olm` binary only (as a user runs it), each
//! step checked in its output, its exit status and the cluster.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use k8s_openapi::{
    api::apps::v1::Deployment,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams},
};
use olm_api::{
    csv::ClusterServiceVersion, install_plan::InstallPlan, operator::Operator,
    operator_group::OperatorGroup, subscription::Subscription,
};
use olm_e2e::{
    eventually,
    harness::{
        BundleSpec, ServiceOptions, Setup, WAIT, create_catalog, point_catalog, publish,
        serve_bundles, start_services_with,
    },
};
use serde_json::json;

fn text(bytes: &[u8], namespace: &str) -> String {
    String::from_utf8_lossy(bytes).replace(namespace, "NS")
}

/// Runs `kubectl-olm ARGS -n NAMESPACE`: (exit status, stdout, stderr), the
/// namespace written `NS`.
async fn run(namespace: &str, args: &[&str]) -> (i32, String, String) {
    let out = olm_e2e::kubectl_olm(namespace, args).await;
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout, namespace),
        text(&out.stderr, namespace),
    )
}

/// The bundles a preview report resolves to.
fn operator_names(report: &serde_json::Value) -> Vec<String> {
    report["operators"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|o| o["name"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The steps a preview's changes name, as (kind, name).
fn previewed_steps(changes: &serde_json::Value) -> std::collections::BTreeSet<(String, String)> {
    let field = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or_default().to_owned();
    let objects = changes["objects"].as_array().cloned().unwrap_or_default();
    let crds = changes["crds"].as_array().cloned().unwrap_or_default();
    objects
        .iter()
        .map(|o| (field(o, "kind"), field(o, "name")))
        .chain(
            crds.iter()
                .map(|c| ("CustomResourceDefinition".to_owned(), field(c, "name"))),
        )
        .collect()
}

async fn names<K>(api: &Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.meta().name.clone())
        .collect()
}

#[tokio::test]
async fn an_operator_is_installed_approved_upgraded_and_uninstalled_with_kubectl_olm() {
    let setup = Setup::new("kubectl-olm").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let v1 = BundleSpec::new(&setup.group, "1.0.0");
    let v2 = BundleSpec::new(&setup.group, "2.0.0").replaces("gadgets.v1.0.0");
    let (b1, i1) = publish(&host, &v1).await;
    let (b2, i2) = publish(&host, &v2).await;
    let (first, _first_dir) = serve_bundles(&[(&b1, &i1)]).await;
    let (second, _second_dir) = serve_bundles(&[(&b1, &i1), (&b2, &i2)]).await;
    let services = start_services_with(ns, &host, ServiceOptions::default()).await;
    let catalogs = create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &first.addr().to_string(),
    )
    .await;
    let from_catalog = [
        "--catalog",
        "gadgets-catalog",
        "--catalog-namespace",
        ns,
        "--channel",
        "stable",
    ];

    // Preview before anything is installed: what installing would install,
    // once catalog-operator has seen the catalog READY.
    let mut preview = vec![
        "preview",
        "gadgets",
        "-o",
        "json",
        "--insecure-registry",
        &host,
    ];
    preview.extend(from_catalog);
    let planned_report = eventually("preview resolves the install", WAIT, || async {
        let (code, out, err) = run(ns, &preview).await;
        let report: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("{e}: {out}{err}"))?;
        if code == 0 && report["decision"] == "Resolved" {
            Ok(report)
        } else {
            Err(format!("exit {code}: {out}{err}"))
        }
    })
    .await;
    assert_eq!(operator_names(&planned_report), ["gadgets.v1.0.0"]);
    // What it would apply: the bundle's objects, all new, its CRD to be
    // created, and the RBAC its CSV grants.
    let changes = &planned_report["changes"][0];
    assert!(changes["unavailable"].is_null(), "{changes}");
    let previewed_steps = previewed_steps(changes);
    assert!(
        changes["objects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["action"] == "create"),
        "{changes}"
    );
    assert_eq!(changes["crds"][0]["verdict"], "create", "{changes}");
    assert!(
        changes["rbac"].as_array().is_some_and(|r| !r.is_empty()),
        "{changes}"
    );
    let mut unknown = vec!["preview", "no-such-package"];
    unknown.extend(from_catalog);
    let (code, out, _) = run(ns, &unknown).await;
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("decision: ResolutionFailed"), "{out}");

    // No OperatorGroup: refused, with the next step.
    let mut install = vec!["install", "gadgets", "--approval", "Manual"];
    install.extend(from_catalog);
    let (code, _, err) = run(ns, &install).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("has no OperatorGroup") && err.contains("--create-operator-group"),
        "{err}"
    );
    assert!(
        names(&Api::<Subscription>::namespaced(setup.client.clone(), ns))
            .await
            .is_empty()
    );

    // Manual approval, not waiting: the Subscription is made, and says how
    // to approve.
    install.push("--create-operator-group");
    let (code, out, err) = run(ns, &install).await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "operatorgroup NS/NS created, watching NS\n\
         subscription NS/gadgets created: package gadgets from catalog NS/gadgets-catalog, channel stable\n\
         approval is Manual: approve the install with `kubectl olm approve gadgets -n NS`\n\
         follow it with `kubectl olm status gadgets -n NS`\n"
    );
    // Installing again is refused.
    let (code, _, err) = run(ns, &install).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("already subscribed"), "{err}");

    // Approve by package, and follow the install to Succeeded.
    let plans: Api<InstallPlan> = Api::namespaced(setup.client.clone(), ns);
    eventually("the first InstallPlan", WAIT, || async {
        match names(&plans).await.as_slice() {
            [one] => Ok(one.clone()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    let (code, out, err) = run(ns, &["approve", "gadgets", "--wait", "--timeout", "120"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("installplan NS/install-")
            && lines[0].ends_with(" approved: gadgets.v1.0.0"),
        "{out}"
    );
    assert_eq!(
        lines.last().copied(),
        Some("gadgets installed: gadgets.v1.0.0 Succeeded in namespace NS"),
        "{out}"
    );
    assert!(lines.contains(&"succeeded: gadgets.v1.0.0"), "{out}");
    // The plan catalog-operator wrote (its steps are filled in once it is
    // approved and the bundle unpacked) holds exactly what the preview showed.
    let planned_steps = eventually("the first plan's steps", WAIT, || async {
        let list = plans
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let steps: std::collections::BTreeSet<(String, String)> = list
            .items
            .iter()
            .flat_map(|p| p.status.iter().flat_map(|s| s.plan.iter()))
            .map(|step| {
                (
                    step.resource.kind.clone(),
                    step.resource.name.replace(ns, "NS"),
                )
            })
            .collect();
        if steps.is_empty() {
            Err("no steps yet".to_owned())
        } else {
            Ok(steps)
        }
    })
    .await;
    assert_eq!(planned_steps, previewed_steps);
    // Nothing waits now.
    let (code, _, err) = run(ns, &["approve", "gadgets"]).await;
    assert_eq!(code, 0, "already approved is fine: {err}");
    let (code, out, _) = run(ns, &["upgrade", "gadgets"]).await;
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "gadgets is at the latest version its channel offers: gadgets.v1.0.0\n"
        )
    );

    // The catalog gets v2: the upgrade waits for approval; --to a version
    // that is not the waiting one is refused; then the upgrade goes through.
    point_catalog(&catalogs, "gadgets-catalog", &second.addr().to_string()).await;
    let subscriptions: Api<Subscription> = Api::namespaced(setup.client.clone(), ns);
    eventually("the upgrade waits for approval", WAIT, || async {
        let sub = subscriptions
            .get("gadgets")
            .await
            .map_err(|e| e.to_string())?;
        let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
        if status["state"] == "UpgradePending" && status["currentCSV"] == "gadgets.v2.0.0" {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })
    .await;
    // The preview of the subscribed package names the update the controller
    // planned: the same answer.
    let (code, out, err) = run(ns, &["preview", "gadgets", "-o", "json"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let waiting = plans
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.phase.as_str() == "RequiresApproval")
        })
        .expect("a plan waiting for approval");
    assert_eq!(
        operator_names(&report),
        waiting.spec.cluster_service_version_names
    );
    let (code, _, err) = run(ns, &["upgrade", "gadgets", "--to", "3.0.0"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("installs gadgets.v2.0.0") && err.contains("not 3.0.0"),
        "{err}"
    );
    let (code, out, err) = run(
        ns,
        &[
            "upgrade",
            "gadgets",
            "--to",
            "2.0.0",
            "--wait",
            "--timeout",
            "120",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("approved: gadgets.v1.0.0 -> gadgets.v2.0.0"),
        "{out}"
    );
    assert!(
        out.ends_with("gadgets installed: gadgets.v2.0.0 Succeeded in namespace NS\n"),
        "{out}"
    );

    // Uninstall: refused while an operand exists, then with the operand,
    // the CRD and the OperatorGroup, leaving nothing of OLM's behind.
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&setup.group, "v1", &v2.kind()),
        &format!("{}s", v2.singular()),
    );
    let operands: Api<DynamicObject> = Api::namespaced_with(setup.client.clone(), ns, &resource);
    let mut operand = DynamicObject::new("my-gadget", &resource);
    operand.data = json!({"spec": {}});
    operands
        .create(&PostParams::default(), &operand)
        .await
        .unwrap();
    // Output names the namespace NS, and the CRD's group holds it.
    let crd = v2.crd_name().replace(ns, "NS");
    let (code, _, err) = run(ns, &["uninstall", "gadgets"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("operands exist: 1 {crd} (NS/my-gadget)")),
        "{err}"
    );
    let (code, _, err) = run(
        ns,
        &[
            "uninstall",
            "gadgets",
            "--operand-strategy",
            "ignore",
            "--delete-crds",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("would delete its operands too"), "{err}");
    let (code, out, err) = run(
        ns,
        &[
            "uninstall",
            "gadgets",
            "--operand-strategy",
            "delete",
            "--delete-crds",
            "--delete-operator-group",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.ends_with("gadgets uninstalled from namespace NS\n"),
        "{out}"
    );
    for line in [
        format!("{crd} NS/my-gadget deleted"),
        "subscription NS/gadgets deleted".to_owned(),
        "clusterserviceversion NS/gadgets.v2.0.0 deleted".to_owned(),
        format!("customresourcedefinition {crd} deleted"),
        "operatorgroup NS/NS deleted".to_owned(),
    ] {
        assert!(out.contains(&line), "{line} not in:\n{out}");
    }
    let client = &setup.client;
    assert!(names(&subscriptions).await.is_empty());
    assert!(names(&plans).await.is_empty(), "InstallPlans left");
    assert!(
        names(&Api::<OperatorGroup>::namespaced(client.clone(), ns))
            .await
            .is_empty()
    );
    assert!(
        Api::<CustomResourceDefinition>::all(client.clone())
            .get_opt(&v2.crd_name())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<Operator>::all(client.clone())
            .get_opt(&format!("gadgets.{ns}"))
            .await
            .unwrap()
            .is_none(),
        "the Operator object is left"
    );
    eventually(
        "the CSVs and the operator's Deployment gone",
        WAIT,
        || async {
            let csvs = names(&Api::<ClusterServiceVersion>::namespaced(
                client.clone(),
                ns,
            ))
            .await;
            let deployments = names(&Api::<Deployment>::namespaced(client.clone(), ns)).await;
            if csvs.is_empty() && deployments.is_empty() {
                Ok(())
            } else {
                Err(format!("CSVs {csvs:?}, Deployments {deployments:?}"))
            }
        },
    )
    .await;
    let (code, _, err) = run(ns, &["uninstall", "gadgets"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no Subscription for package gadgets"), "{err}");
    services.stop().await;
}

/// A bundle in a private registry: `kubectl olm preview` pulls it with the
/// pull secret the catalog names, as bundle-unpacker would. Before the
/// secret exists the preview says the registry refused; once it exists the
/// bundle's objects are listed.
#[tokio::test]
async fn preview_pulls_a_private_bundle_with_the_catalogs_pull_secret() {
    use base64::Engine as _;
    use olm_testkit::registry::{BASIC_AUTH_PASSWORD, BASIC_AUTH_USER, Registry};

    let setup = Setup::new("e2e-preview-private").await;
    let ns = setup.namespace();
    let private = Registry::start_with_basic_auth().unwrap();
    let host = private.host();
    let spec = BundleSpec::new(&setup.group, "1.0.0");
    let bundle = spec.load();
    let image = format!("{host}/private/gadgets-bundle:v1.0.0");
    let mut built = olm_oci::ImageBuilder::new().labels(bundle.annotations.clone());
    for (path, bytes) in spec.files() {
        built = built.add_file(&path, bytes).unwrap();
    }
    let pusher = olm_oci::Client::new(
        olm_oci::ClientOptions::default()
            .plain_http(&host)
            .with_credentials(
                &host,
                olm_oci::Credentials::basic(BASIC_AUTH_USER, BASIC_AUTH_PASSWORD),
            ),
    )
    .unwrap();
    pusher
        .push_image(
            &olm_oci::Reference::parse(&image).unwrap(),
            &built.build().unwrap(),
        )
        .await
        .unwrap();
    let (catalog, _dir) = serve_bundles(&[(&bundle, &image)]).await;
    let services = start_services_with(ns, &host, ServiceOptions::default()).await;
    create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &catalog.addr().to_string(),
    )
    .await;
    let catalogs: Api<olm_api::catalog_source::CatalogSource> = setup.api();
    catalogs
        .patch(
            "gadgets-catalog",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"secrets": ["gadgets-pull-secret"]}})),
        )
        .await
        .unwrap();
    let preview = [
        "preview",
        "gadgets",
        "-o",
        "json",
        "--insecure-registry",
        &host,
        "--catalog",
        "gadgets-catalog",
        "--catalog-namespace",
        ns,
        "--channel",
        "stable",
    ];
    let resolved = || async {
        let (code, out, err) = run(ns, &preview).await;
        let report: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("{e}: {out}{err}"))?;
        if code == 0 && report["decision"] == "Resolved" {
            Ok((report, err))
        } else {
            // Why the catalog is not READY, if it is not.
            let status = catalogs
                .get_status("gadgets-catalog")
                .await
                .map(|c| serde_json::to_string(&c.status).unwrap_or_default())
                .unwrap_or_else(|e| e.to_string());
            Err(format!("exit {code}: {out}{err}; catalog status: {status}"))
        }
    };

    // No secret yet: resolved, but the content is unavailable, in the
    // registry's words, and the missing secret is named.
    let (report, err) = eventually("preview resolves", WAIT, resolved).await;
    let unavailable = report["changes"][0]["unavailable"]
        .as_str()
        .unwrap_or_default();
    assert!(
        unavailable.contains("401") || unavailable.to_lowercase().contains("unauthorized"),
        "{report}"
    );
    assert!(
        err.contains("pull secret NS/gadgets-pull-secret not found"),
        "{err}"
    );

    let secrets: Api<k8s_openapi::api::core::v1::Secret> = setup.api();
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{BASIC_AUTH_USER}:{BASIC_AUTH_PASSWORD}"));
    let body = json!({"auths": {&host: {"auth": auth}}}).to_string();
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "gadgets-pull-secret"},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(body)},
            }))
            .unwrap(),
        )
        .await
        .unwrap();

    // With it: the bundle's objects, pulled with the catalog's secret.
    let (report, _) = resolved().await.unwrap();
    let changes = &report["changes"][0];
    assert!(changes["unavailable"].is_null(), "{changes}");
    let objects = changes["objects"].as_array().unwrap();
    assert!(!objects.is_empty(), "{changes}");
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "ClusterServiceVersion" && o["action"] == "create"),
        "{changes}"
    );
    // The CRD came from the image too: only the pulled manifests hold it.
    assert_eq!(changes["crds"][0]["verdict"], "create", "{changes}");
    services.stop().await;
    olm_e2e::harness::delete_crds(&setup.client, &[spec.crd_name()]).await;
}
