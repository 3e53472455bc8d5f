//! Owned APIServices and webhooks: the names, objects and checks of
//! `decide::certs`, `decide::webhook` and `decide::api_service`, and the
//! certificate decision feeding the CSV state machine.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, SystemTime},
};

use k8s_openapi::{
    ByteString,
    api::{
        admissionregistration::v1::{ServiceReference, WebhookClientConfig},
        apps::v1::DeploymentSpec,
        core::v1::{Pod, Secret},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::{LabelSelector, Time},
    kube_aggregator::pkg::apis::apiregistration::v1::{
        APIService, APIServiceCondition, APIServiceStatus,
    },
};
use olm_api::{
    csv::{ClusterServiceVersion, CsvPhase, CsvReason, GroupVersionKind},
    operator_group::OperatorGroup,
};
use olm_certs::{BootstrapReason, Decision, RotationPolicy, ServingReason};
use olm_operator::decide::{
    api_service::{
        ApiServiceResourceFacts, Discovery, api_service_resources, api_services_check,
        backend_disrupted, desired_api_service, is_adoptable,
    },
    certs::{
        ServingCertInjection, auth_delegator_binding, auth_reader_binding, ca_key_secret_for,
        cert_outlook, hosts_for_service, inject_serving_cert, injections_from_secrets,
        material_from_secrets, rotation_decision, secret_for, secret_name, secret_reader_binding,
        secret_reader_role, service_for, service_name, serving_targets,
    },
    csv_phase::{ApiServiceResources, ApiServicesCheck, WebhooksCheck},
    deployment::{DeploymentOverrides, build_deployment},
    webhook::{
        ObservedWebhooks, configuration, configuration_labels, conversions_to_reset,
        namespace_selector, removed_configurations, webhook_current, webhooks_check,
        with_conversion_webhook, without_conversion_webhook,
    },
};
use serde_json::json;

use crate::fixtures::{CsvFixture, GADGET_SYSTEM, World, gadget_group, minute, widget_operator};

const T0: u64 = 1_900_000_000;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + seconds)
}

/// Lifetimes in seconds, so a table reads in seconds.
fn policy() -> RotationPolicy {
    RotationPolicy {
        ca_lifetime: Duration::from_secs(400),
        serving_lifetime: Duration::from_secs(100),
        serving_renew_fraction: 0.5,
        ca_renew_before: Duration::from_secs(100),
        overlap: Duration::from_secs(5),
    }
}

/// The widget operator serving the APIService `v1.gizmos.example.test` and
/// a validating webhook from `widget-controller`, and a conversion webhook
/// for its widgets CRD.
fn serving_widget() -> ClusterServiceVersion {
    let mut csv = widget_operator();
    csv.spec.apiservicedefinitions = Some(
        serde_json::from_value(json!({
            "owned": [{
                "name": "gizmos", "group": "gizmos.example.test", "version": "v1",
                "kind": "Gizmo", "deploymentName": "widget-controller", "containerPort": 5443
            }]
        }))
        .expect("apiservice definitions"),
    );
    csv.spec.webhookdefinitions = Some(
        serde_json::from_value(json!([
            {
                "generateName": "vwidget.gadgets.example.test",
                "type": "ValidatingAdmissionWebhook",
                "deploymentName": "widget-controller",
                "targetPort": "webhook",
                "webhookPath": "/validate",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "rules": [{"apiGroups": ["gadgets.example.test"], "apiVersions": ["v1"],
                           "operations": ["CREATE"], "resources": ["widgets"]}]
            },
            {
                "generateName": "cwidget.gadgets.example.test",
                "type": "ConversionWebhook",
                "deploymentName": "widget-controller",
                "admissionReviewVersions": ["v1"],
                "conversionCRDs": ["widgets.gadgets.example.test"]
            },
            {
                "generateName": "orphan.gadgets.example.test",
                "type": "MutatingAdmissionWebhook",
                "deploymentName": "no-such-deployment",
                "admissionReviewVersions": ["v1"]
            }
        ]))
        .expect("webhook definitions"),
    );
    csv
}

/// The target's certificates as one Secret: the layout written before the
/// CA key moved to a Secret of its own, which is still read (and what the
/// rotation tables below start from).
fn stored(material: &olm_certs::Material) -> Secret {
    let csv = serving_widget();
    let target = serving_targets(&csv).remove(0);
    let mut secret = secret_for(&csv, &target, material);
    secret.data.as_mut().expect("data").insert(
        "olmCASigningKey".to_owned(),
        ByteString(material.ca_key_pem.as_bytes().to_vec()),
    );
    secret
}

fn issue(service: &str, seconds: u64) -> olm_certs::Material {
    olm_certs::bootstrap(
        at(seconds),
        &policy(),
        &olm_certs::Profile::for_service(service, GADGET_SYSTEM),
    )
    .expect("issues")
}

#[test]
fn names_follow_upstream() {
    let table = [
        (
            service_name("widget-controller"),
            "widget-controller-service",
        ),
        (
            service_name("sprocket.controller.v2"),
            "sprocket-controller-v2-service",
        ),
        (
            secret_name("widget-controller-service"),
            "widget-controller-service-cert",
        ),
    ];
    for (got, want) in table {
        assert_eq!(got, want);
    }
    assert_eq!(
        hosts_for_service("widget-controller-service", GADGET_SYSTEM),
        [
            "widget-controller-service.gadget-system",
            "widget-controller-service.gadget-system.svc",
            "widget-controller-service.gadget-system.svc.cluster.local",
        ]
    );
}

