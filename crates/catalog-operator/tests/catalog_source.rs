//! CatalogSource decisions: serving mode, registry objects, polling.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use catalog_operator::decide::catalog_source::{
    self, PollSchedule, RegistryPodOptions, Serving, SpecInvalid,
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

mod sync {
    //! One sync of a CatalogSource, decided: admission, the registry run,
    //! the probe, and when to look again.
    use std::time::Duration;

    use catalog_operator::decide::{
        catalog_source::{
            Serving,
            sync::{
                self, Admission, CatalogObservation, ConfigMapLookup, Probe, Recheck, RegistryRun,
            },
        },
        image_template::KubeVersion,
        promotion::Verdict,
    };
    use jiff::Timestamp;
    use olm_api::{
        catalog_source::{
            CatalogSource, CatalogSourceConditionReason, CatalogSourceStatus, ConnectivityState,
        },
        conditions,
    };
    use olm_oci::policy::RegistryRule;

    use super::{IMAGE, at, catalog};

    fn version() -> KubeVersion {
        KubeVersion::from_version_info("1", "31", "v1.31.4")
    }

    fn admit(
        c: &CatalogSource,
        config_map: &ConfigMapLookup,
        now: Timestamp,
    ) -> sync::AdmitDecision {
        let registries = [RegistryRule::new("quay.io")];
        sync::admit(&CatalogObservation {
            catalog: c,
            kube_version: &version(),
            allowed_registries: &registries,
            allowed_catalog_addresses: &[],
            config_map,
            now,
        })
    }

    fn condition(status: &CatalogSourceStatus, type_: &str) -> Option<(String, String, String)> {
        conditions::find(&status.conditions, type_)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    }

    const ADDRESS: &str = "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {name: c, namespace: olm}\nspec: {sourceType: grpc, address: 'cat.olm.svc:50051'}\n";
    const CONFIG_MAP: &str = "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {name: c, namespace: olm}\nspec: {sourceType: configmap, configMap: cm}\n";

    /// Admission, table-driven: (case, catalog YAML, ConfigMap lookup,
    /// what comes next, status reason).
    #[test]
    fn admission_follows_the_template_the_spec_the_policy_and_the_config_map() {
        let templated = IMAGE.replace(
            "uid: u-1,",
            "uid: u-1, annotations: {olm.catalogImageTemplate: 'quay.io/org/catalog:v{kube_major_version}.{kube_minor_version}'},",
        );
        let resolved_already =
            templated.replace("quay.io/org/catalog:latest", "quay.io/org/catalog:v1.31");
        let unresolvable = templated.replace("{kube_major_version}", "{kube_flavour}");
        let staging = IMAGE.replace("quay.io/org/catalog:latest", "staging.example/c:1");
        let bad_interval = IMAGE.replace("interval: 10m", "interval: soon");
        let found = ConfigMapLookup::Found {
            uid: Some("cm-uid".into()),
            resource_version: Some("7".into()),
        };
        let image = || Serving::Image {
            image: "quay.io/org/catalog:latest".into(),
        };
        let cases: Vec<(&str, String, ConfigMapLookup, &str, Option<&str>)> = vec![
            ("image catalog", IMAGE.into(), ConfigMapLookup::NotServed, "serve image", None),
            // The image is written first; the rest is decided by the sync
            // that write triggers, so an earlier reason stays until then.
            ("template resolves to a new image", templated, ConfigMapLookup::NotServed, "resolve quay.io/org/catalog:v1.31", Some("SpecInvalidError")),
            ("template already applied", resolved_already, ConfigMapLookup::NotServed, "serve image", None),
            ("template unresolvable", unresolvable, ConfigMapLookup::NotServed, "serve image", None),
            ("no image, no address", "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {name: c, namespace: olm}\nspec: {sourceType: grpc}\n".into(), ConfigMapLookup::NotServed, "refused", Some("SpecInvalidError")),
            ("image outside the policy", staging, ConfigMapLookup::NotServed, "refused", Some("RegistryNotAllowed")),
            ("configmap missing", CONFIG_MAP.into(), ConfigMapLookup::Missing, "configmap missing", Some("ConfigMapError")),
            ("configmap found", CONFIG_MAP.into(), found.clone(), "serve configmap", None),
            ("address", ADDRESS.into(), ConfigMapLookup::NotServed, "serve address", None),
            ("unreadable poll interval", bad_interval, ConfigMapLookup::NotServed, "serve image", Some("InvalidIntervalError")),
        ];
        for (name, yaml, lookup, want_next, want_reason) in cases {
            let mut c = catalog(&yaml);
            // A reason left from an earlier refusal is cleared when served.
            c.status =
                Some(serde_yaml_ng::from_str("{reason: SpecInvalidError, message: old}").unwrap());
            let decision = admit(&c, &lookup, at("2026-11-22T12:00:00Z"));
            let next = match &decision.next {
                Admission::ResolveImage(image) => format!("resolve {image}"),
                Admission::Refused => "refused".to_owned(),
                Admission::ConfigMapMissing => "configmap missing".to_owned(),
                Admission::Serve {
                    serving: Serving::Image { .. },
                    ..
                } => "serve image".to_owned(),
                Admission::Serve {
                    serving: Serving::ConfigMap { .. },
                    ..
                } => "serve configmap".to_owned(),
                Admission::Serve {
                    serving: Serving::Address { .. },
                    ..
                } => "serve address".to_owned(),
            };
            assert_eq!(next, want_next, "{name}");
            assert_eq!(
                decision.status.reason.as_ref().map(|r| r.as_str()),
                want_reason,
                "{name}"
            );
            if want_reason.is_none() {
                assert_eq!(decision.status.message, None, "{name}");
            } else {
                assert!(decision.status.message.is_some(), "{name}");
            }
        }
        // The image catalog's schedule comes with the decision.
        let decision = admit(
            &catalog(IMAGE),
            &ConfigMapLookup::NotServed,
            at("2026-11-22T12:00:00Z"),
        );
        let Admission::Serve { serving, schedule } = decision.next else {
            panic!("served");
        };
        assert_eq!(serving, image());
        assert!(schedule.is_some_and(|s| s.due));
    }

