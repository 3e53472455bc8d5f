//! CatalogSource decisions: serving mode, registry objects, polling.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use catalog_operator::decide::catalog_source::{
    self, PollSchedule, RegistryPodOptions, Serving, SpecInvalid, UpdatePodAction,
};
use jiff::{SignedDuration, Timestamp};
use olm_api::catalog_source::CatalogSource;

fn catalog(yaml: &str) -> CatalogSource {
    serde_yaml_ng::from_str(yaml).unwrap()
}

const IMAGE: &str = r#"
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: my.catalog, namespace: olm, uid: u-1, creationTimestamp: "2026-11-22T10:00:00Z"}
spec:
  sourceType: grpc
  image: quay.io/org/catalog:latest
  secrets: [pull-a]
  updateStrategy: {registryPoll: {interval: 10m}}
"#;

#[test]
fn serving_follows_upstream_precedence() {
    let cases: &[(&str, Result<Serving, SpecInvalid>)] = &[
        (
            "{sourceType: grpc, image: i:1}",
            Ok(Serving::Image {
                image: "i:1".into(),
            }),
        ),
        (
            "{sourceType: grpc, address: 'a:50051'}",
            Ok(Serving::Address {
                address: "a:50051".into(),
            }),
        ),
        // Image wins over address for what OLM runs (ReconcilerForSource).
        (
            "{sourceType: grpc, image: i:1, address: 'a:50051'}",
            Ok(Serving::Image {
                image: "i:1".into(),
            }),
        ),
        (
            "{sourceType: grpc}",
            Err(SpecInvalid(
                "image and address unset: at least one must be set for sourcetype: grpc".into(),
            )),
        ),
        (
            "{sourceType: configmap, configMap: cm}",
            Ok(Serving::ConfigMap { name: "cm".into() }),
        ),
        (
            "{sourceType: internal, configMap: cm}",
            Ok(Serving::ConfigMap { name: "cm".into() }),
        ),
        (
            "{sourceType: configmap}",
            Err(SpecInvalid(
                "configmap name unset: must be set for sourcetype: configmap".into(),
            )),
        ),
        (
            "{sourceType: git}",
            Err(SpecInvalid("unknown sourcetype: git".into())),
        ),
    ];
    for (spec, want) in cases {
        let c = catalog(&format!(
            "{{apiVersion: operators.coreos.com/v1alpha1, kind: CatalogSource, metadata: {{name: c, namespace: n}}, spec: {spec}}}"
        ));
        assert_eq!(&catalog_source::serving(&c), want, "{spec}");
    }
}

#[test]
fn the_registry_address_prefers_spec_address_then_service() {
    let mut c = catalog(IMAGE);
    assert_eq!(c.registry_address(), None);
    c.status = serde_yaml_ng::from_str(
        "{registryService: {protocol: grpc, serviceName: my-catalog, serviceNamespace: olm, port: '50051'}}",
    )
    .unwrap();
    assert_eq!(
        c.registry_address().as_deref(),
        Some("my-catalog.olm.svc:50051")
    );
    c.spec.address = Some("10.0.0.1:50051".into());
    assert_eq!(c.registry_address().as_deref(), Some("10.0.0.1:50051"));
}

fn objects(c: &CatalogSource, ns_labels: &[(&str, &str)]) -> catalog_source::RegistryObjects {
    let serving = catalog_source::serving(c).unwrap();
    let ns: BTreeMap<String, String> = ns_labels
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    let options = RegistryPodOptions {
        workload_user_id: Some(1001),
        config_map_server_image: "quay.io/olm/configmap-server:v1".into(),
        opm_image: "quay.io/olm/opm@sha256:abc".into(),
        util_image: "quay.io/olm/util:v1".into(),
    };
    catalog_source::registry_objects(c, &serving, &ns, &options).unwrap()
}