#[test]
fn serving_targets_are_the_deployments_behind_apis_and_webhooks() {
    let csv = serving_widget();
    let targets = serving_targets(&csv);
    assert_eq!(
        targets.len(),
        1,
        "the orphan webhook names no strategy deployment"
    );
    let target = &targets[0];
    assert_eq!(target.deployment, "widget-controller");
    assert_eq!(target.secret, "widget-controller-service-cert");
    assert_eq!(target.service_account, "widget-sa");
    assert!(target.serves_api_service);
    let ports: Vec<(Option<&str>, i32, String)> = target
        .ports
        .iter()
        .map(|p| {
            (
                p.name.as_deref(),
                p.port,
                format!("{:?}", p.target_port.as_ref().expect("target port")),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            (Some("5443"), 5443, "Int(5443)".to_owned()),
            (Some("443"), 443, "String(\"webhook\")".to_owned()),
            (Some("443"), 443, "Int(443)".to_owned()),
        ],
        "APIServices first, then webhooks; identical ports once"
    );
    assert!(serving_targets(&widget_operator()).is_empty());
}

#[test]
fn rotation_is_decided_from_the_stored_certificates_only() {
    let csv = serving_widget();
    let target = serving_targets(&csv).remove(0);
    let fresh = stored(&issue(&target.service, 0));
    let elsewhere = stored(&issue("someone-else-service", 0));
    let mut upstream = fresh.clone();
    upstream
        .data
        .as_mut()
        .expect("data")
        .remove("olmCASigningKey");
    let mut garbage = fresh.clone();
    garbage
        .data
        .as_mut()
        .expect("data")
        .insert("tls.crt".into(), ByteString(b"not a certificate".to_vec()));

    let table: Vec<(&str, Option<&Secret>, u64, &str)> = vec![
        ("no secret yet", None, 0, "bootstrap-missing"),
        (
            "a secret upstream OLM wrote keeps no ca key",
            Some(&upstream),
            1,
            "bootstrap-missing",
        ),
        (
            "an unreadable certificate",
            Some(&garbage),
            1,
            "bootstrap-invalid",
        ),
        ("fresh certificates are kept", Some(&fresh), 1, "keep"),
        (
            "serving certificate at half its life",
            Some(&fresh),
            50,
            "renew-due",
        ),
        (
            "serving certificate expired",
            Some(&fresh),
            101,
            "renew-not-active",
        ),
        (
            "certificate for another service",
            Some(&elsewhere),
            1,
            "renew-hosts",
        ),
        ("ca expired", Some(&fresh), 401, "bootstrap-ca"),
    ];
    for (name, secret, now, want) in table {
        let got = match rotation_decision(secret, None, &target, GADGET_SYSTEM, at(now), &policy())
        {
            Decision::Keep { .. } => "keep",
            Decision::Bootstrap(BootstrapReason::Missing) => "bootstrap-missing",
            Decision::Bootstrap(BootstrapReason::Invalid(_)) => "bootstrap-invalid",
            Decision::Bootstrap(BootstrapReason::CaNotActive) => "bootstrap-ca",
            Decision::RenewServing(ServingReason::Due) => "renew-due",
            Decision::RenewServing(ServingReason::NotActive) => "renew-not-active",
            Decision::RenewServing(ServingReason::HostsChanged) => "renew-hosts",
            other => panic!("{name}: unexpected {other:?}"),
        };
        assert_eq!(got, want, "{name}");
    }

    // The CSV's status timestamps are no input: the outlook is computed from
    // the Secrets alone (the upstream bug this rules out let certsRotateAt
    // drift two years ahead of an expiring certificate).
    let secrets = BTreeMap::from([(target.secret.clone(), fresh)]);
    let early = cert_outlook(
        std::slice::from_ref(&target),
        &secrets,
        GADGET_SYSTEM,
        at(1),
        &policy(),
    );
    assert!(!early.rotation_due());
    assert_eq!(early.next, Some(T0 as i64 + 50), "look again at half life");
    let late = cert_outlook(
        std::slice::from_ref(&target),
        &secrets,
        GADGET_SYSTEM,
        at(101),
        &policy(),
    );
    assert_eq!(late.due, ["widget-controller"]);
    let missing = cert_outlook(&[target], &BTreeMap::new(), GADGET_SYSTEM, at(1), &policy());
    assert!(missing.rotation_due());
}

#[test]
fn a_succeeded_csv_with_a_due_certificate_needs_rotation_whatever_its_status_says() {
    let csv = serving_widget();
    let target = serving_targets(&csv).remove(0);
    let secrets = BTreeMap::from([(target.secret.clone(), stored(&issue(&target.service, 0)))]);
    let outlook = cert_outlook(&[target], &secrets, GADGET_SYSTEM, at(101), &policy());
    let world = {
        let mut world = World::widget_in(CsvPhase::SUCCEEDED, CsvReason::INSTALL_SUCCEEDED);
        let status = world.csv.status.as_mut().expect("status");
        // A status claiming rotation is two years away.
        status.certs_rotate_at = Some(Time(minute(2 * 365 * 24 * 60)));
        world.cert_rotation_due = outlook.rotation_due();
        world
    };
    let status = world.decide().status.expect("status written");
    assert_eq!(status.phase.map(String::from).as_deref(), Some("Pending"));
    assert_eq!(
        status.reason.map(String::from).as_deref(),
        Some("NeedsCertRotation")
    );
    assert_eq!(
        status.message.as_deref(),
        Some("CSV owns resources that require a cert refresh")
    );
}

#[test]
fn the_secret_stores_upstream_keys_and_round_trips() {
    let material = issue("widget-controller-service", 0);
    let csv = serving_widget();
    let target = serving_targets(&csv).remove(0);
    let secret = secret_for(&csv, &target, &material);
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys = |s: &Secret| -> BTreeSet<String> {
        s.data.as_ref().expect("data").keys().cloned().collect()
    };
    // The operator mounts (and may read) this one: no CA private key in it.
    assert_eq!(
        keys(&secret),
        BTreeSet::from([
            "olmCAKey".to_owned(),
            "tls.crt".to_owned(),
            "tls.key".to_owned()
        ])
    );
    assert_eq!(
        secret.metadata.annotations.as_ref().expect("annotations")["olmcahash"],
        olm_certs::ca_hash(&material.ca_bundle_pem)
    );
    let labels = secret.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels["olm.managed"], "true");
    assert_eq!(labels["olm.owner"], "widget-operator.v1.2.0");
    // The CA key is in a Secret of its own, owned the same way.
    let ca_key = ca_key_secret_for(&csv, &target, &material);
    assert_eq!(
        ca_key.metadata.name.as_deref(),
        Some("widget-controller-service-ca-key")
    );
    assert_eq!(
        keys(&ca_key),
        BTreeSet::from(["olmCASigningKey".to_owned()])
    );
    assert_eq!(
        ca_key.metadata.labels.as_ref().expect("labels")["olm.owner"],
        "widget-operator.v1.2.0"
    );
    assert_eq!(
        material_from_secrets(&secret, Some(&ca_key)),
        Some(material.clone())
    );
    assert_eq!(
        material_from_secrets(&secret, None),
        None,
        "no CA key, no material"
    );
    // The layout before the key moved is still read; the separate Secret wins.
    let legacy = stored(&material);
    assert_eq!(material_from_secrets(&legacy, None), Some(material.clone()));
    let other = issue("widget-controller-service", 0);
    let newer = ca_key_secret_for(&csv, &target, &other);
    assert_eq!(
        material_from_secrets(&legacy, Some(&newer)).map(|m| m.ca_key_pem),
        Some(other.ca_key_pem)
    );
}

