//! Webhooks and APIServices owned by a CSV against the real control plane:
//! the Service, Secret, RBAC, webhook configuration, conversion webhook and
//! APIService OLM creates, the certificate mounted into the Deployment, a
//! certificate rotation with shortened lifetimes rolling the Deployment, and
//! deletion cleaning up.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::{
        admissionregistration::v1::ValidatingWebhookConfiguration,
        apps::v1::Deployment,
        core::v1::{Secret, Service},
        rbac::v1::{ClusterRoleBinding, Role, RoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use olm_api::{csv::ClusterServiceVersion, operator_group::OperatorGroup};
use olm_operator::controller::ControllerConfig;
use serde_json::json;

use crate::{
    RunningOperator,
    csv_lifecycle::{
        PHASE_DEADLINE, create_widget_crd, delete_crd, explained, fixture_group,
        own_namespace_group, wait_for_csv_phase,
    },
    eventually, init_logs, olm_crds_installed,
};

const SPROCKET_CSV: &str = "sprocket-operator.v1.0.0";
const SPROCKET_DEPLOYMENT: &str = "sprocket.controller";
const SPROCKET_SERVICE: &str = "sprocket-controller-service";
const GIZMO_CSV: &str = "gizmo-operator.v1.0.0";
const GIZMO_DEPLOYMENT: &str = "gizmo-server";
const GIZMO_SERVICE: &str = "gizmo-server-service";

fn text(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

/// A CSV serving a validating webhook (and, when `conversion` is set, a
/// conversion webhook for the namespace's widgets CRD) from one Deployment
/// whose name has a dot in it.
fn sprocket_csv(
    namespace: &str,
    install_modes: &[&str],
    conversion: bool,
) -> ClusterServiceVersion {
    let group = fixture_group(namespace);
    let crd = format!("widgets.{group}");
    let modes: Vec<_> = [
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        "AllNamespaces",
    ]
    .iter()
    .map(|mode| json!({ "type": mode, "supported": install_modes.contains(mode) }))
    .collect();
    let mut webhooks = vec![json!({
        "generateName": "vsprocket.example.test",
        "type": "ValidatingAdmissionWebhook",
        "deploymentName": SPROCKET_DEPLOYMENT,
        "containerPort": 443,
        "targetPort": 9443,
        "webhookPath": "/validate-widget",
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "rules": [{
            "apiGroups": [group], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]
        }]
    })];
    if conversion {
        webhooks.push(json!({
            "generateName": "csprocket.example.test",
            "type": "ConversionWebhook",
            "deploymentName": SPROCKET_DEPLOYMENT,
            "containerPort": 443,
            "targetPort": 9443,
            "webhookPath": "/convert",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "conversionCRDs": [crd]
        }));
    }
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": { "name": SPROCKET_CSV, "namespace": namespace },
        "spec": {
            "displayName": "Sprocket Operator",
            "version": "1.0.0",
            "installModes": modes,
            "customresourcedefinitions": {
                "owned": [{ "name": crd, "version": "v1", "kind": "Widget" }]
            },
            "webhookdefinitions": webhooks,
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [{
                        "name": SPROCKET_DEPLOYMENT,
                        "spec": {
                            "replicas": 1,
                            "selector": { "matchLabels": { "app": "sprocket" } },
                            "template": {
                                "metadata": { "labels": { "app": "sprocket" } },
                                "spec": {
                                    "containers": [
                                        { "name": "manager", "image": "registry.example.test/sprocket:1.0.0" },
                                        { "name": "proxy", "image": "registry.example.test/proxy:1" }
                                    ]
                                }
                            }
                        }
                    }]
                }
            }
        }
    }))
    .unwrap()
}

/// The validating webhook configurations of the sprocket CSV.
async fn sprocket_configurations(
    client: &Client,
    namespace: &str,
) -> Vec<ValidatingWebhookConfiguration> {
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default().labels(&format!(
            "olm.owner={SPROCKET_CSV},olm.owner.namespace={namespace},olm.owner.kind=ClusterServiceVersion"
        )))
        .await
        .unwrap()
        .items
}