#[test]
fn image_catalog_gets_upstreams_pod_service_and_policies() {
    let c = catalog(IMAGE);
    let objects = objects(&c, &[]);
    let pod = &objects.pod;
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("my.catalog-"));
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["olm.catalogSource"], "my.catalog");
    assert_eq!(labels["olm.managed"], "true");
    assert!(labels.contains_key("olm.pod-spec-hash"));
    assert_eq!(
        pod.metadata.annotations.as_ref().unwrap()["cluster-autoscaler.kubernetes.io/safe-to-evict"],
        "true"
    );
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(
        spec.node_selector.as_ref().unwrap()["kubernetes.io/os"],
        "linux"
    );
    assert_eq!(spec.service_account_name.as_deref(), Some("my.catalog"));
    assert!(spec.security_context.is_none(), "legacy by default");
    let container = &spec.containers[0];
    assert_eq!(container.name, "registry-server");
    assert_eq!(
        container.image_pull_policy.as_deref(),
        Some("Always"),
        "tag => Always"
    );
    assert_eq!(container.ports.as_ref().unwrap()[0].container_port, 50051);
    let readiness = container.readiness_probe.as_ref().unwrap();
    assert_eq!(readiness.grpc.as_ref().unwrap().port, 50051);
    assert_eq!(readiness.initial_delay_seconds, Some(5));
    assert_eq!(
        container
            .liveness_probe
            .as_ref()
            .unwrap()
            .initial_delay_seconds,
        Some(10)
    );
    let startup = container.startup_probe.as_ref().unwrap();
    assert_eq!(
        (startup.failure_threshold, startup.period_seconds),
        (Some(15), Some(10))
    );
    let requests = container
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap();
    assert_eq!(
        (requests["cpu"].0.as_str(), requests["memory"].0.as_str()),
        ("10m", "50Mi")
    );

    assert_eq!(
        objects.service.metadata.name.as_deref(),
        Some("my-catalog"),
        "dots become dashes"
    );
    let service_spec = objects.service.spec.as_ref().unwrap();
    assert_eq!(service_spec.ports.as_ref().unwrap()[0].port, 50051);
    assert_eq!(
        service_spec.selector.as_ref().unwrap()["olm.catalogSource"],
        "my.catalog"
    );
    assert!(
        objects
            .service
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key("olm.service-spec-hash")
    );
    let pull: Vec<_> = objects
        .service_account
        .image_pull_secrets
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(pull, ["pull-a"]);

    let names: Vec<_> = objects
        .network_policies
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        ["my.catalog-grpc-server", "my.catalog-unpack-bundles"]
    );
    let grpc = objects.network_policies[0].spec.as_ref().unwrap();
    assert_eq!(grpc.egress, None, "image registries get no egress");
    assert_eq!(grpc.policy_types.as_deref().unwrap(), ["Ingress", "Egress"]);
    for owner in [&objects.pod.metadata, &objects.service.metadata] {
        let owner = &owner.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("CatalogSource", "u-1")
        );
    }
}

#[test]
fn restricted_namespaces_and_config_give_restricted_pods() {
    let c = catalog(IMAGE);
    for (ns_labels, config, restricted) in [
        (
            vec![("pod-security.kubernetes.io/enforce", "restricted")],
            None,
            true,
        ),
        (
            vec![("pod-security.kubernetes.io/enforce", "baseline")],
            None,
            false,
        ),
        (vec![], Some("restricted"), true),
        (
            vec![("pod-security.kubernetes.io/enforce", "restricted")],
            Some("legacy"),
            false,
        ),
    ] {
        let mut c = c.clone();
        if let Some(config) = config {
            c.spec.grpc_pod_config =
                serde_yaml_ng::from_str(&format!("{{securityContextConfig: {config}}}")).unwrap();
        }
        let spec = objects(&c, &ns_labels).pod.spec.unwrap();
        assert_eq!(
            spec.security_context.is_some(),
            restricted,
            "{ns_labels:?} {config:?}"
        );
        if restricted {
            let security = spec.security_context.unwrap();
            assert_eq!(security.seccomp_profile.unwrap().type_, "RuntimeDefault");
            assert_eq!(
                (security.run_as_user, security.run_as_non_root),
                (Some(1001), Some(true))
            );
            let container = spec.containers[0].security_context.clone().unwrap();
            assert_eq!(container.allow_privilege_escalation, Some(false));
            assert_eq!(container.capabilities.unwrap().drop.unwrap(), ["ALL"]);
        }
    }
}