    #[test]
    fn the_image_template_speaks_through_two_conditions() {
        let base = "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: c\n  namespace: olm\n  annotations: {olm.catalogImageTemplate: 'TEMPLATE'}\nspec: {sourceType: grpc, image: 'quay.io/c:v1.31'}\n";
        let now = at("2026-11-22T12:00:00Z");
        let resolved = catalog(&base.replace(
            "TEMPLATE",
            "quay.io/c:v{kube_major_version}.{kube_minor_version}",
        ));
        let status = admit(&resolved, &ConfigMapLookup::NotServed, now).status;
        assert_eq!(
            condition(&status, "TemplatesHaveResolved"),
            Some((
                "True".into(),
                "AllTemplatesResolved".into(),
                "catalog image reference was successfully resolved".into()
            ))
        );
        assert_eq!(
            condition(&status, "ResolvedImage"),
            Some((
                "True".into(),
                "AllTemplatesResolved".into(),
                "quay.io/c:v1.31".into()
            ))
        );
        let unresolved = catalog(&base.replace("TEMPLATE", "quay.io/c:{kube_flavour}"));
        let status = admit(&unresolved, &ConfigMapLookup::NotServed, now).status;
        for type_ in ["TemplatesHaveResolved", "ResolvedImage"] {
            let (state, reason, _) = condition(&status, type_).unwrap();
            assert_eq!(
                (state.as_str(), reason.as_str()),
                ("False", "UnableToResolve"),
                "{type_}"
            );
        }
        // The annotation removed: both conditions go.
        let mut plain = catalog(&base.replace(
            "  annotations: {olm.catalogImageTemplate: 'TEMPLATE'}\n",
            "",
        ));
        plain.status = Some(status);
        let status = admit(&plain, &ConfigMapLookup::NotServed, now).status;
        assert!(status.conditions.is_empty());
    }

