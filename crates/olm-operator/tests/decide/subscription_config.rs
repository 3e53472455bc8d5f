//! Subscription `spec.config` on the operator's Deployments: which
//! Subscription applies, each field's merge rule as upstream's
//! `overrides/inject` has it (one table row per rule), and the invariants
//! (applying twice changes nothing more; every config change moves the spec
//! hash).

// Helpers of a test module: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use k8s_openapi::api::apps::v1::Deployment;
use olm_api::{
    labels,
    subscription::{Subscription, SubscriptionConfig},
};
use olm_operator::decide::{
    deployment::{DeploymentOverrides, apply_overrides, build_deployment},
    subscription_config::{
        config_for, named_csvs, owning_subscription, subscription_fingerprint, trim_subscription,
    },
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::fixtures::{
    CsvFixture, GroupFixture, gadget_group, sprocket_subscription, widget_operator,
};

/// A Deployment whose pod has two containers, from the pod spec's JSON.
fn deployment(pod: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "widget-manager", "annotations": {"gear.example.test/kept": "yes"}},
        "spec": {
            "selector": {"matchLabels": {"app": "widget"}},
            "template": {
                "metadata": {"annotations": {"widgets.example.test/tier": "gold"}},
                "spec": pod,
            }
        }
    }))
    .unwrap()
}

fn config(value: Value) -> SubscriptionConfig {
    serde_json::from_value(value).unwrap()
}

fn applied(pod: Value, cfg: Value) -> Value {
    let mut deployment = deployment(pod);
    let cfg = config(cfg);
    apply_overrides(
        &mut deployment,
        DeploymentOverrides {
            config: Some(&cfg),
            ..DeploymentOverrides::default()
        },
    );
    serde_json::to_value(&deployment).unwrap()
}