#[test]
fn grpc_pod_config_shapes_the_pod() {
    let mut c = catalog(IMAGE);
    c.spec.image = Some("quay.io/org/catalog@sha256:0123".into());
    c.spec.grpc_pod_config = serde_yaml_ng::from_str(
        r#"
nodeSelector: {disk: ssd}
priorityClassName: low
tolerations: [{key: dedicated, operator: Exists}]
memoryTarget: 64Mi
extractContent: {catalogDir: /configs, cacheDir: /tmp/cache}
"#,
    )
    .unwrap();
    let spec = objects(&c, &[]).pod.spec.unwrap();
    assert_eq!(
        spec.node_selector.unwrap(),
        BTreeMap::from([("disk".into(), "ssd".into())])
    );
    assert_eq!(spec.priority_class_name.as_deref(), Some("low"));
    assert_eq!(
        spec.tolerations.unwrap()[0].key.as_deref(),
        Some("dedicated")
    );
    let container = &spec.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("quay.io/olm/opm@sha256:abc")
    );
    assert_eq!(
        container.command.as_ref().unwrap(),
        &[
            "/bin/opm",
            "serve",
            "/extracted-catalog/catalog",
            "--cache-dir=/extracted-catalog/cache"
        ]
    );
    let env = container.env.as_ref().unwrap();
    assert_eq!(
        (env[0].name.as_str(), env[0].value.as_deref()),
        ("GOMEMLIMIT", Some("67108864B"))
    );
    assert_eq!(
        container
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["memory"]
            .0,
        "64Mi"
    );
    let init = spec.init_containers.unwrap();
    assert_eq!(init[1].name, "extract-content");
    assert_eq!(
        init[1].image.as_deref(),
        Some("quay.io/org/catalog@sha256:0123")
    );
    assert_eq!(
        init[1].image_pull_policy.as_deref(),
        Some("IfNotPresent"),
        "digest => IfNotPresent"
    );
    assert!(
        init[1]
            .command
            .as_ref()
            .unwrap()
            .contains(&"--cache.from=/tmp/cache".to_owned())
    );

    // The annotation overrides the configured priority class.
    let mut annotated = c.clone();
    annotated.metadata.annotations = Some(BTreeMap::from([(
        "operatorframework.io/priorityclass".into(),
        "high".into(),
    )]));
    let spec = objects(&annotated, &[]).pod.spec.unwrap();
    assert_eq!(spec.priority_class_name.as_deref(), Some("high"));
}

#[test]
fn pod_spec_hash_changes_with_the_spec_only() {
    let c = catalog(IMAGE);
    let hash = |c: &CatalogSource| {
        objects(c, &[]).pod.metadata.labels.unwrap()["olm.pod-spec-hash"].clone()
    };
    assert_eq!(hash(&c), hash(&c.clone()));
    let mut other = c.clone();
    other.spec.image = Some("quay.io/org/catalog:v2".into());
    assert_ne!(hash(&c), hash(&other));
}

#[test]
fn configmap_catalogs_run_the_configmap_server() {
    let c = catalog(
        "{apiVersion: operators.coreos.com/v1alpha1, kind: CatalogSource, metadata: {name: cm.cat, namespace: n}, spec: {sourceType: configmap, configMap: content}}",
    );
    let objects = objects(&c, &[]);
    let spec = objects.pod.spec.as_ref().unwrap();
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("cm.cat-configmap-server")
    );
    assert_eq!(
        spec.containers[0].command.as_ref().unwrap(),
        &["configmap-server", "-c", "content", "-n", "n"]
    );
    assert_eq!(
        spec.containers[0]
            .liveness_probe
            .as_ref()
            .unwrap()
            .initial_delay_seconds,
        Some(5)
    );
    assert_eq!(
        objects.service.metadata.name.as_deref(),
        Some("cm.cat"),
        "exact name"
    );
    assert!(
        objects
            .pod
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key("olm.configMapResourceVersion")
    );
    assert!(
        objects.network_policies[0]
            .spec
            .as_ref()
            .unwrap()
            .egress
            .is_some()
    );
}