    #[test]
    fn references_move_only_when_what_they_point_at_does() {
        let t1 = at("2026-11-22T12:00:00Z");
        let t2 = at("2026-11-22T12:05:00Z");
        let found = |rv: &str| ConfigMapLookup::Found {
            uid: Some("cm-uid".into()),
            resource_version: Some(rv.into()),
        };
        let mut c = catalog(CONFIG_MAP);
        let first = admit(&c, &found("7"), t1).status;
        let reference = first.config_map_reference.clone().unwrap();
        assert_eq!(
            (
                reference.name.as_str(),
                reference.namespace.as_str(),
                reference.uid.as_deref(),
                reference.resource_version.as_deref()
            ),
            ("cm", "olm", Some("cm-uid"), Some("7"))
        );
        assert_eq!(reference.last_update_time.map(|t| t.0), Some(t1));
        c.status = Some(first.clone());
        assert_eq!(
            admit(&c, &found("7"), t2).status,
            first,
            "unchanged ConfigMap"
        );
        let moved = admit(&c, &found("8"), t2).status;
        assert_eq!(
            moved
                .config_map_reference
                .unwrap()
                .last_update_time
                .map(|t| t.0),
            Some(t2)
        );

        let mut a = catalog(ADDRESS);
        let first = admit(&a, &ConfigMapLookup::NotServed, t1).status;
        let service = first.registry_service.clone().unwrap();
        assert_eq!(service.protocol.as_deref(), Some("grpc"));
        assert_eq!(service.service_name, None);
        assert_eq!(service.created_at.map(|t| t.0), Some(t1));
        a.status = Some(first.clone());
        assert_eq!(admit(&a, &ConfigMapLookup::NotServed, t2).status, first);
    }

    fn run(service: &str, replaced: bool, guarded: bool, verdict: Option<Verdict>) -> RegistryRun {
        RegistryRun {
            service_name: service.into(),
            replaced,
            polled: false,
            guarded,
            verdict,
        }
    }

    #[test]
    fn registry_runs_record_the_service_the_poll_and_the_guard() {
        let t1 = at("2026-11-22T12:00:00Z");
        let t2 = at("2026-11-22T12:05:00Z");
        let mut status = CatalogSourceStatus::default();
        sync::registry_ran(&mut status, "olm", &run("c", false, false, None), t1);
        let service = status.registry_service.clone().unwrap();
        assert_eq!(
            (
                service.service_name.as_deref(),
                service.service_namespace.as_deref(),
                service.port.as_deref(),
                service.protocol.as_deref()
            ),
            (Some("c"), Some("olm"), Some("50051"), Some("grpc"))
        );
        assert_eq!(service.created_at.as_ref().map(|t| t.0), Some(t1));
        assert_eq!(status.latest_image_registry_poll, None);

        // The same Service, nothing replaced: createdAt stays, no new pod.
        let before = status.clone();
        sync::registry_ran(&mut status, "olm", &run("c", false, false, None), t2);
        assert_eq!(status, before);
        assert!(!sync::registry_replaced(&before, &status));
        // A replaced pod: createdAt moves, and that is what says "replaced".
        sync::registry_ran(&mut status, "olm", &run("c", true, false, None), t2);
        assert_eq!(
            status
                .registry_service
                .as_ref()
                .unwrap()
                .created_at
                .as_ref()
                .map(|t| t.0),
            Some(t2)
        );
        assert!(sync::registry_replaced(&before, &status));
        // The first registry of a catalog is no replacement.
        assert!(!sync::registry_replaced(
            &CatalogSourceStatus::default(),
            &status
        ));
        // A poll is recorded.
        let mut polled = run("c", false, false, None);
        polled.polled = true;
        sync::registry_ran(&mut status, "olm", &polled, t2);
        assert_eq!(
            status.latest_image_registry_poll.as_ref().map(|t| t.0),
            Some(t2)
        );
    }