#[test]
fn each_config_field_merges_as_upstream_merges_it() {
    // (what, pod spec before, config, JSON pointer, expected value there)
    let rows: Vec<(&str, Value, Value, &str, Value)> = vec![
        (
            "env: existing names keep their place and take the config's value, new ones are appended",
            json!({"containers": [{"name": "m", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}),
            json!({"env": [{"name": "C", "value": "3"}, {"name": "A", "value": "9"}]}),
            "/spec/template/spec/containers/0/env",
            json!([{"name": "A", "value": "9"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"}]),
        ),
        (
            "env reaches every container",
            json!({"containers": [{"name": "m"}, {"name": "sidecar"}]}),
            json!({"env": [{"name": "C", "value": "3"}]}),
            "/spec/template/spec/containers/1/env",
            json!([{"name": "C", "value": "3"}]),
        ),
        (
            "env leaves init containers alone",
            json!({"initContainers": [{"name": "init"}], "containers": [{"name": "m"}]}),
            json!({"env": [{"name": "C", "value": "3"}]}),
            "/spec/template/spec/initContainers/0",
            json!({"name": "init"}),
        ),
        (
            "envFrom: appended unless the same source is already there",
            json!({"containers": [{"name": "m", "envFrom": [{"configMapRef": {"name": "a"}}]}]}),
            json!({"envFrom": [{"configMapRef": {"name": "a"}}, {"secretRef": {"name": "b"}}]}),
            "/spec/template/spec/containers/0/envFrom",
            json!([{"configMapRef": {"name": "a"}}, {"secretRef": {"name": "b"}}]),
        ),
        (
            "volumes: merged by name, the config wins",
            json!({"containers": [{"name": "m"}], "volumes": [{"name": "cache", "emptyDir": {}}, {"name": "keep", "emptyDir": {}}]}),
            json!({"volumes": [{"name": "cache", "configMap": {"name": "c"}}, {"name": "new", "secret": {"secretName": "s"}}]}),
            "/spec/template/spec/volumes",
            json!([{"name": "cache", "configMap": {"name": "c"}}, {"name": "keep", "emptyDir": {}}, {"name": "new", "secret": {"secretName": "s"}}]),
        ),
        (
            "volumeMounts: merged by name into every container",
            json!({"containers": [{"name": "m", "volumeMounts": [{"name": "cache", "mountPath": "/old"}]}, {"name": "s"}]}),
            json!({"volumeMounts": [{"name": "cache", "mountPath": "/new"}]}),
            "/spec/template/spec/containers",
            json!([
                {"name": "m", "volumeMounts": [{"name": "cache", "mountPath": "/new"}]},
                {"name": "s", "volumeMounts": [{"name": "cache", "mountPath": "/new"}]}
            ]),
        ),
        (
            "tolerations: appended unless an equal one is there",
            json!({"containers": [{"name": "m"}], "tolerations": [{"key": "a", "operator": "Exists"}]}),
            json!({"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "a", "operator": "Exists", "effect": "NoSchedule"}]}),
            "/spec/template/spec/tolerations",
            json!([{"key": "a", "operator": "Exists"}, {"key": "a", "operator": "Exists", "effect": "NoSchedule"}]),
        ),
        (
            "resources: replace every container's",
            json!({"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}),
            json!({"resources": {"limits": {"memory": "64Mi"}}}),
            "/spec/template/spec/containers/0/resources",
            json!({"limits": {"memory": "64Mi"}}),
        ),
        (
            "nodeSelector: replaces the pod's",
            json!({"containers": [{"name": "m"}], "nodeSelector": {"old": "x", "zone": "a"}}),
            json!({"nodeSelector": {"zone": "b"}}),
            "/spec/template/spec/nodeSelector",
            json!({"zone": "b"}),
        ),
        (
            "affinity: a sub-field replaces the pod's, the others stay",
            json!({"containers": [{"name": "m"}], "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}},
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}
            }}),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "b", "operator": "Exists"}]}]}}}}),
            "/spec/template/spec/affinity",
            json!({
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "b", "operator": "Exists"}]}]}},
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}
            }),
        ),
        (
            "affinity: an empty sub-field clears only that sub-field",
            json!({"containers": [{"name": "m"}], "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}
            }}),
            json!({"affinity": {"podAntiAffinity": {}}}),
            "/spec/template/spec/affinity",
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}),
        ),
        (
            "affinity: an empty affinity clears all of it",
            json!({"containers": [{"name": "m"}], "affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}}),
            json!({"affinity": {}}),
            "/spec/template/spec/affinity",
            Value::Null,
        ),
        (
            "affinity: onto a pod without one, empty sub-fields are dropped",
            json!({"containers": [{"name": "m"}]}),
            json!({"affinity": {"nodeAffinity": {}, "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}}),
            "/spec/template/spec/affinity",
            json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}),
        ),
        (
            "annotations: added to the Deployment for keys it lacks",
            json!({"containers": [{"name": "m"}]}),
            json!({"annotations": {"gear.example.test/kept": "no", "gear.example.test/new": "1"}}),
            "/metadata/annotations",
            json!({"gear.example.test/kept": "yes", "gear.example.test/new": "1"}),
        ),
        (
            "annotations: added to the pod template for keys it lacks",
            json!({"containers": [{"name": "m"}]}),
            json!({"annotations": {"widgets.example.test/tier": "bronze", "gear.example.test/new": "1"}}),
            "/spec/template/metadata/annotations",
            json!({"gear.example.test/new": "1", "widgets.example.test/tier": "gold"}),
        ),
        (
            "an empty config changes nothing",
            json!({"containers": [{"name": "m", "env": [{"name": "A", "value": "1"}]}], "nodeSelector": {"zone": "a"}}),
            json!({}),
            "/spec/template/spec",
            json!({"containers": [{"name": "m", "env": [{"name": "A", "value": "1"}]}], "nodeSelector": {"zone": "a"}}),
        ),
    ];
    for (what, pod, cfg, pointer, expected) in rows {
        let got = applied(pod, cfg);
        assert_eq!(
            got.pointer(pointer).cloned().unwrap_or(Value::Null),
            expected,
            "{what}"
        );
    }
}

fn subscription(
    name: &str,
    namespace: &str,
    installed: Option<&str>,
    current: Option<&str>,
) -> Subscription {
    let mut subscription = sprocket_subscription();
    subscription.metadata.name = Some(name.to_owned());
    subscription.metadata.namespace = Some(namespace.to_owned());
    let status = subscription.status.get_or_insert_with(Default::default);
    status.installed_csv = installed.map(str::to_owned);
    status.current_csv = current.map(str::to_owned);
    subscription
}

#[test]
fn the_subscription_that_installed_the_csv_is_the_one_whose_config_applies() {
    let csv = "widget-operator.v1.2.0";
    let cases: Vec<(&str, Vec<Subscription>, Option<&str>)> = vec![
        (
            "installedCSV names it",
            vec![subscription("gizmo", "gadget-system", Some(csv), Some(csv))],
            Some("gizmo"),
        ),
        (
            "only currentCSV names it (installedCSV is set once the CSV exists)",
            vec![subscription("gizmo", "gadget-system", None, Some(csv))],
            Some("gizmo"),
        ),
        (
            "installedCSV wins over another Subscription's currentCSV",
            vec![
                subscription(
                    "upgrading",
                    "gadget-system",
                    Some("widget-operator.v1.1.0"),
                    Some(csv),
                ),
                subscription("gizmo", "gadget-system", Some(csv), Some(csv)),
            ],
            Some("gizmo"),
        ),
        (
            "a Subscription of another namespace never applies",
            vec![subscription("gizmo", "cog-works", Some(csv), Some(csv))],
            None,
        ),
        (
            "a Subscription naming another CSV does not apply",
            vec![subscription(
                "gizmo",
                "gadget-system",
                Some("widget-operator.v1.1.0"),
                None,
            )],
            None,
        ),
        ("no Subscription at all", vec![], None),
    ];
    for (what, subscriptions, expected) in cases {
        let found = owning_subscription(csv, "gadget-system", &subscriptions)
            .and_then(|s| s.metadata.name.as_deref());
        assert_eq!(found, expected, "{what}");
        assert_eq!(
            config_for(csv, "gadget-system", &subscriptions).is_some(),
            expected.is_some(),
            "{what}: config"
        );
    }
}

#[test]
fn the_cache_keeps_only_what_olm_operator_reads_of_a_subscription() {
    let mut subscription = serde_json::from_value::<Subscription>(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {
            "name": "gizmo", "namespace": "gadget-system",
            "labels": {"operators.coreos.com/widget-operator.gadget-system": ""},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{…}"},
            "managedFields": [{"manager": "kubectl"}]
        },
        "spec": {"name": "widget-operator", "source": "gizmo-catalog", "sourceNamespace": "olm-catalogs",
                 "config": {"env": [{"name": "A", "value": "1"}]}},
        "status": {
            "installedCSV": "widget-operator.v1.2.0", "currentCSV": "widget-operator.v1.3.0",
            "state": "UpgradePending", "lastUpdated": "2031-01-01T00:00:00Z",
            "catalogHealth": [{"catalogSourceRef": {"name": "gizmo-catalog"}, "healthy": true, "lastUpdated": "2031-01-01T00:00:00Z"}],
            "conditions": [{"type": "CatalogSourcesUnhealthy", "status": "False"}]
        }
    }))
    .unwrap();
    let before = subscription_fingerprint(&subscription);
    trim_subscription(&mut subscription);
    let status = subscription.status.clone().unwrap();
    assert_eq!(
        status.installed_csv.as_deref(),
        Some("widget-operator.v1.2.0")
    );
    assert_eq!(
        status.current_csv.as_deref(),
        Some("widget-operator.v1.3.0")
    );
    assert!(status.conditions.is_empty() && status.catalog_health.is_empty());
    assert!(status.state.is_none() && status.last_updated.is_none());
    assert!(subscription.metadata.annotations.is_none());
    assert!(subscription.metadata.managed_fields.is_none());
    assert!(
        subscription.metadata.labels.is_some(),
        "labels are read by adoption"
    );
    assert!(subscription.spec.config.is_some());
    assert_eq!(
        subscription_fingerprint(&subscription),
        before,
        "what trimming drops never counts as a change"
    );
    assert_eq!(
        named_csvs(&subscription),
        ["widget-operator.v1.2.0", "widget-operator.v1.3.0"]
    );

    let mut changed = subscription.clone();
    changed.spec.config = Some(config(json!({"env": [{"name": "A", "value": "2"}]})));
    assert_ne!(
        subscription_fingerprint(&changed),
        before,
        "a config change counts"
    );
    let mut upgraded = subscription.clone();
    upgraded.status.as_mut().unwrap().installed_csv = Some("widget-operator.v1.3.0".into());
    assert_ne!(
        subscription_fingerprint(&upgraded),
        before,
        "a new installedCSV counts"
    );
    assert_eq!(
        named_csvs(&upgraded),
        ["widget-operator.v1.3.0"],
        "named once"
    );
}