fn verifies(bundle: &str, cert: &str, host: &str) -> Result<(), String> {
    olm_certs::verify_served(bundle, cert, host, std::time::SystemTime::now())
        .map_err(|e| e.to_string())
}

fn template_ca_hash(deployment: &Deployment) -> Option<String> {
    deployment
        .spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get("olmcahash")
        .cloned()
}

#[tokio::test]
async fn webhook_csv_gets_its_service_certificate_configuration_and_conversion() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let test_namespace = plane.namespace("sprocket-hooks").await;
    let namespace = test_namespace.name().to_owned();
    let client = plane.client().await;
    let operator = RunningOperator::start(&namespace).await;
    let crd_name = create_widget_crd(&client, &namespace).await;

    explained(&namespace, async {
        let group: OperatorGroup = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": { "name": "sprocket-group", "namespace": namespace },
            "spec": {}
        }))
        .unwrap();
        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &group)
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(
            &PostParams::default(),
            &sprocket_csv(&namespace, &["AllNamespaces"], true),
        )
        .await
        .unwrap();
        let csv = wait_for_csv_phase(&csvs, SPROCKET_CSV, "Succeeded", "InstallSucceeded").await;
        assert!(
            csv.status.as_ref().unwrap().certs_last_updated.is_some(),
            "certsLastUpdated is written for compatibility"
        );

        // The Service in front of the Deployment (dots become dashes).
        let service = Api::<Service>::namespaced(client.clone(), &namespace)
            .get(SPROCKET_SERVICE)
            .await
            .unwrap();
        let spec = service.spec.unwrap();
        let port = &spec.ports.unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("443"), 443));
        assert_eq!(
            port.target_port,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(9443))
        );
        assert_eq!(
            spec.selector.unwrap(),
            BTreeMap::from([("app".to_owned(), "sprocket".to_owned())])
        );

        // The Secret: upstream's keys and CA hash.
        let secret_name = format!("{SPROCKET_SERVICE}-cert");
        let secret = Api::<Secret>::namespaced(client.clone(), &namespace)
            .get(&secret_name)
            .await
            .unwrap();
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        let bundle = text(&secret, "olmCAKey");
        let cert = text(&secret, "tls.crt");
        assert!(text(&secret, "tls.key").contains("PRIVATE KEY"));
        let hash = olm_certs::ca_hash(&bundle);
        assert_eq!(secret.annotations().get("olmcahash"), Some(&hash));
        for host in [
            format!("{SPROCKET_SERVICE}.{namespace}"),
            format!("{SPROCKET_SERVICE}.{namespace}.svc"),
            format!("{SPROCKET_SERVICE}.{namespace}.svc.cluster.local"),
        ] {
            verifies(&bundle, &cert, &host).unwrap();
        }

        // The ServiceAccount may read the Secret; authentication is
        // delegated.
        let role = Api::<Role>::namespaced(client.clone(), &namespace)
            .get(&secret_name)
            .await
            .unwrap();
        assert_eq!(
            role.rules.unwrap()[0].resource_names.as_deref(),
            Some(std::slice::from_ref(&secret_name))
        );
        let binding = Api::<RoleBinding>::namespaced(client.clone(), &namespace)
            .get(&secret_name)
            .await
            .unwrap();
        assert_eq!(binding.subjects.unwrap()[0].name, "default");
        let delegator = Api::<ClusterRoleBinding>::all(client.clone())
            .get(&format!("{SPROCKET_SERVICE}-system:auth-delegator"))
            .await
            .unwrap();
        assert_eq!(delegator.role_ref.name, "system:auth-delegator");
        let reader = Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
            .get(&format!("{SPROCKET_SERVICE}-auth-reader"))
            .await
            .unwrap();
        assert_eq!(
            reader.role_ref.name,
            "extension-apiserver-authentication-reader"
        );

        // The webhook configuration trusts the served certificate.
        let configurations = sprocket_configurations(&client, &namespace).await;
        assert_eq!(configurations.len(), 1, "one configuration");
        let configuration = &configurations[0];
        assert!(
            configuration
                .name_any()
                .starts_with("vsprocket.example.test-"),
            "{}",
            configuration.name_any()
        );
        let labels = configuration.labels();
        assert_eq!(
            labels
                .get("olm.webhook-description-generate-name")
                .map(String::as_str),
            Some("vsprocket.example.test")
        );
        assert_eq!(labels.get("olm.managed").map(String::as_str), Some("true"));
        assert!(labels.contains_key("olm.webhook-description-hash"));
        let webhook = &configuration.webhooks.as_ref().unwrap()[0];
        assert!(
            webhook
                .namespace_selector
                .as_ref()
                .is_none_or(|s| s.match_labels.is_none() && s.match_expressions.is_none()),
            "global group: every namespace, got {:?}",
            webhook.namespace_selector
        );
        let reference = webhook.client_config.service.as_ref().unwrap();
        assert_eq!(reference.name, SPROCKET_SERVICE);
        assert_eq!(reference.namespace, namespace);
        assert_eq!(reference.path.as_deref(), Some("/validate-widget"));
        assert_eq!(reference.port, Some(443));
        let ca_bundle =
            String::from_utf8(webhook.client_config.ca_bundle.as_ref().unwrap().0.clone()).unwrap();
        verifies(
            &ca_bundle,
            &cert,
            &format!("{SPROCKET_SERVICE}.{namespace}.svc"),
        )
        .unwrap();
        assert!(
            verifies(&ca_bundle, &cert, "someone-else.example.test").is_err(),
            "the certificate is for the service only"
        );

        // The Deployment mounts the certificate and carries the CA hash.
        let deployment = Api::<Deployment>::namespaced(client.clone(), &namespace)
            .get(SPROCKET_DEPLOYMENT)
            .await
            .unwrap();
        assert_eq!(template_ca_hash(&deployment), Some(hash.clone()));
        let pod = deployment.spec.unwrap().template.spec.unwrap();
        let volumes: BTreeMap<String, _> = pod
            .volumes
            .unwrap()
            .into_iter()
            .map(|v| (v.name.clone(), v.secret.unwrap()))
            .collect();
        for (volume, paths) in [
            ("apiservice-cert", ["apiserver.crt", "apiserver.key"]),
            ("webhook-cert", ["tls.crt", "tls.key"]),
        ] {
            let source = &volumes[volume];
            assert_eq!(source.secret_name.as_deref(), Some(secret_name.as_str()));
            let items: Vec<&str> = source
                .items
                .as_ref()
                .unwrap()
                .iter()
                .map(|i| i.path.as_str())
                .collect();
            assert_eq!(items, paths);
        }
        for container in pod.containers {
            let mounts: BTreeMap<String, String> = container
                .volume_mounts
                .unwrap()
                .into_iter()
                .map(|m| (m.name, m.mount_path))
                .collect();
            assert_eq!(
                mounts.get("apiservice-cert").map(String::as_str),
                Some("/apiserver.local.config/certificates")
            );
            assert_eq!(
                mounts.get("webhook-cert").map(String::as_str),
                Some("/tmp/k8s-webhook-server/serving-certs")
            );
        }

        // The owned CRD converts through the webhook.
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let conversion = crds.get(&crd_name).await.unwrap().spec.conversion.unwrap();
        assert_eq!(conversion.strategy, "Webhook");
        let config = conversion.webhook.unwrap().client_config.unwrap();
        assert_eq!(
            String::from_utf8(config.ca_bundle.unwrap().0).unwrap(),
            bundle
        );
        let reference = config.service.unwrap();
        assert_eq!(
            (reference.name.as_str(), reference.path.as_deref()),
            (SPROCKET_SERVICE, Some("/convert"))
        );

        // Deleting the Secret (upstream users' workaround for expired
        // certificates) is noticed through the watch and repaired: new
        // certificates, published in the webhook, through NeedsCertRotation.
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        secrets
            .delete(&secret_name, &DeleteParams::default())
            .await
            .unwrap();
        eventually("certificates issued again", Duration::from_secs(30), || {
            let secrets = secrets.clone();
            let csvs = csvs.clone();
            let client = client.clone();
            let namespace = namespace.clone();
            let secret_name = secret_name.clone();
            let old_hash = hash.clone();
            async move {
                let secret = secrets
                    .get_opt(&secret_name)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("no secret yet")?;
                let bundle = text(&secret, "olmCAKey");
                if olm_certs::ca_hash(&bundle) == old_hash {
                    return Err("same ca".to_owned());
                }
                let configurations = sprocket_configurations(&client, &namespace).await;
                let published = configurations
                    .first()
                    .and_then(|c| c.webhooks.as_ref())
                    .and_then(|w| w[0].client_config.ca_bundle.clone())
                    .map(|b| String::from_utf8(b.0).unwrap_or_default());
                if published.as_deref() != Some(bundle.as_str()) {
                    return Err("caBundle not published yet".to_owned());
                }
                let csv = csvs.get(SPROCKET_CSV).await.map_err(|e| e.to_string())?;
                let status = csv.status.unwrap_or_default();
                let rotated =
                    status.conditions.iter().flatten().any(|c| {
                        c.reason.as_ref().map(|r| r.as_str()) == Some("NeedsCertRotation")
                    });
                if status.phase.map(String::from).as_deref() == Some("Succeeded") && rotated {
                    Ok(())
                } else {
                    Err(format!("csv {:?} rotated {rotated}", status.reason))
                }
            }
        })
        .await;

        // Deleting the CSV removes the configuration and resets conversion.
        csvs.delete(SPROCKET_CSV, &DeleteParams::default())
            .await
            .unwrap();
        eventually("csv cleanup", PHASE_DEADLINE, || {
            let client = client.clone();
            let crds = crds.clone();
            let namespace = namespace.clone();
            let crd_name = crd_name.clone();
            async move {
                let left = sprocket_configurations(&client, &namespace).await.len();
                let strategy = crds
                    .get(&crd_name)
                    .await
                    .map_err(|e| e.to_string())?
                    .spec
                    .conversion
                    .map(|c| c.strategy);
                if left == 0 && strategy.as_deref() == Some("None") {
                    Ok(())
                } else {
                    Err(format!("{left} configurations, conversion {strategy:?}"))
                }
            }
        })
        .await;
    })
    .await;
    delete_crd(&client, &crd_name).await;
    operator.stop().await;
}