#[test]
fn no_role_lets_the_operator_read_its_ca_key() {
    let csv = serving_widget();
    for target in serving_targets(&csv) {
        let role = secret_reader_role(&csv, &target);
        for rule in role.rules.iter().flatten() {
            let names = rule.resource_names.clone().unwrap_or_default();
            assert!(!names.is_empty(), "a rule over every Secret: {rule:?}");
            assert!(!names.contains(&target.ca_key_secret()), "{rule:?}");
        }
    }
}

fn strategy_spec() -> DeploymentSpec {
    widget_operator().spec.install.spec.deployments[0]
        .spec
        .clone()
}

fn injection(ca_hash: &str) -> ServingCertInjection {
    ServingCertInjection {
        deployment: "widget-controller".into(),
        secret: "widget-controller-service-cert".into(),
        ca_hash: ca_hash.into(),
    }
}

#[test]
fn deployments_mount_the_certificate_and_carry_the_ca_hash() {
    let mut spec = strategy_spec();
    inject_serving_cert(&mut spec, "widget-controller", &[injection("cafe")]);
    let once = spec.clone();
    inject_serving_cert(&mut spec, "widget-controller", &[injection("cafe")]);
    assert_eq!(spec, once, "injecting twice changes nothing");

    let template = &spec.template;
    assert_eq!(
        template
            .metadata
            .as_ref()
            .expect("meta")
            .annotations
            .as_ref()
            .expect("annotations")["olmcahash"],
        "cafe"
    );
    let pod = template.spec.as_ref().expect("pod");
    let volumes: Vec<(&str, Vec<(&str, &str)>)> = pod
        .volumes
        .as_ref()
        .expect("volumes")
        .iter()
        .map(|v| {
            (
                v.name.as_str(),
                v.secret
                    .as_ref()
                    .map(|s| {
                        s.items
                            .iter()
                            .flatten()
                            .map(|i| (i.key.as_str(), i.path.as_str()))
                            .collect()
                    })
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        volumes,
        [
            ("cache", vec![]),
            (
                "apiservice-cert",
                vec![("tls.crt", "apiserver.crt"), ("tls.key", "apiserver.key")]
            ),
            (
                "webhook-cert",
                vec![("tls.crt", "tls.crt"), ("tls.key", "tls.key")]
            ),
        ]
    );
    for container in &pod.containers {
        let mounts: Vec<(&str, &str)> = container
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| (m.name.as_str(), m.mount_path.as_str()))
            .collect();
        assert!(
            mounts.contains(&("apiservice-cert", "/apiserver.local.config/certificates"))
                && mounts.contains(&("webhook-cert", "/tmp/k8s-webhook-server/serving-certs")),
            "{}: {mounts:?}",
            container.name
        );
    }

    // A container already mounting something at the webhook path gets ours.
    let mut clash = strategy_spec();
    clash.template.spec.as_mut().expect("pod").containers[0]
        .volume_mounts
        .as_mut()
        .expect("mounts")
        .push(k8s_openapi::api::core::v1::VolumeMount {
            name: "own-certs".into(),
            mount_path: "/tmp/k8s-webhook-server/serving-certs".into(),
            ..Default::default()
        });
    inject_serving_cert(&mut clash, "widget-controller", &[injection("cafe")]);
    let mounts = clash.template.spec.expect("pod").containers[0]
        .volume_mounts
        .clone()
        .expect("mounts");
    assert!(!mounts.iter().any(|m| m.name == "own-certs"));

    // Another Deployment, or no injection: untouched. Without a service
    // account, the default one is named.
    let mut other = strategy_spec();
    inject_serving_cert(&mut other, "another-deployment", &[injection("cafe")]);
    assert_eq!(other, strategy_spec());
    let mut anonymous = strategy_spec();
    anonymous
        .template
        .spec
        .as_mut()
        .expect("pod")
        .service_account_name = None;
    inject_serving_cert(&mut anonymous, "widget-controller", &[injection("cafe")]);
    assert_eq!(
        anonymous
            .template
            .spec
            .expect("pod")
            .service_account_name
            .as_deref(),
        Some("default")
    );
}

#[test]
fn a_new_ca_changes_the_deployment_hash_so_the_pods_roll() {
    let csv = serving_widget();
    let strategy = &csv.spec.install.spec.deployments[0];
    let hash_with = |ca: &str| {
        let injections = [injection(ca)];
        let deployment = build_deployment(
            &csv,
            strategy,
            DeploymentOverrides {
                serving_certs: &injections,
                ..DeploymentOverrides::default()
            },
        )
        .expect("builds");
        deployment.metadata.labels.expect("labels")["olm.deployment-spec-hash"].clone()
    };
    assert_eq!(hash_with("cafe"), hash_with("cafe"));
    assert_ne!(hash_with("cafe"), hash_with("beef"));
}

#[test]
fn expected_deployments_need_every_secret() {
    let csv = serving_widget();
    let targets = serving_targets(&csv);
    let material = issue("widget-controller-service", 0);
    let secrets = BTreeMap::from([(targets[0].secret.clone(), stored(&material))]);
    assert_eq!(
        injections_from_secrets(&targets, &secrets),
        Some(vec![ServingCertInjection {
            deployment: "widget-controller".into(),
            secret: "widget-controller-service-cert".into(),
            ca_hash: olm_certs::ca_hash(&material.ca_bundle_pem),
        }])
    );
    assert_eq!(injections_from_secrets(&targets, &BTreeMap::new()), None);
}

#[test]
fn service_and_rbac_serve_the_deployment_service_account() {
    let csv = serving_widget();
    let target = serving_targets(&csv).remove(0);
    let service = service_for(&csv, &target);
    assert_eq!(
        service.metadata.name.as_deref(),
        Some("widget-controller-service")
    );
    assert_eq!(
        service.spec.expect("spec").selector.expect("selector"),
        BTreeMap::from([("app".to_owned(), "widget".to_owned())])
    );
    let role = secret_reader_role(&csv, &target);
    let rule = &role.rules.expect("rules")[0];
    assert_eq!(rule.verbs, ["get"]);
    assert_eq!(
        rule.resource_names.as_deref(),
        Some(&["widget-controller-service-cert".to_owned()][..])
    );
    for (name, namespace, role_kind, role_name, subjects) in [
        {
            let b = secret_reader_binding(&csv, &target);
            (
                b.metadata.name,
                b.metadata.namespace,
                b.role_ref.kind,
                b.role_ref.name,
                b.subjects,
            )
        },
        {
            let b = auth_delegator_binding(&csv, &target);
            (
                b.metadata.name,
                b.metadata.namespace,
                b.role_ref.kind,
                b.role_ref.name,
                b.subjects,
            )
        },
        {
            let b = auth_reader_binding(&csv, &target);
            (
                b.metadata.name,
                b.metadata.namespace,
                b.role_ref.kind,
                b.role_ref.name,
                b.subjects,
            )
        },
    ] {
        let subject = &subjects.expect("subjects")[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            ("widget-sa", Some(GADGET_SYSTEM)),
            "{name:?}"
        );
        let expected = match name.as_deref() {
            Some("widget-controller-service-cert") => (
                Some(GADGET_SYSTEM),
                "Role",
                "widget-controller-service-cert",
            ),
            Some("widget-controller-service-system:auth-delegator") => {
                (None, "ClusterRole", "system:auth-delegator")
            }
            Some("widget-controller-service-auth-reader") => (
                Some("kube-system"),
                "Role",
                "extension-apiserver-authentication-reader",
            ),
            other => panic!("unexpected binding {other:?}"),
        };
        assert_eq!(
            (namespace.as_deref(), role_kind.as_str(), role_name.as_str()),
            expected
        );
    }
}

fn group_with(spec: serde_json::Value, uid: Option<&str>) -> OperatorGroup {
    let mut group = gadget_group();
    group.spec = serde_json::from_value(spec).expect("group spec");
    group.metadata.uid = uid.map(str::to_owned);
    group
}

#[test]
fn webhooks_see_the_namespaces_of_the_operator_group() {
    let selector = LabelSelector {
        match_labels: Some(BTreeMap::from([("team".into(), "cogs".into())])),
        match_expressions: None,
    };
    let by_uid = LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "olm.operatorgroup.uid/c0ffee".into(),
            String::new(),
        )])),
        match_expressions: None,
    };
    type Row = (
        &'static str,
        OperatorGroup,
        Result<Option<LabelSelector>, String>,
    );
    let table: Vec<Row> = vec![
        (
            "all namespaces",
            group_with(json!({}), Some("c0ffee")),
            Ok(None),
        ),
        (
            "a selector",
            group_with(
                json!({"selector": {"matchLabels": {"team": "cogs"}}}),
                Some("c0ffee"),
            ),
            Ok(Some(selector)),
        ),
        (
            "target namespaces",
            group_with(json!({"targetNamespaces": ["cog-works"]}), Some("c0ffee")),
            Ok(Some(by_uid)),
        ),
        (
            "target namespaces of a group not created yet",
            group_with(json!({"targetNamespaces": ["cog-works"]}), None),
            Err("Missing UID".to_owned()),
        ),
    ];
    for (name, group, want) in table {
        assert_eq!(namespace_selector(&group), want, "{name}");
    }
}