// Generators of small pod specs and configs whose names collide often, so
// that merges by name and by equality are exercised.

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_owned)
}

fn env_list() -> impl Strategy<Value = Value> {
    prop::collection::vec((name(), 0..3u8), 0..4).prop_map(|vars| {
        json!(
            vars.into_iter()
                .map(|(n, v)| json!({"name": n, "value": v.to_string()}))
                .collect::<Vec<_>>()
        )
    })
}

fn mounts() -> impl Strategy<Value = Value> {
    prop::collection::vec((name(), 0..3u8), 0..3).prop_map(|mounts| {
        json!(
            mounts
                .into_iter()
                .map(|(n, p)| json!({"name": n, "mountPath": format!("/m{p}")}))
                .collect::<Vec<_>>()
        )
    })
}

fn volumes() -> impl Strategy<Value = Value> {
    prop::collection::vec((name(), any::<bool>()), 0..3).prop_map(|volumes| {
        json!(
            volumes
                .into_iter()
                .map(|(n, secret)| if secret {
                    json!({"name": n, "secret": {"secretName": n}})
                } else {
                    json!({"name": n, "emptyDir": {}})
                })
                .collect::<Vec<_>>()
        )
    })
}

fn tolerations() -> impl Strategy<Value = Value> {
    prop::collection::vec((name(), any::<bool>()), 0..3).prop_map(|list| {
        json!(
            list.into_iter()
                .map(|(k, effect)| if effect {
                    json!({"key": k, "operator": "Exists", "effect": "NoSchedule"})
                } else {
                    json!({"key": k, "operator": "Exists"})
                })
                .collect::<Vec<_>>()
        )
    })
}