    #[test]
    fn the_promotion_guard_speaks_through_promotion_blocked() {
        let now = at("2026-11-22T12:00:00Z");
        let blocked = Verdict::Blocked {
            content: ("hash".into(), "sha256:bad".into()),
            reason: CatalogSourceConditionReason::NEW_CONTENT_UNHEALTHY,
            message: "new content sha256:bad is unhealthy".into(),
        };
        let promoted = Verdict::Promoted {
            content: "sha256:good".into(),
        };
        let blocked_condition = |status: &CatalogSourceStatus| {
            condition(status, "PromotionBlocked").map(|c| (c.0, c.1))
        };

        // Never blocked, then promoted: no condition at all.
        let mut status = CatalogSourceStatus::default();
        sync::registry_ran(
            &mut status,
            "olm",
            &run("c", true, true, Some(promoted.clone())),
            now,
        );
        assert_eq!(blocked_condition(&status), None);
        // Blocked: True with the guard's reason.
        sync::registry_ran(
            &mut status,
            "olm",
            &run("c", false, true, Some(blocked)),
            now,
        );
        assert_eq!(
            blocked_condition(&status),
            Some(("True".into(), "NewContentUnhealthy".into()))
        );
        // No verdict (a restart lost it): left as found.
        sync::registry_ran(&mut status, "olm", &run("c", false, true, None), now);
        assert_eq!(
            blocked_condition(&status),
            Some(("True".into(), "NewContentUnhealthy".into()))
        );
        // Promoted after that: False, ContentPromoted.
        sync::registry_ran(
            &mut status,
            "olm",
            &run("c", true, true, Some(promoted)),
            now,
        );
        assert_eq!(
            blocked_condition(&status),
            Some(("False".into(), "ContentPromoted".into()))
        );
        // No longer guarded: the condition goes.
        sync::registry_ran(&mut status, "olm", &run("c", false, false, None), now);
        assert_eq!(blocked_condition(&status), None);
    }

    #[test]
    fn a_connection_is_new_when_its_state_address_or_content_changed() {
        let t1 = at("2026-11-22T12:00:00Z");
        let t2 = at("2026-11-22T12:00:30Z");
        let probe = |address: &str, state: &ConnectivityState, settled: bool| Probe {
            address: address.into(),
            state: state.clone(),
            settled,
        };
        let ready = ConnectivityState::READY;
        let failing = ConnectivityState::TRANSIENT_FAILURE;
        let mut first = CatalogSourceStatus::default();
        let connection = sync::connected(&mut first, probe("c.olm.svc:50051", &ready, false), t1);
        assert!(connection.ready && connection.changed);
        let state = first.connection_state.clone().unwrap();
        assert_eq!(state.last_connect.map(|t| t.0), Some(t1));
        assert_eq!(state.address.as_deref(), Some("c.olm.svc:50051"));

        // (case, probe, ready, changed)
        let cases = [
            (
                "same state and address",
                probe("c.olm.svc:50051", &ready, false),
                true,
                false,
            ),
            (
                "state changed",
                probe("c.olm.svc:50051", &failing, false),
                false,
                true,
            ),
            (
                "address changed",
                probe("d.olm.svc:50051", &ready, false),
                true,
                true,
            ),
            (
                "a replaced registry settled",
                probe("c.olm.svc:50051", &ready, true),
                true,
                true,
            ),
        ];
        for (name, probe, want_ready, want_changed) in cases {
            let mut status = first.clone();
            let connection = sync::connected(&mut status, probe, t2);
            assert_eq!(
                (connection.ready, connection.changed),
                (want_ready, want_changed),
                "{name}"
            );
            let last_connect = status.connection_state.unwrap().last_connect.map(|t| t.0);
            assert_eq!(
                last_connect,
                Some(if want_changed { t2 } else { t1 }),
                "{name}"
            );
        }
    }