/// A CSV owning the APIService `v1alpha1.<group>`, served by `gizmo-server`
/// on port 5443.
fn gizmo_csv(namespace: &str) -> ClusterServiceVersion {
    let group = format!("gizmos.{}", fixture_group(namespace));
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": { "name": GIZMO_CSV, "namespace": namespace },
        "spec": {
            "displayName": "Gizmo Operator",
            "version": "1.0.0",
            "nativeAPIs": [
                { "group": "apps", "version": "v1", "kind": "Deployment" },
                { "group": "", "version": "v1", "kind": "ConfigMap" }
            ],
            "installModes": [
                { "type": "OwnNamespace", "supported": true },
                { "type": "SingleNamespace", "supported": true },
                { "type": "MultiNamespace", "supported": false },
                { "type": "AllNamespaces", "supported": false }
            ],
            "apiservicedefinitions": {
                "owned": [{
                    "name": "gizmos", "group": group, "version": "v1alpha1", "kind": "Gizmo",
                    "displayName": "Gizmo", "deploymentName": GIZMO_DEPLOYMENT, "containerPort": 5443
                }]
            },
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [{
                        "name": GIZMO_DEPLOYMENT,
                        "spec": {
                            "replicas": 1,
                            "selector": { "matchLabels": { "app": "gizmo" } },
                            "template": {
                                "metadata": { "labels": { "app": "gizmo" } },
                                "spec": {
                                    "containers": [{ "name": "apiserver", "image": "registry.example.test/gizmo:1.0.0" }]
                                }
                            }
                        }
                    }]
                }
            }
        }
    }))
    .unwrap()
}