#[test]
fn address_catalogs_run_nothing() {
    let c = catalog(
        "{apiVersion: operators.coreos.com/v1alpha1, kind: CatalogSource, metadata: {name: a, namespace: n}, spec: {sourceType: grpc, address: 'x:1'}}",
    );
    let serving = catalog_source::serving(&c).unwrap();
    assert!(
        catalog_source::registry_objects(
            &c,
            &serving,
            &BTreeMap::new(),
            &RegistryPodOptions::default()
        )
        .is_none()
    );
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

#[test]
fn poll_schedule_counts_from_the_last_poll_or_creation() {
    let c = catalog(IMAGE);
    let schedule =
        |c: &CatalogSource, now: &str| catalog_source::poll_schedule(c, at(now)).unwrap();
    // Created at 10:00, interval 10m.
    assert!(!schedule(&c, "2026-11-22T10:05:00Z").due);
    assert!(schedule(&c, "2026-11-22T10:10:01Z").due);
    assert_eq!(
        schedule(&c, "2026-11-22T10:05:00Z").requeue_after,
        SignedDuration::from_mins(10)
    );

    let mut polled = c.clone();
    polled.status =
        serde_yaml_ng::from_str("{latestImageRegistryPoll: '2026-11-22T10:30:00Z'}").unwrap();
    assert!(!schedule(&polled, "2026-11-22T10:35:00Z").due);
    assert!(schedule(&polled, "2026-11-22T10:40:01Z").due);

    // Long intervals requeue at most every 15 minutes, or sooner when due.
    let mut daily = c.clone();
    daily.spec.update_strategy =
        serde_yaml_ng::from_str("{registryPoll: {interval: 24h}}").unwrap();
    assert_eq!(
        schedule(&daily, "2026-11-22T10:05:00Z").requeue_after,
        SignedDuration::from_mins(15)
    );
    assert_eq!(
        schedule(&daily, "2026-11-23T09:55:00Z").requeue_after,
        SignedDuration::from_mins(5)
    );
}

#[test]
fn unreadable_intervals_fall_back_to_15m_with_upstreams_message() {
    let mut c = catalog(IMAGE);
    c.spec.update_strategy = serde_yaml_ng::from_str("{registryPoll: {interval: soon}}").unwrap();
    let PollSchedule {
        interval,
        invalid_interval,
        ..
    } = catalog_source::poll_schedule(&c, at("2026-11-22T10:05:00Z")).unwrap();
    assert_eq!(interval, SignedDuration::from_mins(15));
    assert_eq!(
        invalid_interval.as_deref(),
        Some(
            "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of 15m0s instead. Error: time: invalid duration \"soon\""
        )
    );
}

#[test]
fn only_image_catalogs_with_a_poll_strategy_are_polled() {
    let mut c = catalog(IMAGE);
    c.spec.update_strategy = None;
    assert!(catalog_source::poll_schedule(&c, at("2026-11-22T11:00:00Z")).is_none());
    let mut address = catalog(IMAGE);
    address.spec.image = None;
    address.spec.address = Some("x:1".into());
    assert!(catalog_source::poll_schedule(&address, at("2026-11-22T11:00:00Z")).is_none());
}

#[test]
fn update_pods_are_promoted_only_for_a_new_digest() {
    use UpdatePodAction::*;
    let cases = [
        (false, Some("sha256:b"), vec!["sha256:a"], Wait),
        (true, None, vec!["sha256:a"], Wait),
        (true, Some("sha256:b"), vec!["sha256:a"], Promote),
        (true, Some("sha256:a"), vec!["sha256:a"], Discard),
        (true, Some("sha256:b"), vec![], Promote),
    ];
    for (ready, digest, serving, want) in cases {
        assert_eq!(
            catalog_source::update_pod_action(ready, digest, &serving),
            want
        );
    }
    assert_eq!(
        catalog_source::digest_of_image_id("docker-pullable://quay.io/x/y@sha256:ab"),
        "sha256:ab"
    );
}

#[test]
fn jitter_stays_within_ten_percent() {
    let base = SignedDuration::from_mins(10);
    for unit in [0.0, 0.25, 0.5, 0.999, -3.0, 7.0] {
        let j = catalog_source::jitter(base, unit);
        assert!(
            j >= SignedDuration::from_secs(540) && j <= SignedDuration::from_secs(660),
            "{j:?}"
        );
    }
}

#[test]
fn quantities_read_as_bytes() {
    for (text, bytes) in [
        ("64Mi", Some(67_108_864)),
        ("1G", Some(1_000_000_000)),
        ("1e3", Some(1_000)),
        ("512", Some(512)),
        ("12.5Mi", None),
        ("lots", None),
    ] {
        assert_eq!(catalog_source::quantity_bytes(text), bytes, "{text}");
    }
}

#[test]
fn images_are_pinned_to_the_polled_digest() {
    let d = "sha256:abc";
    for (image, pinned) in [
        (
            "quay.io/org/catalog:latest",
            "quay.io/org/catalog@sha256:abc",
        ),
        ("quay.io/org/catalog", "quay.io/org/catalog@sha256:abc"),
        (
            "127.0.0.1:5000/org/catalog:v1",
            "127.0.0.1:5000/org/catalog@sha256:abc",
        ),
        (
            "127.0.0.1:5000/catalog",
            "127.0.0.1:5000/catalog@sha256:abc",
        ),
        (
            "quay.io/org/catalog:v1@sha256:old",
            "quay.io/org/catalog@sha256:abc",
        ),
    ] {
        assert_eq!(catalog_source::pinned_image(image, d), pinned, "{image}");
    }
    let c = catalog(IMAGE);
    let mut pod = objects(&c, &[]).pod;
    catalog_source::pin_pod(&mut pod, "quay.io/org/catalog:latest", d);
    let container = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("quay.io/org/catalog@sha256:abc")
    );
    assert_eq!(container.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        pod.metadata.annotations.as_ref().unwrap()["olm.catalog-operator/image-digest"],
        d
    );
    catalog_source::as_update_pod(&mut pod, "my.catalog");
    let labels = pod.metadata.labels.unwrap();
    assert_eq!(labels["olm.catalogSource"], "");
    assert_eq!(
        labels["catalogsource.operators.coreos.com/update"],
        "my.catalog"
    );
}