#[test]
fn validating_configuration_as_upstream_builds_it() {
    let csv = serving_widget();
    let description = &csv.spec.webhooks()[0];
    let selector = LabelSelector::default();
    let configuration = configuration::<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    >(&csv, description, Some(&selector), "CA")
    .expect("builds");
    assert_eq!(
        configuration.metadata.generate_name.as_deref(),
        Some("vwidget.gadgets.example.test-")
    );
    let labels = configuration.metadata.labels.expect("labels");
    assert_eq!(
        labels["olm.webhook-description-generate-name"],
        "vwidget.gadgets.example.test"
    );
    assert_eq!(labels["olm.owner"], "widget-operator.v1.2.0");
    assert_eq!(labels["olm.managed"], "true");
    assert!(labels["olm.webhook-description-hash"].len() <= 63);
    let webhook = &configuration.webhooks.expect("webhooks")[0];
    assert_eq!(webhook.name, "vwidget.gadgets.example.test");
    assert_eq!(webhook.side_effects, "None");
    let service = webhook.client_config.service.as_ref().expect("service");
    assert_eq!(
        (
            service.name.as_str(),
            service.namespace.as_str(),
            service.path.as_deref(),
            service.port
        ),
        (
            "widget-controller-service",
            GADGET_SYSTEM,
            Some("/validate"),
            Some(443)
        )
    );
    assert_eq!(
        webhook.client_config.ca_bundle,
        Some(ByteString(b"CA".to_vec()))
    );

    // A changed description changes the hash label, which the install check
    // looks for.
    let mut changed = description.clone();
    changed.timeout_seconds = Some(7);
    assert_ne!(
        configuration_labels(&csv, description).expect("labels")["olm.webhook-description-hash"],
        configuration_labels(&csv, &changed).expect("labels")["olm.webhook-description-hash"]
    );
}