/// The owned APIService is created with the CA bundle; under kwok nothing
/// serves it, so it never becomes Available and the CSV waits in Installing
/// ("apiServices not installed"): the Available path is covered by the pure
/// tables (`api_services_check`, `phase_handlers`).
#[tokio::test]
async fn owned_apiservice_is_registered_with_the_ca_bundle() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let test_namespace = plane.namespace("gizmo-api").await;
    let namespace = test_namespace.name().to_owned();
    let client = plane.client().await;
    let operator = RunningOperator::start(&namespace).await;
    let name = format!("v1alpha1.gizmos.{}", fixture_group(&namespace));
    let api_services: Api<APIService> = Api::all(client.clone());

    explained(&namespace, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &own_namespace_group(&namespace))
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(&PostParams::default(), &gizmo_csv(&namespace))
            .await
            .unwrap();
        let csv = eventually("csv waits for its apiservice", PHASE_DEADLINE, || {
            let csvs = csvs.clone();
            async move {
                let csv = csvs.get(GIZMO_CSV).await.map_err(|e| e.to_string())?;
                let status = csv.status.clone().unwrap_or_default();
                let seen = (
                    status.phase.map(String::from).unwrap_or_default(),
                    status.message.unwrap_or_default(),
                );
                if seen.0 == "Installing" && seen.1 == "apiServices not installed" {
                    Ok(csv)
                } else {
                    Err(format!("{seen:?}"))
                }
            }
        })
        .await;
        assert_eq!(
            csv.status.unwrap().reason.map(String::from).as_deref(),
            Some("InstallWaiting")
        );

        let api = api_services.get(&name).await.unwrap();
        let spec = api.spec.clone().unwrap();
        assert_eq!(
            (spec.group_priority_minimum, spec.version_priority),
            (2000, 15)
        );
        let reference = spec.service.unwrap();
        assert_eq!(
            (
                reference.name.as_deref(),
                reference.namespace.as_deref(),
                reference.port
            ),
            (Some(GIZMO_SERVICE), Some(namespace.as_str()), Some(5443))
        );
        let labels = api.labels();
        assert_eq!(labels.get("olm.owner").map(String::as_str), Some(GIZMO_CSV));
        assert_eq!(labels.get("olm.managed").map(String::as_str), Some("true"));
        let secret = Api::<Secret>::namespaced(client.clone(), &namespace)
            .get(&format!("{GIZMO_SERVICE}-cert"))
            .await
            .unwrap();
        let bundle = String::from_utf8(spec.ca_bundle.unwrap().0).unwrap();
        assert_eq!(bundle, text(&secret, "olmCAKey"));
        verifies(
            &bundle,
            &text(&secret, "tls.crt"),
            &format!("{GIZMO_SERVICE}.{namespace}.svc"),
        )
        .unwrap();
        Api::<ClusterRoleBinding>::all(client.clone())
            .get(&format!("{GIZMO_SERVICE}-system:auth-delegator"))
            .await
            .unwrap();

        csvs.delete(GIZMO_CSV, &DeleteParams::default())
            .await
            .unwrap();
        let api_services = api_services.clone();
        let name = name.clone();
        eventually("apiservice removed with its csv", PHASE_DEADLINE, || {
            let api_services = api_services.clone();
            let name = name.clone();
            async move {
                match api_services
                    .get_opt(&name)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    None => Ok(()),
                    Some(_) => Err("still there".to_owned()),
                }
            }
        })
        .await;
    })
    .await;
    // An unavailable APIService stalls namespace deletion cluster-wide:
    // never leave one behind, even when the test failed.
    let _ = api_services.delete(&name, &DeleteParams::default()).await;
    operator.stop().await;
}