    #[test]
    fn the_next_check_is_the_soonest_thing_pending() {
        let schedule = |secs: i64| catalog_operator::decide::catalog_source::PollSchedule {
            interval: jiff::SignedDuration::from_secs(secs),
            invalid_interval: None,
            due: false,
            requeue_after: jiff::SignedDuration::from_secs(secs),
        };
        let soon = schedule(0);
        let later = schedule(120);
        let s = Duration::from_secs;
        // (ready, settling, updating, schedule, want)
        let cases = [
            (true, false, false, None, s(30)),
            (false, false, false, None, sync::NOT_READY_RECHECK),
            (true, true, false, None, sync::REGISTRY_REPLACED_SETTLE),
            (true, false, true, None, sync::NOT_READY_RECHECK),
            (true, false, false, Some(&later), s(30)),
            (true, false, false, Some(&soon), s(1)),
            (false, true, true, Some(&soon), s(1)),
        ];
        for (ready, settling, updating, schedule, want) in cases {
            let got = sync::next_check(&Recheck {
                ready,
                settling,
                updating,
                schedule,
                resync: s(900),
                ready_recheck: s(30),
                jitter: 0.5,
            });
            assert_eq!(got, want, "{ready} {settling} {updating} {schedule:?}");
        }
        // A poll is spread by ±10 %, and still at least 1 s away.
        let ten_minutes = schedule(600);
        for (jitter, want) in [(0.0, s(540)), (0.5, s(600)), (0.75, s(630)), (1.0, s(660))] {
            let got = sync::next_check(&Recheck {
                ready: true,
                settling: false,
                updating: false,
                schedule: Some(&ten_minutes),
                resync: s(900),
                ready_recheck: s(900),
                jitter,
            });
            assert_eq!(got, want, "jitter {jitter}");
        }
        for jitter in [0.0, 0.999] {
            let got = sync::next_check(&Recheck {
                ready: true,
                settling: false,
                updating: false,
                schedule: Some(&soon),
                resync: s(900),
                ready_recheck: s(30),
                jitter,
            });
            assert_eq!(got, s(1), "jitter {jitter}");
        }
        // The resync bounds a READY catalog's check too.
        let got = sync::next_check(&Recheck {
            ready: true,
            settling: false,
            updating: false,
            schedule: None,
            resync: s(5),
            ready_recheck: s(30),
            jitter: 0.5,
        });
        assert_eq!(got, s(5));
    }
}

mod pods {
    //! The registry pods of a catalog, decided: promote, replace, poll,
    //! and clean up, table-driven.
    use catalog_operator::decide::{
        catalog_source::{
            PollSchedule,
            pods::{self, ContentCheck, PodAction, PodPlan, RegistryPods},
        },
        promotion::Refusal,
    };
    use k8s_openapi::api::core::v1::Pod;

    const IMAGE: &str = "quay.io/org/catalog:latest";