#[test]
fn server_defaults_are_not_differences() {
    let config = |bundle: &str| WebhookClientConfig {
        ca_bundle: Some(ByteString(bundle.as_bytes().to_vec())),
        service: Some(ServiceReference {
            name: "widget-controller-service".into(),
            namespace: GADGET_SYSTEM.into(),
            path: Some("/validate".into()),
            port: Some(443),
        }),
        url: None,
    };
    let empty = LabelSelector {
        match_labels: Some(BTreeMap::new()),
        match_expressions: None,
    };
    let teams = LabelSelector {
        match_labels: Some(BTreeMap::from([("team".into(), "cogs".into())])),
        match_expressions: None,
    };
    let table = [
        (
            "defaulted empty selector",
            (config("A"), Some(&empty)),
            (config("A"), None),
            true,
        ),
        (
            "same selector",
            (config("A"), Some(&teams)),
            (config("A"), Some(&teams)),
            true,
        ),
        (
            "new ca bundle",
            (config("A"), None),
            (config("B"), None),
            false,
        ),
        (
            "selector changed",
            (config("A"), None),
            (config("A"), Some(&teams)),
            false,
        ),
    ];
    for (name, found, desired, want) in table {
        assert_eq!(
            webhook_current((&found.0, found.1), (&desired.0, desired.1)),
            want,
            "{name}"
        );
    }
}

fn crd(preserve_unknown_fields: Option<bool>) -> CustomResourceDefinition {
    let mut crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.gadgets.example.test"},
        "spec": {
            "group": "gadgets.example.test", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]
        }
    }))
    .expect("crd");
    crd.spec.preserve_unknown_fields = preserve_unknown_fields;
    crd
}

fn all_namespaces_only(mut csv: ClusterServiceVersion) -> ClusterServiceVersion {
    csv.spec.install_modes = Some(
        serde_json::from_value(json!([
            {"type": "OwnNamespace", "supported": false},
            {"type": "AllNamespaces", "supported": true}
        ]))
        .expect("modes"),
    );
    csv
}