fn term(key: &str) -> Value {
    json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": key}}]})
}

/// An affinity sub-field: absent, empty (clears), or set.
fn affinity_part(key: &'static str) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![Just(None), Just(Some(json!({}))), Just(Some(term(key)))]
}

fn affinity() -> impl Strategy<Value = Option<Value>> {
    (
        any::<bool>(),
        prop_oneof![
            Just(None),
            Just(Some(json!({}))),
            Just(Some(
                json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}})
            ))
        ],
        affinity_part("zone"),
        affinity_part("host"),
    )
        .prop_map(|(present, node, pod, anti)| {
            present.then(|| {
                let mut affinity = serde_json::Map::new();
                for (key, part) in [
                    ("nodeAffinity", node),
                    ("podAffinity", pod),
                    ("podAntiAffinity", anti),
                ] {
                    if let Some(part) = part {
                        affinity.insert(key.to_owned(), part);
                    }
                }
                Value::Object(affinity)
            })
        })
}

fn pod_spec() -> impl Strategy<Value = Value> {
    (
        env_list(),
        mounts(),
        volumes(),
        tolerations(),
        affinity(),
        any::<bool>(),
    )
        .prop_map(|(env, mounts, volumes, tolerations, affinity, selector)| {
            let mut pod = json!({
                "containers": [{"name": "m", "env": env, "volumeMounts": mounts}, {"name": "s"}],
                "volumes": volumes,
                "tolerations": tolerations,
            });
            if let Some(affinity) = affinity {
                pod["affinity"] = affinity;
            }
            if selector {
                pod["nodeSelector"] = json!({"zone": "a"});
            }
            pod
        })
}