    /// A pod described in a few words: `name`, its role (`serving` or
    /// `update`), spec hash, and what it is (`ready`, `broken`,
    /// `deleting`, `evicted`, `digest=...`, `created=...`, `promoted=...`).
    fn pod(name: &str, role: &str, hash: &str, traits: &[&str]) -> Pod {
        let label = match role {
            "serving" => "olm.catalogSource",
            _ => "olm.catalogSource.update",
        };
        let mut value = serde_json::json!({
            "metadata": {
                "name": name, "namespace": "olm",
                "labels": {label: "cat", "olm.pod-spec-hash": hash},
                "annotations": {},
            },
            "spec": {"containers": [{"name": "registry-server", "image": IMAGE}]},
            "status": {"phase": "Running", "conditions": []},
        });
        for t in traits {
            match *t {
                "ready" => value["status"]["conditions"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!({"type": "Ready", "status": "True"})),
                "broken" => value["status"]["phase"] = "Failed".into(),
                "deleting" => {
                    value["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z".into();
                }
                "evicted" => value["status"]["conditions"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!({"type": "DisruptionTarget", "status": "True"})),
                other => match other.split_once('=').unwrap() {
                    ("created", at) => value["metadata"]["creationTimestamp"] = at.into(),
                    ("promoted", at) => {
                        value["metadata"]["annotations"]["olm.catalog-operator/promoted-at"] =
                            at.into();
                    }
                    ("digest", digest) => {
                        value["metadata"]["annotations"]["olm.catalog-operator/image-digest"] =
                            digest.into();
                        value["spec"]["containers"][0]["image"] =
                            format!("quay.io/org/catalog@{digest}").into();
                    }
                    (trait_, _) => panic!("no pod trait {trait_}"),
                },
            }
        }
        serde_json::from_value(value).unwrap()
    }

    fn schedule(due: bool) -> PollSchedule {
        PollSchedule {
            interval: jiff::SignedDuration::from_mins(10),
            invalid_interval: None,
            due,
            requeue_after: jiff::SignedDuration::from_mins(10),
        }
    }

    /// The plan in words, e.g. `delete old/1 promote new start-update`.
    fn words(plan: &PodPlan) -> String {
        let mut out: Vec<String> = plan
            .actions
            .iter()
            .map(|a| match a {
                PodAction::Block { reason, .. } => format!("block:{reason}"),
                PodAction::Delete { name, grace } => format!("delete {name}/{grace}"),
                PodAction::Promote { name, passed } => match passed {
                    Some(_) => format!("promote {name} (passed)"),
                    None => format!("promote {name}"),
                },
                PodAction::StartUpdate => "start-update".to_owned(),
                PodAction::CreateServing { pin } => format!("create pin={pin}"),
                PodAction::Poll { serving } => {
                    format!("poll from {}", serving.as_deref().unwrap_or("-"))
                }
                PodAction::Served(digest) => format!("served {digest}"),
            })
            .collect();
        if plan.pending {
            out.push("(pending)".to_owned());
        }
        if plan.replaced {
            out.push("(replaced)".to_owned());
        }
        out.join(" ")
    }

    struct Case {
        name: &'static str,
        serving: Vec<Pod>,
        updates: Vec<Pod>,
        polled: Option<bool>,
        guarded: bool,
        checks: Vec<(&'static str, ContentCheck)>,
        want: &'static str,
    }

    fn case(name: &'static str, serving: Vec<Pod>, updates: Vec<Pod>, want: &'static str) -> Case {
        Case {
            name,
            serving,
            updates,
            polled: None,
            guarded: false,
            checks: Vec::new(),
            want,
        }
    }

    fn refused() -> ContentCheck {
        ContentCheck::Refused(vec![Refusal {
            registry: "staging.example".into(),
            bundle: "a.v2".into(),
            image: "staging.example/a:v2".into(),
        }])
    }

    #[test]
    fn one_pod_with_the_current_spec_serves() {
        let d = "digest=sha256:aa";
        let cases = vec![
            case(
                "nothing runs: create one",
                vec![],
                vec![],
                "create pin=false (replaced)",
            ),
            case(
                "it runs: nothing to do",
                vec![pod("p", "serving", "h1", &["ready"])],
                vec![],
                "",
            ),
            case(
                "the spec changed: a new pod, the old one goes",
                vec![pod("old", "serving", "h0", &["ready"])],
                vec![],
                "create pin=false delete old/1 (replaced)",
            ),
            case(
                "an evicted pod is replaced and deleted at once",
                vec![pod("evicted", "serving", "h1", &["ready", "evicted"])],
                vec![],
                "create pin=false delete evicted/0 (replaced)",
            ),
            case(
                "a terminating pod is left to go",
                vec![pod("going", "serving", "h1", &["deleting"])],
                vec![],
                "create pin=false (replaced)",
            ),
            case(
                "a ready update pod takes over",
                vec![pod("p", "serving", "h1", &["ready", d])],
                vec![pod("u", "update", "h1", &["ready", "digest=sha256:bb"])],
                "promote u delete p/1 (replaced)",
            ),
            case(
                "an update pod still starting is waited for",
                vec![pod("p", "serving", "h1", &["ready", d])],
                vec![pod("u", "update", "h1", &[])],
                "(pending)",
            ),
            case(
                "an outdated or broken update pod is dropped",
                vec![pod("p", "serving", "h1", &["ready", d])],
                vec![
                    pod("u0", "update", "h0", &["ready"]),
                    pod("u1", "update", "h1", &["broken"]),
                ],
                "delete u0/1 delete u1/1",
            ),
            case(
                "only one update pod is promoted",
                vec![pod("p", "serving", "h1", &["ready", d])],
                vec![
                    pod("u1", "update", "h1", &["ready"]),
                    pod("u2", "update", "h1", &["ready"]),
                ],
                "promote u1 delete u2/1 delete p/1 (replaced)",
            ),
        ];
        check(cases);
    }

    #[test]
    fn a_polled_catalog_starts_new_content_as_an_update_pod() {
        let d = "digest=sha256:aa";
        let polled = |mut c: Case, due: bool| {
            c.polled = Some(due);
            c
        };
        let cases = vec![
            polled(
                case(
                    "a fresh pod is pinned",
                    vec![],
                    vec![],
                    "create pin=true (replaced)",
                ),
                false,
            ),
            polled(
                case(
                    "due: poll from what serves",
                    vec![pod("p", "serving", "h1", &["ready", d])],
                    vec![],
                    "poll from sha256:aa",
                ),
                true,
            ),
            polled(
                case(
                    "not due: nothing",
                    vec![pod("p", "serving", "h1", &["ready", d])],
                    vec![],
                    "",
                ),
                false,
            ),
            polled(
                case(
                    "two serve, one promoted after the other was created: the promoted one stays, \
                     and the poll starts from its digest",
                    vec![
                        pod(
                            "old",
                            "serving",
                            "h1",
                            &["ready", d, "created=2026-11-22T10:00:00Z"],
                        ),
                        pod(
                            "new",
                            "serving",
                            "h1",
                            &[
                                "ready",
                                "digest=sha256:bb",
                                "created=2026-11-22T09:59:00Z",
                                "promoted=2026-11-22T10:00:00.5Z",
                            ],
                        ),
                    ],
                    vec![],
                    "delete old/1 poll from sha256:bb",
                ),
                true,
            ),
            polled(
                case(
                    "two serve, neither promoted: the one created last stays",
                    vec![
                        pod(
                            "b",
                            "serving",
                            "h1",
                            &["ready", "digest=sha256:bb", "created=2026-11-22T10:00:01Z"],
                        ),
                        pod(
                            "a",
                            "serving",
                            "h1",
                            &["ready", d, "created=2026-11-22T10:00:00Z"],
                        ),
                    ],
                    vec![],
                    "delete a/1 poll from sha256:bb",
                ),
                true,
            ),
            polled(
                case(
                    "two serve, created in the same second: the name decides, whatever the order seen",
                    vec![
                        pod(
                            "a",
                            "serving",
                            "h1",
                            &["ready", d, "created=2026-11-22T10:00:00Z"],
                        ),
                        pod(
                            "b",
                            "serving",
                            "h1",
                            &["ready", "digest=sha256:bb", "created=2026-11-22T10:00:00Z"],
                        ),
                    ],
                    vec![],
                    "delete a/1 poll from sha256:bb",
                ),
                true,
            ),
            polled(
                case(
                    "due, but an update pod is on its way: no second poll",
                    vec![pod("p", "serving", "h1", &["ready", d])],
                    vec![pod("u", "update", "h1", &[])],
                    "(pending)",
                ),
                true,
            ),
        ];
        check(cases);
    }

    #[test]
    fn a_guarded_catalog_switches_only_to_content_the_guard_passed() {
        let d = "digest=sha256:aa";
        let new = "digest=sha256:bb";
        let guarded = |mut c: Case, checks: Vec<(&'static str, ContentCheck)>| {
            c.guarded = true;
            c.polled = Some(false);
            c.checks = checks;
            c
        };
        let serving = || vec![pod("p", "serving", "h1", &["ready", d])];
        let cases = vec![
            guarded(
                case(
                    "passed: promoted",
                    serving(),
                    vec![pod("u", "update", "h1", &["ready", new])],
                    "promote u (passed) delete p/1 (replaced)",
                ),
                vec![("u", ContentCheck::Allowed)],
            ),
            guarded(
                case(
                    "refused: blocked and dropped, the old content serves",
                    serving(),
                    vec![pod("u", "update", "h1", &["ready", new])],
                    "block:BundleRegistryNotAllowed delete u/1 served sha256:aa",
                ),
                vec![("u", refused())],
            ),
            guarded(
                case(
                    "not readable yet: waited for",
                    serving(),
                    vec![pod("u", "update", "h1", &["ready", new])],
                    "served sha256:aa (pending)",
                ),
                vec![("u", ContentCheck::Pending("no IP yet".into()))],
            ),
            guarded(
                case(
                    "never checked: waited for",
                    serving(),
                    vec![pod("u", "update", "h1", &["ready", new])],
                    "served sha256:aa (pending)",
                ),
                vec![],
            ),
            guarded(
                case(
                    "broken: blocked as unhealthy",
                    serving(),
                    vec![pod("u", "update", "h1", &["broken", new])],
                    "block:NewContentUnhealthy delete u/1 served sha256:aa",
                ),
                vec![],
            ),
            guarded(
                case(
                    "the spec changed: the old pod serves while the new spec starts as an update pod",
                    vec![pod("old", "serving", "h0", &["ready", d])],
                    vec![],
                    "start-update",
                ),
                vec![],
            ),
            guarded(
                case(
                    "the spec changed and its update pod passed: the old pod goes",
                    vec![pod("old", "serving", "h0", &["ready", d])],
                    vec![pod("u", "update", "h1", &["ready", new])],
                    "promote u (passed) delete old/1 (replaced)",
                ),
                vec![("u", ContentCheck::Allowed)],
            ),
            guarded(
                case(
                    "the spec changed, the old pod is not ready: replaced at once",
                    vec![pod("old", "serving", "h0", &[d])],
                    vec![],
                    "create pin=true delete old/1 (replaced)",
                ),
                vec![],
            ),
        ];
        check(cases);
    }

    fn check(cases: Vec<Case>) {
        for c in cases {
            let desired = pod("desired", "serving", "h1", &[]);
            let serving: Vec<&Pod> = c.serving.iter().collect();
            let updates: Vec<&Pod> = c.updates.iter().collect();
            let schedule = c.polled.map(schedule);
            let checks: Vec<(String, ContentCheck)> = c
                .checks
                .iter()
                .map(|(n, check)| ((*n).to_owned(), check.clone()))
                .collect();
            let observed = RegistryPods {
                desired: &desired,
                serving: &serving,
                updates: &updates,
                image: Some(IMAGE),
                schedule: schedule.as_ref(),
                guard_requested: c.guarded,
                checks: &checks,
                allowed_registries: &[],
            };
            // The guard is asked about exactly the ready, healthy update
            // pods of the current spec, and only for a guarded catalog.
            let asked: Vec<&str> = pods::to_check(&observed)
                .iter()
                .map(|p| p.metadata.name.as_deref().unwrap())
                .collect();
            let eligible: Vec<&str> = c
                .updates
                .iter()
                .filter(|p| {
                    c.guarded && p.metadata.labels.as_ref().unwrap()["olm.pod-spec-hash"] == "h1"
                })
                .filter(|p| p.status.as_ref().unwrap().phase.as_deref() != Some("Failed"))
                .filter(|p| {
                    !p.status
                        .as_ref()
                        .unwrap()
                        .conditions
                        .as_ref()
                        .unwrap()
                        .is_empty()
                })
                .map(|p| p.metadata.name.as_deref().unwrap())
                .collect();
            assert_eq!(asked, eligible, "{}", c.name);
            assert_eq!(words(&pods::plan(&observed)), c.want, "{}", c.name);
        }
    }

    #[test]
    fn refused_content_is_not_started_again_and_a_fresh_pod_comes_back_on_what_served() {
        let mut candidate = pod("desired", "update", "h1", &["digest=sha256:bb"]);
        let key = catalog_operator::decide::promotion::content_key(&candidate);
        assert!(!pods::may_start(&candidate, Some(&key)));
        assert!(pods::may_start(&candidate, None));
        let other = ("h1".to_owned(), "quay.io/org/catalog@sha256:cc".to_owned());
        assert!(pods::may_start(&candidate, Some(&other)));

        // Fresh pod of a guarded catalog: the refused digest is not run
        // again when the served one is known.
        let fresh = |guarded, blocked: Option<&(String, String)>, served| {
            pods::fresh_digest(&candidate, "sha256:bb", guarded, blocked, served)
        };
        assert_eq!(fresh(true, Some(&key), Some("sha256:aa")), "sha256:aa");
        assert_eq!(fresh(true, Some(&key), None), "sha256:bb");
        assert_eq!(fresh(true, None, Some("sha256:aa")), "sha256:bb");
        assert_eq!(fresh(false, Some(&key), Some("sha256:aa")), "sha256:bb");
        candidate.metadata.name = Some("renamed".into());
        assert!(
            !pods::may_start(&candidate, Some(&key)),
            "content, not name"
        );
    }
}