#[test]
fn the_allowed_registries_policy_covers_catalog_images_and_addresses() {
    use olm_oci::policy::RegistryRule;
    let registries = [RegistryRule::new("quay.io")];
    let addresses = [RegistryRule::new("*.olm.svc")];
    let refusal = |yaml: &str, images: &[RegistryRule], hosts: &[RegistryRule]| {
        let c = catalog(yaml);
        let serving = catalog_source::serving(&c).unwrap();
        catalog_source::policy_refusal(&c, &serving, images, hosts)
    };
    // No policy: everything goes.
    assert_eq!(refusal(IMAGE, &[], &[]), None);
    assert_eq!(refusal(IMAGE, &registries, &addresses), None);
    let staging = IMAGE.replace(
        "quay.io/org/catalog:latest",
        "staging.example/org/catalog:v2",
    );
    let refused = refusal(&staging, &registries, &[]).unwrap();
    assert!(
        refused.starts_with(
            "catalog image staging.example/org/catalog:v2 is hosted on registry staging.example"
        ),
        "{refused}"
    );
    // An address outside the allowed hosts is never dialled, image or not.
    let address = |a: &str| {
        format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: c, namespace: olm}}\nspec: {{sourceType: grpc, address: \"{a}\"}}\n"
        )
    };
    assert_eq!(
        refusal(&address("cat.olm.svc:50051"), &registries, &addresses),
        None
    );
    let refused = refusal(&address("169.254.169.254:80"), &registries, &addresses).unwrap();
    assert!(refused.contains("169.254.169.254:80"), "{refused}");
    assert_eq!(
        refusal(&address("169.254.169.254:80"), &registries, &[]),
        None,
        "the address rule is optional"
    );
    let both = format!("{IMAGE}  address: kubernetes.default.svc:443\n");
    assert!(
        refusal(&both, &registries, &addresses)
            .unwrap()
            .contains("kubernetes.default.svc:443")
    );
}