fn subscription_config() -> impl Strategy<Value = Value> {
    (
        env_list(),
        prop::collection::vec(name(), 0..3),
        volumes(),
        mounts(),
        tolerations(),
        any::<bool>(),
        prop::option::of(name()),
        affinity(),
        prop::collection::btree_map(name(), name(), 0..3),
    )
        .prop_map(
            |(env, env_from, volumes, mounts, tolerations, resources, zone, affinity, annotations)| {
                let mut cfg = json!({
                    "env": env,
                    "envFrom": env_from.into_iter().map(|n| json!({"configMapRef": {"name": n}})).collect::<Vec<_>>(),
                    "volumes": volumes,
                    "volumeMounts": mounts,
                    "tolerations": tolerations,
                    "annotations": annotations.into_iter().map(|(k, v)| (format!("gear.example.test/{k}"), v)).collect::<std::collections::BTreeMap<_, _>>(),
                });
                if resources {
                    cfg["resources"] = json!({"limits": {"cpu": "100m"}});
                }
                if let Some(zone) = zone {
                    cfg["nodeSelector"] = json!({"zone": zone});
                }
                if let Some(affinity) = affinity {
                    cfg["affinity"] = affinity;
                }
                cfg
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The merge is idempotent: what a config adds, it adds once, so a
    /// Deployment built, read back and merged again stays the same (and so
    /// does its spec hash).
    #[test]
    fn applying_a_config_twice_equals_applying_it_once(pod in pod_spec(), cfg in subscription_config()) {
        let cfg = config(cfg);
        let overrides = DeploymentOverrides { config: Some(&cfg), ..DeploymentOverrides::default() };
        let mut once = deployment(pod);
        apply_overrides(&mut once, overrides);
        let mut twice = once.clone();
        apply_overrides(&mut twice, overrides);
        prop_assert_eq!(
            serde_json::to_value(&twice).unwrap(),
            serde_json::to_value(&once).unwrap()
        );
    }

    /// Whatever a config sets, every container carries the config's value of
    /// each variable it names (the last one, for a repeated name), exactly once.
    #[test]
    fn the_configs_env_wins_in_every_container(pod in pod_spec(), cfg in subscription_config()) {
        let cfg = config(cfg);
        let mut deployment = deployment(pod);
        apply_overrides(&mut deployment, DeploymentOverrides { config: Some(&cfg), ..DeploymentOverrides::default() });
        let pod = deployment.spec.unwrap().template.spec.unwrap();
        for container in &pod.containers {
            let env = container.env.clone().unwrap_or_default();
            for wanted in &cfg.env {
                let last = cfg.env.iter().rev().find(|e| e.name == wanted.name).unwrap();
                let found: Vec<_> = env.iter().filter(|e| e.name == wanted.name).collect();
                prop_assert_eq!(found.len(), 1);
                prop_assert_eq!(found[0], last);
            }
        }
    }
}

#[test]
fn every_config_change_and_its_removal_move_the_spec_hash() {
    let group = gadget_group().targeting(&["gadget-system"]);
    let csv = widget_operator().member_of(&group);
    let strategy = &csv.spec.install.spec.deployments[0];
    let hash_with = |cfg: Option<&SubscriptionConfig>| {
        build_deployment(
            &csv,
            strategy,
            DeploymentOverrides {
                config: cfg,
                ..DeploymentOverrides::default()
            },
        )
        .unwrap()
        .metadata
        .labels
        .unwrap()[labels::DEPLOYMENT_SPEC_HASH]
            .clone()
    };
    let plain = hash_with(None);
    assert_eq!(
        hash_with(Some(&config(json!({})))),
        plain,
        "an empty config is none"
    );
    let changes = [
        json!({"env": [{"name": "LOG_LEVEL", "value": "trace"}]}),
        json!({"envFrom": [{"secretRef": {"name": "s"}}]}),
        json!({"volumes": [{"name": "v", "emptyDir": {}}]}),
        json!({"volumeMounts": [{"name": "v", "mountPath": "/v"}]}),
        json!({"tolerations": [{"key": "k", "operator": "Exists"}]}),
        json!({"resources": {"limits": {"cpu": "1"}}}),
        json!({"nodeSelector": {"zone": "z"}}),
        json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}}),
        json!({"annotations": {"gear.example.test/new": "1"}}),
    ];
    let mut seen = vec![plain.clone()];
    for change in changes {
        let hash = hash_with(Some(&config(change.clone())));
        assert!(!seen.contains(&hash), "{change} must change the hash");
        seen.push(hash);
    }
    assert_eq!(
        hash_with(None),
        plain,
        "removing the config restores the hash"
    );
}