#[test]
fn conversion_webhooks_as_upstream_allows_them() {
    let global = all_namespaces_only(serving_widget());
    let description = &global.spec.webhooks()[1];
    let mut not_owned = global.clone();
    not_owned.spec.customresourcedefinitions = None;
    let some_namespaces = serving_widget();
    let table: Vec<(
        &str,
        &ClusterServiceVersion,
        CustomResourceDefinition,
        Result<(), &str>,
    )> = vec![
        (
            "an operator for some namespaces only",
            &some_namespaces,
            crd(None),
            Err(
                "unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces",
            ),
        ),
        (
            "a CRD the CSV does not own",
            &not_owned,
            crd(None),
            Err("csv widget-operator.v1.2.0 does not own CRD widgets.gadgets.example.test"),
        ),
        (
            "a CRD preserving unknown fields",
            &global,
            crd(Some(true)),
            Err(
                "crd.Spec.PreserveUnknownFields must be false to let API Server call webhook to do the conversion",
            ),
        ),
        ("an owned structural CRD", &global, crd(Some(false)), Ok(())),
    ];
    for (name, csv, crd, want) in table {
        let got = with_conversion_webhook(csv, description, &crd, "CA");
        match (got, want) {
            (Ok(updated), Ok(())) => {
                let conversion = updated.spec.conversion.clone().expect("conversion");
                assert_eq!(conversion.strategy, "Webhook", "{name}");
                let webhook = conversion.webhook.expect("webhook");
                assert_eq!(webhook.conversion_review_versions, ["v1"]);
                let config = webhook.client_config.expect("client config");
                assert_eq!(config.ca_bundle, Some(ByteString(b"CA".to_vec())));
                let service = config.service.expect("service");
                assert_eq!(
                    (service.name.as_str(), service.path.as_deref(), service.port),
                    ("widget-controller-service", Some("/"), Some(443)),
                    "{name}"
                );
                let reset = without_conversion_webhook(&updated);
                let reset = reset.spec.conversion.expect("conversion");
                assert_eq!((reset.strategy.as_str(), reset.webhook), ("None", None));
            }
            (Err(message), Err(expected)) => assert_eq!(message, expected, "{name}"),
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn conversions_are_reset_only_when_nothing_replaces_the_csv() {
    let csv = serving_widget();
    assert_eq!(
        conversions_to_reset(&csv, std::slice::from_ref(&csv)),
        ["widgets.gadgets.example.test"]
    );
    let successor = widget_operator()
        .named("widget-operator.v1.3.0")
        .replacing("widget-operator.v1.2.0");
    assert!(conversions_to_reset(&csv, &[csv.clone(), successor]).is_empty());
    assert!(conversions_to_reset(&widget_operator(), &[]).is_empty());
}

#[test]
fn the_webhook_install_check() {
    let csv = serving_widget();
    let [validating, _, mutating] = csv.spec.webhooks() else {
        panic!("three webhooks");
    };
    let current = |d| configuration_labels(&csv, d).expect("labels");
    let mut stale = current(validating);
    stale.insert("olm.webhook-description-hash".into(), "old".into());
    let mut ready = crd(Some(false));
    ready = with_conversion_webhook(
        &all_namespaces_only(csv.clone()),
        &csv.spec.webhooks()[1],
        &ready,
        "CA",
    )
    .expect("converts");
    let world = |validating_labels: Option<BTreeMap<String, String>>,
                 conversion: Option<CustomResourceDefinition>| {
        ObservedWebhooks {
            validating: validating_labels
                .map(|l| BTreeMap::from([("vwidget.gadgets.example.test-x1".to_owned(), l)]))
                .unwrap_or_default(),
            mutating: BTreeMap::from([(
                "orphan.gadgets.example.test-y2".to_owned(),
                current(mutating),
            )]),
            conversion_crds: conversion
                .map(|c| BTreeMap::from([("widgets.gadgets.example.test".to_owned(), c)]))
                .unwrap_or_default(),
        }
    };
    let table = [
        ("everything in place", world(Some(current(validating)), Some(ready.clone())), WebhooksCheck::Available),
        ("no configuration yet", world(None, Some(ready.clone())), WebhooksCheck::NotAvailable),
        ("configuration of an older description", world(Some(stale), Some(ready.clone())), WebhooksCheck::NotAvailable),
        (
            "conversion not handed to the webhook",
            world(Some(current(validating)), Some(crd(Some(false)))),
            WebhooksCheck::Failed("conversionWebhook not ready".into()),
        ),
        (
            "conversion CRD missing",
            world(Some(current(validating)), None),
            WebhooksCheck::Failed(
                "customresourcedefinitions.apiextensions.k8s.io \"widgets.gadgets.example.test\" not found".into(),
            ),
        ),
    ];
    for (name, observed, want) in table {
        assert_eq!(webhooks_check(&csv, &observed), want, "{name}");
    }
    assert_eq!(
        webhooks_check(&widget_operator(), &ObservedWebhooks::default()),
        WebhooksCheck::Available,
        "no webhooks declared"
    );
}

#[test]
fn configurations_of_removed_descriptions_are_deleted() {
    let csv = serving_widget();
    let labelled = |name: Option<&str>| {
        name.map(|n| {
            BTreeMap::from([(
                "olm.webhook-description-generate-name".to_owned(),
                n.to_owned(),
            )])
        })
        .unwrap_or_default()
    };
    let found = BTreeMap::from([
        (
            "kept-1".to_owned(),
            labelled(Some("vwidget.gadgets.example.test")),
        ),
        (
            "dropped-2".to_owned(),
            labelled(Some("old.gadgets.example.test")),
        ),
        ("unlabelled-3".to_owned(), labelled(None)),
    ]);
    assert_eq!(
        removed_configurations(&csv, &found),
        ["dropped-2", "unlabelled-3"]
    );
}

fn owner(name: &str, namespace: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("olm.owner".to_owned(), name.to_owned()),
        ("olm.owner.namespace".to_owned(), namespace.to_owned()),
        (
            "olm.owner.kind".to_owned(),
            "ClusterServiceVersion".to_owned(),
        ),
    ])
}

#[test]
fn apiservice_adoption() {
    let csv = serving_widget();
    let previous = widget_operator().named("widget-operator.v1.1.0");
    let leaving = widget_operator()
        .named("sprocket-operator.v3.0.0")
        .in_phase(CsvPhase::REPLACING, CsvReason::BEING_REPLACED, minute(0));
    let running = widget_operator()
        .named("sprocket-operator.v3.0.0")
        .in_phase(CsvPhase::SUCCEEDED, CsvReason::INSTALL_SUCCEEDED, minute(0));
    type Row = (
        &'static str,
        Option<BTreeMap<String, String>>,
        Vec<ClusterServiceVersion>,
        bool,
    );
    let table: Vec<Row> = vec![
        ("no labels", None, vec![], false),
        (
            "ours",
            Some(owner("widget-operator.v1.2.0", GADGET_SYSTEM)),
            vec![],
            true,
        ),
        (
            "the csv we replace",
            Some(owner("widget-operator.v1.1.0", GADGET_SYSTEM)),
            vec![previous],
            true,
        ),
        (
            "the csv we replace, gone",
            Some(owner("widget-operator.v1.1.0", GADGET_SYSTEM)),
            vec![],
            false,
        ),
        (
            "an owner being replaced",
            Some(owner("sprocket-operator.v3.0.0", GADGET_SYSTEM)),
            vec![leaving],
            true,
        ),
        (
            "a running owner",
            Some(owner("sprocket-operator.v3.0.0", GADGET_SYSTEM)),
            vec![running],
            false,
        ),
        (
            "same name elsewhere",
            Some(owner("widget-operator.v1.2.0", "cog-works")),
            vec![],
            false,
        ),
        (
            "another kind of owner",
            Some({
                let mut l = owner("widget-operator.v1.2.0", GADGET_SYSTEM);
                l.insert("olm.owner.kind".into(), "Subscription".into());
                l
            }),
            vec![],
            false,
        ),
    ];
    for (name, labels, csvs, want) in table {
        assert_eq!(is_adoptable(labels.as_ref(), &csv, &csvs), want, "{name}");
    }
}

#[test]
fn the_apiservice_as_upstream_registers_it() {
    let csv = serving_widget();
    let description = &csv.spec.owned_api_services()[0];
    let annotations = BTreeMap::from([("gadgets.example.test/team".to_owned(), "cogs".to_owned())]);
    let created = desired_api_service(&csv, description, None, "CA", Some(&annotations));
    assert_eq!(
        created.metadata.name.as_deref(),
        Some("v1.gizmos.example.test")
    );
    assert_eq!(created.metadata.annotations.as_ref(), Some(&annotations));
    let labels = created.metadata.labels.clone().expect("labels");
    assert_eq!(labels["olm.owner"], "widget-operator.v1.2.0");
    assert_eq!(labels["olm.managed"], "true");
    let spec = created.spec.clone().expect("spec");
    assert_eq!(
        (
            spec.group.as_deref(),
            spec.version.as_deref(),
            spec.group_priority_minimum,
            spec.version_priority
        ),
        (Some("gizmos.example.test"), Some("v1"), 2000, 15)
    );
    let service = spec.service.expect("service");
    assert_eq!(
        (
            service.name.as_deref(),
            service.namespace.as_deref(),
            service.port
        ),
        (
            Some("widget-controller-service"),
            Some(GADGET_SYSTEM),
            Some(5443)
        )
    );
    assert_eq!(spec.ca_bundle, Some(ByteString(b"CA".to_vec())));

    // An existing APIService keeps what others set (priorities, labels);
    // the Subscription's annotations apply only at creation.
    let mut existing = created.clone();
    existing.spec.as_mut().expect("spec").version_priority = 30;
    existing
        .metadata
        .labels
        .as_mut()
        .expect("labels")
        .insert("team".into(), "cogs".into());
    let updated = desired_api_service(&csv, description, Some(&existing), "NEW", None);
    let spec = updated.spec.expect("spec");
    assert_eq!(spec.version_priority, 30);
    assert_eq!(spec.ca_bundle, Some(ByteString(b"NEW".to_vec())));
    assert_eq!(updated.metadata.labels.expect("labels")["team"], "cogs");
}

fn api_service(available: Option<&str>) -> APIService {
    APIService {
        status: available.map(|status| APIServiceStatus {
            conditions: Some(vec![APIServiceCondition {
                type_: "Available".into(),
                status: status.into(),
                ..Default::default()
            }]),
        }),
        ..Default::default()
    }
}

#[test]
fn apiservice_availability_including_the_available_path() {
    let csv = serving_widget();
    let gizmo = GroupVersionKind {
        group: "gizmos.example.test".into(),
        version: "v1".into(),
        kind: "Gizmo".into(),
    };
    let found = |api: APIService| BTreeMap::from([("v1.gizmos.example.test".to_owned(), api)]);
    let discovered = Discovery {
        discovered: BTreeSet::from([gizmo]),
        error: None,
    };
    let nothing = Discovery::default();
    let failing = Discovery {
        discovered: BTreeSet::new(),
        error: Some("the server is currently unable to handle the request".into()),
    };
    let table = [
        (
            "not created yet",
            BTreeMap::new(),
            &discovered,
            false,
            ApiServicesCheck::NotAvailable,
        ),
        (
            "available and discoverable",
            found(api_service(Some("True"))),
            &discovered,
            false,
            ApiServicesCheck::Available,
        ),
        (
            "available but not discovered yet",
            found(api_service(Some("True"))),
            &nothing,
            false,
            ApiServicesCheck::NotAvailable,
        ),
        (
            "available but discovery fails",
            found(api_service(Some("True"))),
            &failing,
            false,
            ApiServicesCheck::Failed("the server is currently unable to handle the request".into()),
        ),
        (
            "unavailable",
            found(api_service(Some("False"))),
            &discovered,
            false,
            ApiServicesCheck::NotAvailable,
        ),
        (
            "no status yet",
            found(api_service(None)),
            &discovered,
            false,
            ApiServicesCheck::NotAvailable,
        ),
        (
            "unavailable while its pods restart",
            found(api_service(Some("False"))),
            &discovered,
            true,
            ApiServicesCheck::Retryable(
                "APIService v1.gizmos.example.test temporarily unavailable due to pod disruption"
                    .into(),
            ),
        ),
    ];
    for (name, found, discovered, disrupted, want) in table {
        assert_eq!(
            api_services_check(&csv, &found, discovered, disrupted),
            want,
            "{name}"
        );
    }
    assert_eq!(
        api_services_check(
            &widget_operator(),
            &BTreeMap::new(),
            &Discovery::default(),
            false
        ),
        ApiServicesCheck::Available,
        "nothing owned"
    );
}

fn pod(age_minutes: i64, phase: &str, waiting: Option<&str>, terminating: bool) -> Pod {
    let now = minute(10);
    serde_json::from_value(json!({
        "metadata": {
            "name": "widget-controller-1",
            "creationTimestamp": Time(now - jiff::SignedDuration::from_mins(age_minutes)),
            "deletionTimestamp": terminating.then_some(Time(now)),
        },
        "status": {
            "phase": phase,
            "containerStatuses": waiting.map(|reason| vec![json!({
                "name": "manager", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": reason}}
            })]),
        }
    }))
    .expect("pod")
}

#[test]
fn expected_disruptions_of_apiservice_pods() {
    let table = [
        ("terminating", pod(1, "Running", None, true), true),
        (
            "creating containers",
            pod(1, "Pending", Some("ContainerCreating"), false),
            true,
        ),
        (
            "initializing",
            pod(1, "Pending", Some("PodInitializing"), false),
            true,
        ),
        (
            "pending without statuses",
            pod(1, "Pending", None, false),
            true,
        ),
        (
            "image pull failing",
            pod(1, "Pending", Some("ImagePullBackOff"), false),
            false,
        ),
        (
            "crash looping",
            pod(1, "Running", Some("CrashLoopBackOff"), false),
            false,
        ),
        (
            "creating for too long",
            pod(6, "Pending", Some("ContainerCreating"), false),
            false,
        ),
        ("running", pod(1, "Running", None, false), false),
    ];
    for (name, pod, want) in table {
        assert_eq!(backend_disrupted(&[pod], minute(10)), want, "{name}");
    }
    assert!(!backend_disrupted(&[], minute(10)));
}

#[test]
fn apiservice_resources_checked_for_succeeded_and_failed_csvs() {
    let csv = serving_widget();
    let material = issue("widget-controller-service", 0);
    let hash = olm_certs::ca_hash(&material.ca_bundle_pem);
    let healthy = || ApiServiceResourceFacts {
        api_services: BTreeMap::from([(
            "v1.gizmos.example.test".to_owned(),
            desired_api_service(
                &csv,
                &csv.spec.owned_api_services()[0],
                None,
                &material.ca_bundle_pem,
                None,
            ),
        )]),
        services: BTreeSet::from(["widget-controller-service".to_owned()]),
        secrets: BTreeMap::from([(
            "widget-controller-service-cert".to_owned(),
            stored(&material),
        )]),
        deployments: BTreeMap::from([(
            "widget-controller".to_owned(),
            (Some(hash.clone()), Some("widget-sa".to_owned())),
        )]),
        service_accounts: BTreeSet::from(["widget-sa".to_owned()]),
        roles: BTreeSet::from(["widget-controller-service-cert".to_owned()]),
        role_bindings: BTreeSet::from(["widget-controller-service-cert".to_owned()]),
        cluster_role_bindings: BTreeSet::from([
            "widget-controller-service-system:auth-delegator".to_owned()
        ]),
        kube_system_role_bindings: BTreeSet::from([
            "widget-controller-service-auth-reader".to_owned()
        ]),
    };
    let broken = |message: &str, actionable: bool| ApiServiceResources::Broken {
        message: message.to_owned(),
        actionable,
    };
    let with = |change: &dyn Fn(&mut ApiServiceResourceFacts)| {
        let mut facts = healthy();
        change(&mut facts);
        facts
    };
    let table: Vec<(&str, ApiServiceResourceFacts, ApiServiceResources)> = vec![
        (
            "everything in place",
            healthy(),
            ApiServiceResources::Healthy,
        ),
        (
            "apiservice deleted",
            with(&|f| f.api_services.clear()),
            broken(
                "apiservices.apiregistration.k8s.io \"v1.gizmos.example.test\" not found",
                true,
            ),
        ),
        (
            "apiservice taken by someone else",
            with(&|f| {
                let api = f.api_services.values_mut().next().expect("api");
                api.metadata.labels = Some(owner("sprocket-operator.v3.0.0", "cog-works"));
            }),
            broken("v1.gizmos.example.test is not adoptable", false),
        ),
        (
            "secret deleted",
            with(&|f| f.secrets.clear()),
            broken("secrets \"widget-controller-service-cert\" not found", true),
        ),
        (
            "deployment still on the old ca",
            with(&|f| {
                f.deployments.insert(
                    "widget-controller".into(),
                    (Some("old".into()), Some("widget-sa".into())),
                );
            }),
            broken(
                "deployment widget-controller CA cert hash does not match expected",
                true,
            ),
        ),
        (
            "secret rotated but the apiservice not updated",
            with(&|f| {
                f.secrets.insert(
                    "widget-controller-service-cert".into(),
                    stored(&issue("widget-controller-service", 1)),
                );
            }),
            broken(
                "secret widget-controller-service-cert CA cert hash does not match expected",
                true,
            ),
        ),
        (
            "two bindings missing",
            with(&|f| {
                f.cluster_role_bindings.clear();
                f.kube_system_role_bindings.clear();
            }),
            broken(
                "[clusterrolebindings.rbac.authorization.k8s.io \"widget-controller-service-system:auth-delegator\" not found, rolebindings.rbac.authorization.k8s.io \"widget-controller-service-auth-reader\" not found]",
                true,
            ),
        ),
    ];
    for (name, facts, want) in table {
        assert_eq!(api_service_resources(&csv, &[], &facts), want, "{name}");
    }
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any Deployment name (a DNS subdomain) gives a Service name without
        /// dots, as a Service name must be a DNS label.
        #[test]
        fn service_names_are_dns_labels(deployment in "[a-z0-9]([-a-z0-9.]{0,40}[a-z0-9])?") {
            let service = service_name(&deployment);
            prop_assert!(!service.contains('.'));
            prop_assert!(service.ends_with("-service"));
            prop_assert_eq!(secret_name(&service), format!("{service}-cert"));
        }

        /// Injecting the certificate is idempotent, and the pod template
        /// always carries the injected hash.
        #[test]
        fn injection_is_idempotent(
            ca_hash in "[0-9a-f]{1,64}",
            anonymous in any::<bool>(),
            clash in any::<bool>(),
        ) {
            let mut spec = strategy_spec();
            let pod = spec.template.spec.as_mut().expect("pod");
            if anonymous {
                pod.service_account_name = None;
            }
            if clash {
                pod.containers[1].volume_mounts = Some(vec![k8s_openapi::api::core::v1::VolumeMount {
                    name: "other".into(),
                    mount_path: "/apiserver.local.config/certificates".into(),
                    ..Default::default()
                }]);
            }
            inject_serving_cert(&mut spec, "widget-controller", &[injection(&ca_hash)]);
            let once = spec.clone();
            inject_serving_cert(&mut spec, "widget-controller", &[injection(&ca_hash)]);
            prop_assert_eq!(&spec, &once);
            let annotations = spec.template.metadata.and_then(|m| m.annotations).expect("annotations");
            prop_assert_eq!(annotations.get("olmcahash"), Some(&ca_hash));
        }
    }
}