/// Lifetimes short enough to see every rotation step within the test: the
/// serving certificate is renewed every 10 s, the CA replaced 20 s into its
/// 40 s life.
fn fast_rotation() -> olm_certs::RotationPolicy {
    olm_certs::RotationPolicy {
        ca_lifetime: Duration::from_secs(40),
        serving_lifetime: Duration::from_secs(20),
        serving_renew_fraction: 0.5,
        ca_renew_before: Duration::from_secs(20),
        overlap: Duration::from_secs(2),
    }
}

#[tokio::test]
async fn certificates_rotate_and_the_deployment_rolls_with_the_ca() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let test_namespace = plane.namespace("sprocket-rotate").await;
    let namespace = test_namespace.name().to_owned();
    let client = plane.client().await;
    let policy = fast_rotation();
    policy.validate().unwrap();
    let operator = RunningOperator::start_with(ControllerConfig {
        watched_namespaces: vec![namespace.clone()],
        certificates: policy,
        ..ControllerConfig::default()
    })
    .await;
    let crd_name = create_widget_crd(&client, &namespace).await;

    explained(&namespace, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &own_namespace_group(&namespace))
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(
            &PostParams::default(),
            &sprocket_csv(&namespace, &["OwnNamespace", "SingleNamespace"], false),
        )
        .await
        .unwrap();
        wait_for_csv_phase(&csvs, SPROCKET_CSV, "Succeeded", "InstallSucceeded").await;
        let group_uid = Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .get("gadget-group")
            .await
            .unwrap()
            .uid()
            .unwrap();
        let configuration = sprocket_configurations(&client, &namespace).await.remove(0);
        assert_eq!(
            configuration.webhooks.unwrap()[0]
                .namespace_selector
                .clone()
                .unwrap()
                .match_labels
                .unwrap(),
            BTreeMap::from([(format!("olm.operatorgroup.uid/{group_uid}"), String::new())]),
            "the group's namespaces only"
        );

        let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
        let secret_name = format!("{SPROCKET_SERVICE}-cert");
        let first = secrets.get(&secret_name).await.unwrap();
        let first_hash = first.annotations()["olmcahash"].clone();
        let first_cert = text(&first, "tls.crt");
        let first_generation = deployments
            .get(SPROCKET_DEPLOYMENT)
            .await
            .unwrap()
            .metadata
            .generation
            .unwrap();

        // The serving certificate is renewed under the same CA first.
        eventually(
            "serving certificate renewed",
            Duration::from_secs(60),
            || {
                let secrets = secrets.clone();
                let secret_name = secret_name.clone();
                let first_cert = first_cert.clone();
                async move {
                    let secret = secrets.get(&secret_name).await.map_err(|e| e.to_string())?;
                    if text(&secret, "tls.crt") != first_cert {
                        Ok(())
                    } else {
                        Err("same certificate".to_owned())
                    }
                }
            },
        )
        .await;

        // Then the CA: the webhook's caBundle follows, the Deployment gets
        // the new hash and rolls, and the bundle verifies what is served.
        eventually("ca rotated and followed", Duration::from_secs(120), || {
            let secrets = secrets.clone();
            let deployments = deployments.clone();
            let client = client.clone();
            let namespace = namespace.clone();
            let secret_name = secret_name.clone();
            let first_hash = first_hash.clone();
            async move {
                let secret = secrets.get(&secret_name).await.map_err(|e| e.to_string())?;
                let hash = secret.annotations()["olmcahash"].clone();
                if hash == first_hash {
                    return Err("ca not rotated yet".to_owned());
                }
                let bundle = text(&secret, "olmCAKey");
                let configurations = sprocket_configurations(&client, &namespace).await;
                let webhook_bundle = configurations
                    .first()
                    .and_then(|c| c.webhooks.as_ref())
                    .and_then(|w| w[0].client_config.ca_bundle.clone())
                    .map(|b| String::from_utf8(b.0).unwrap_or_default());
                if webhook_bundle.as_deref() != Some(bundle.as_str()) {
                    return Err("webhook caBundle not updated yet".to_owned());
                }
                verifies(
                    &bundle,
                    &text(&secret, "tls.crt"),
                    &format!("{SPROCKET_SERVICE}.{namespace}.svc"),
                )?;
                let deployment = deployments
                    .get(SPROCKET_DEPLOYMENT)
                    .await
                    .map_err(|e| e.to_string())?;
                if template_ca_hash(&deployment).as_deref() != Some(hash.as_str()) {
                    return Err("deployment not rolled to the new ca yet".to_owned());
                }
                if deployment.metadata.generation.unwrap_or(0) <= first_generation {
                    return Err("deployment generation unchanged".to_owned());
                }
                Ok(())
            }
        })
        .await;
        csvs.delete(SPROCKET_CSV, &DeleteParams::default())
            .await
            .unwrap();
    })
    .await;
    delete_crd(&client, &crd_name).await;
    operator.stop().await;
}