#[test]
fn hostile_secrets_are_replaced_never_trusted() {
    let csv = serving_widget();
    let target = serving_targets(&csv).remove(0);
    let fresh = stored(&issue(&target.service, 0));
    let with = |key: &str, value: Vec<u8>| {
        let mut secret = fresh.clone();
        secret
            .data
            .as_mut()
            .expect("data")
            .insert(key.to_owned(), ByteString(value));
        secret
    };
    let huge = format!(
        "{}{}",
        text_of(&fresh, "olmCAKey"),
        "A".repeat(olm_certs::MAX_PEM_BYTES)
    );
    let other_key = stored(&issue(&target.service, 0));
    let table = [
        (
            "binary certificate",
            with("tls.crt", vec![0xff, 0xfe, 0x00]),
        ),
        ("oversized bundle", with("olmCAKey", huge.into_bytes())),
        (
            "key of another certificate",
            with("tls.key", text_of(&other_key, "tls.key").into_bytes()),
        ),
        (
            "ca key of another ca",
            with(
                "olmCASigningKey",
                text_of(&other_key, "olmCASigningKey").into_bytes(),
            ),
        ),
        (
            "bundle of another ca",
            with("olmCAKey", text_of(&other_key, "olmCAKey").into_bytes()),
        ),
    ];
    for (name, secret) in table {
        let decision = rotation_decision(
            Some(&secret),
            None,
            &target,
            GADGET_SYSTEM,
            at(1),
            &policy(),
        );
        assert!(
            matches!(
                decision,
                Decision::Bootstrap(_) | Decision::RenewServing(ServingReason::Untrusted)
            ),
            "{name}: {decision:?}"
        );
    }
}

fn text_of(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().expect("data")[key].0.clone()).expect("text")
}
